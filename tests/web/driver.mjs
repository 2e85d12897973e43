// One small page API over two browser drivers, so that the console test
// runs unchanged in Chromium (playwright-core, DevTools protocol) and in
// Firefox (puppeteer-core, WebDriver BiDi: stock Firefox, no patched build).
//
//   const page = await open('firefox', { executablePath, nodeModules, problems, base });
//
// `problems` collects console errors, page errors and requests that leave
// `base`; the test fails on any.
import { createRequire } from 'node:module';

export async function open(browserName, { executablePath, nodeModules, problems, base }) {
  const require = createRequire(nodeModules + '/');
  const watch = (page) => {
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`${browserName}: console error: ${message.text()}`);
    });
    page.on('pageerror', (error) => problems.push(`${browserName}: page error: ${error}`));
    page.on('request', (request) => {
      const url = request.url();
      if (!url.startsWith(base) && !url.startsWith('data:') && !url.startsWith('about:')) {
        problems.push(`${browserName}: external request: ${url}`);
      }
    });
  };
  if (browserName === 'chromium') {
    const { chromium } = require('playwright-core');
    const browser = await chromium.launch({
      executablePath,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
        '--disable-component-update', '--disable-sync'],
    });
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    watch(page);
    return {
      goto: (url) => page.goto(url),
      waitFor: (selector, timeout = 30000) => page.waitForSelector(selector, { state: 'attached', timeout }),
      exists: async (selector) => (await page.$(selector)) !== null,
      count: async (selector) => (await page.$$(selector)).length,
      text: (selector) => page.textContent(selector),
      texts: (selector) => page.$$eval(selector, (items) => items.map((i) => i.textContent)),
      fill: (selector, value) => page.fill(selector, value),
      click: (selector) => page.click(selector),
      focus: (selector) => page.focus(selector),
      press: (key) => page.keyboard.press(key),
      evaluate: (fn) => page.evaluate(fn),
      waitForFunction: (fn, arg, timeout = 30000) => page.waitForFunction(fn, arg, { timeout }),
      setViewport: (width, height) => page.setViewportSize({ width, height }),
      screenshot: (path) => page.screenshot({ path, fullPage: true }),
      close: () => browser.close(),
    };
  }
  if (browserName === 'firefox') {
    const puppeteer = require('puppeteer-core');
    const browser = await puppeteer.launch({
      browser: 'firefox',
      executablePath,
      headless: true,
      extraPrefsFirefox: {
        // No update checks, telemetry or remote settings from the browser itself.
        'app.update.enabled': false,
        'datareporting.policy.dataSubmissionEnabled': false,
        'toolkit.telemetry.enabled': false,
      },
    });
    const page = await browser.newPage();
    await firefoxViewport(page, { width: 1280, height: 900 });
    watch(page);
    return {
      goto: (url) => page.goto(url),
      waitFor: (selector, timeout = 30000) => page.waitForSelector(selector, { timeout }),
      exists: async (selector) => (await page.$(selector)) !== null,
      count: async (selector) => (await page.$$(selector)).length,
      text: (selector) => page.$eval(selector, (e) => e.textContent),
      texts: (selector) => page.$$eval(selector, (items) => items.map((i) => i.textContent)),
      // What a user's paste does: the value changes and an input event fires.
      fill: (selector, value) => page.$eval(selector, (e, v) => {
        e.focus();
        e.value = v;
        e.dispatchEvent(new Event('input', { bubbles: true }));
      }, value),
      click: (selector) => page.click(selector),
      focus: (selector) => page.focus(selector),
      press: (key) => page.keyboard.press(key),
      evaluate: (fn) => page.evaluate(fn),
      waitForFunction: (fn, arg, timeout = 30000) => page.waitForFunction(fn, { timeout }, arg),
      setViewport: (width, height) => firefoxViewport(page, { width, height }),
      screenshot: (path) => page.screenshot({ path, fullPage: true }),
      close: () => browser.close(),
    };
  }
  throw new Error(`unknown browser ${browserName}`);
}

// Puppeteer sends the viewport and a screen orientation override together;
// Firefox ESR 140's WebDriver BiDi has no emulation.setScreenOrientationOverride
// and refuses that one command (the viewport itself is set). Only that
// refusal is let through; the viewport is checked as the page sees it.
async function firefoxViewport(page, viewport) {
  try {
    await page.setViewport(viewport);
  } catch (error) {
    if (!String(error?.message).includes('emulation.setScreenOrientationOverride')) {
      throw error;
    }
  }
  // The viewport command was sent beside the refused one: wait for it.
  let width = 0;
  for (let tries = 0; tries < 50; tries++) {
    width = await page.evaluate(() => window.innerWidth);
    if (width === viewport.width) {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`firefox: viewport ${viewport.width} wide asked, the page is ${width}`);
}
