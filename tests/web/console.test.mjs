// The web console end to end, in headless Chromium or Firefox against a real eddy
// serve (started by scripts/web-test.sh): write a query with a typo and see
// the error marked at its line, a Python function's body checked the same
// way, fix it, submit, see the job running with its
// graph, a chart with at least two points and rows arriving in the tail
// (paused and resumed), see it in the jobs list, stop it; an updating job
// (GROUP BY without a window) drawn as updating with its rows tailed with
// their kinds, then edited: a query added, checked (kept and started shown)
// and redeployed; a materialized view listed with its key and its rows
// shown; at 1280 px and at
// phone width; keyboard focus; no console error and no request that leaves
// the server. A screenshot of every screen goes to the output directory.
import assert from 'node:assert/strict';

import { open } from './driver.mjs';

// node console.test.mjs BASE OUT BROWSER EXECUTABLE
const [base, out, browserName, executablePath] = process.argv.slice(2);

const SOURCE = `-- Orders from eddy's generator, paced to the wall clock.
CREATE TABLE orders (
  order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'generator', stream = 'orders', rate = '200', count = '1000000', realtime = 'true');
CREATE TABLE big_orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE) WITH (connector = 'stdout');
`;
// Line 9 holds the typo: the column is order_amount.
const TYPO = SOURCE + `INSERT INTO big_orders
SELECT order_id, customer_id, order_amont FROM orders WHERE order_amount > 20;
`;
const FIXED = TYPO.replace('order_amont', 'order_amount');
// A Python function that raises on big orders (their value NULL, counted).
const PYTHON_RAISING = SOURCE + `CREATE FUNCTION risk(amount DOUBLE) RETURNS VARCHAR LANGUAGE PYTHON AS $$
def risk(amount):
    if amount > 100:
        raise ValueError('a big order')
    return 'low'
$$;
INSERT INTO big_orders SELECT order_id, risk(order_amount), order_amount FROM orders;
CREATE TABLE lake (order_id VARCHAR, order_amount DOUBLE) WITH (connector = 'delta', path = 'console-lake');
INSERT INTO lake SELECT order_id, order_amount FROM orders;
`;
// A Python function whose body (line 9) lacks a colon.
const PYTHON_TYPO = SOURCE + `CREATE FUNCTION risk(amount DOUBLE) RETURNS VARCHAR LANGUAGE PYTHON AS $$
def risk(amount)
    return 'high' if amount > 100 else 'low'
$$;
INSERT INTO big_orders SELECT order_id, risk(order_amount), order_amount FROM orders;
`;
// A GROUP BY without a window: a result that changes, tailed as a changelog.
const UPDATING = SOURCE.replace(
  'CREATE TABLE big_orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE)',
  'CREATE TABLE per_customer (customer_id VARCHAR, orders BIGINT)',
) + `INSERT INTO per_customer
SELECT customer_id, count(*) AS orders FROM orders GROUP BY customer_id;
`;
// The same GROUP BY kept as a materialized view (the `view` connector).
const VIEW = SOURCE.replace(
  'CREATE TABLE big_orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE) WITH (connector = \'stdout\');',
  'CREATE TABLE customer_orders WITH (connector = \'view\');',
) + `INSERT INTO customer_orders
SELECT customer_id, count(*) AS orders FROM orders GROUP BY customer_id;
`;
// The updating job with a second query added, for "Edit and redeploy".
const GROWN = UPDATING + `CREATE TABLE big (order_id VARCHAR) WITH (connector = 'stdout');
INSERT INTO big SELECT order_id FROM orders WHERE order_amount > 100;
`;

const problems = [];
const page = await open(browserName, { executablePath, nodeModules: process.env.NODE_MODULES, problems, base });
const shot = (name) => page.screenshot(`${out}/${browserName}-${name}.png`);
const step = (text) => console.log(`web-test (${browserName}): ${text}`);
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

try {
  await page.goto(`${base}/`);
  await page.waitFor('#examples option:nth-child(2)');
  await shot('1-home');
  step('home page with its examples');

  // A typo is marked at its line while typing.
  await page.fill('#sql', TYPO);
  await page.waitFor('#backdrop mark[data-line="9"]', 10000);
  assert.equal(await page.text('#backdrop mark'), 'order_amont');
  assert.match(await page.text('#sql-status'), /^Line 9, column \d+: .*order_amont/);
  assert.equal(await page.text('#gutter .error'), '9');
  await shot('2-error-marked');
  step('the typo is marked at line 9');

  // A Python function's body is loaded as it is typed (the server runs
  // with --allow-python-udfs): an error in it is marked at its line.
  await page.fill('#sql', PYTHON_TYPO);
  await page.waitFor('#backdrop mark[data-line="9"]', 15000);
  assert.equal(await page.text('#backdrop mark'), 'def');
  assert.match(await page.text('#sql-status'), /^Line 9, column 1: python function risk: the body of risk does not parse: expected ':'/);
  await shot('2b-python-error-marked');
  await page.fill('#sql', PYTHON_TYPO.replace('def risk(amount)', 'def risk(amount):'));
  await page.waitFor('#sql-status.ok', 15000);
  step('a Python function: the error in its body marked at its line, then checked');

  // Fixed, it validates; submitted, the job runs.
  await page.fill('#sql', FIXED);
  await page.waitFor('#sql-status.ok', 10000);
  assert.equal(await page.exists('#backdrop mark'), false);
  await page.fill('#job-name', 'big-orders');
  await page.fill('#job-parallelism', '2');
  await page.click('#submit');
  await page.waitForFunction(() => /#\/jobs\/[a-z0-9]+/.test(location.hash), null);
  await page.waitFor('#job-state.running');
  // The job runs with the instances asked for.
  await page.waitForFunction(
    () => [...document.querySelectorAll('#job-figures div')].some((d) => d.textContent === '2instances'),
    null,
    10000,
  );
  step('submitted and running, with 2 instances');

  // Its graph, a chart with two points or more, rows in the tail.
  await page.waitFor('#graph svg .node[data-kind="source"]');
  assert.ok((await page.count('#graph svg .node')) >= 3, 'source, calc and sink are drawn');
  assert.ok((await page.count('#graph svg path.edge')) >= 2, 'edges are drawn');
  // The job's one-consumer edges are chained: drawn thick, the tasks counted.
  assert.ok((await page.count('#graph svg path.edge.chained')) >= 1, 'chained edges are drawn');
  assert.match(await page.text('#graph-tasks'), /^\d+ nodes run as \d+ tasks?;/);
  await page.waitForFunction(
    () => [...document.querySelectorAll('#chart-events polyline')].some((p) => Number(p.dataset.points) >= 2),
    null,
    20000,
  );
  // The generator's event time is from 2023: its chart shows how far
  // event time advanced, not a lag of years.
  await page.waitForFunction(
    () => document.querySelector('#chart-lag figcaption').textContent === 'Event time advanced per source (s)',
    null,
    10000,
  );
  await page.waitForFunction(() => document.querySelectorAll('#tail li').length >= 5, null, 20000);
  const row = JSON.parse(await page.text('#tail li:first-child'));
  assert.ok(row.order_id.startsWith('order-') && row.order_amount > 20, JSON.stringify(row));
  await shot('3-job-running');
  step('graph, chart and tail');

  // Pause stops the tail; resume starts it again.
  await page.click('#tail-toggle');
  assert.equal(await page.text('#tail-toggle'), 'Resume');
  const paused = (await page.texts('#tail li')).join('\n');
  await sleep(1500);
  assert.equal((await page.texts('#tail li')).join('\n'), paused, 'no rows while paused');
  await page.click('#tail-toggle');
  assert.equal(await page.text('#tail-toggle'), 'Pause');
  await page.waitForFunction((before) => document.querySelector('#tail').textContent !== before, paused.replaceAll('\n', ''), 10000);
  step('tail paused and resumed');

  // The jobs list shows it running, then the job is stopped.
  await page.click('a[href="#/"]');
  await page.waitFor('#jobs-body tr[data-state="running"]');
  assert.match(await page.text('#jobs-body tr[data-state="running"]'), /big-orders/);
  await shot('4-jobs-list');
  await page.click('#jobs-body tr[data-state="running"] a');
  await page.waitFor('#job-state.running');
  await page.click('#job-stop');
  await page.waitFor('#job-state.stopped', 20000);
  await shot('5-job-stopped');
  step('stopped');

  // Keyboard: Tab moves through the controls, Enter follows the job link.
  await page.click('a[href="#/"]');
  await page.waitFor('#jobs-body tr');
  await page.focus('#jobs-body a');
  await page.press('Enter');
  await page.waitFor('#job-state.stopped');
  await page.press('Tab');
  const focused = await page.evaluate(() => document.activeElement && document.activeElement.tagName);
  assert.ok(['A', 'BUTTON', 'SELECT', 'INPUT', 'TEXTAREA'].includes(focused), `focus on ${focused}`);
  step('keyboard');

  // An updating query: its aggregate is drawn as updating, and its rows
  // tail with their kinds, retractions marked.
  await page.goto(`${base}/`);
  await page.waitFor('#examples option:nth-child(2)');
  await page.fill('#sql', UPDATING);
  await page.waitFor('#sql-status.ok', 10000);
  await page.fill('#job-name', 'per-customer');
  await page.fill('#job-parallelism', '1');
  await page.click('#submit');
  await page.waitForFunction(() => /#\/jobs\/[a-z0-9]+/.test(location.hash), null);
  await page.waitFor('#job-state.running');
  await page.waitFor('#graph svg .node.updating[data-kind="updating_aggregate"]');
  await page.waitForFunction(
    () => [...document.querySelectorAll('#tail li')].some((li) => li.textContent.startsWith('-U ')),
    null,
    30000,
  );
  const lines = await page.texts('#tail li');
  assert.ok(lines.every((line) => /^(\+I|-U|\+U|-D) \{/.test(line)), `kinds on every line: ${lines.slice(0, 3)}`);
  const retraction = await page.text('#tail li.retraction');
  assert.match(retraction, /^-U \{"customer_id":"[^"]+","orders":\d+\}$/);
  await shot('5b-updating-job');
  step('an updating job: drawn as updating, its tail with row kinds');

  // Edit and redeploy: Check says what the new SQL would keep and start,
  // against the newest checkpoint, the job running on; Redeploy does it.
  await page.click('#redeploy summary');
  assert.match(await page.evaluate(() => document.querySelector('#redeploy-sql').value), /per_customer/);
  await page.fill('#redeploy-sql', GROWN);
  let checked = '';
  for (let i = 0; i < 20 && !/^Checked against checkpoint \d+/.test(checked); i++) {
    await page.click('#redeploy-check');
    await page.waitForFunction(() => !/^Checking/.test(document.querySelector('#redeploy-status').textContent), null, 10000);
    checked = await page.text('#redeploy-status');
    if (!/^Checked/.test(checked)) await sleep(500);
  }
  assert.match(checked, /^Checked against checkpoint \d+/);
  assert.match(await page.text('#redeploy-plan dd.kept'), /updating_aggregate.*per_customer|per_customer.*updating_aggregate/);
  assert.match(await page.text('#redeploy-plan dd.started'), /\bbig\b/);
  assert.equal(await page.text('#redeploy-plan dd.dropped'), 'none');
  // Checking leaves the job running (the state line may be redrawn while
  // the check's answer arrives: wait for it rather than read it once).
  await page.waitFor('#job-state.running', 10000);
  await shot('5c-redeploy-checked');
  await page.click('#redeploy-go');
  await page.waitForFunction(() => document.querySelector('#redeploy-status').textContent === 'Redeployed.', null, 30000);
  assert.match(await page.text('#redeploy-plan dd.kept'), /updating_aggregate/);
  await page.waitFor('#job-state.running', 20000);
  step('edit and redeploy: checked, then redeployed keeping the aggregate');
  await page.click('#job-stop');
  await page.waitFor('#job-state.stopped', 20000);

  // A materialized view: listed on the home page with its key, rows and
  // checkpoint; its rows shown on request.
  await page.goto(`${base}/`);
  await page.waitFor('#examples option:nth-child(2)');
  await page.fill('#sql', VIEW);
  await page.waitFor('#sql-status.ok', 10000);
  await page.fill('#job-name', 'customer-view');
  await page.fill('#job-parallelism', '1');
  await page.click('#submit');
  await page.waitForFunction(() => /#\/jobs\/[a-z0-9]+/.test(location.hash), null);
  await page.waitFor('#job-state.running');
  const viewJob = await page.evaluate(() => location.hash);
  await page.click('a[href="#/"]');
  await page.waitForFunction(
    () => {
      const row = document.querySelector('#views-body tr[data-view="customer_orders"]');
      return row && Number(row.children[3].textContent) > 0 && Number(row.children[2].textContent.replace(/\D/g, '')) > 0;
    },
    null,
    30000,
  );
  assert.equal(await page.text('#views-body tr[data-view="customer_orders"] td:nth-child(2)'), 'customer_id');
  await page.click('#views-body tr[data-view="customer_orders"] button');
  await page.waitFor('#view-rows:not([hidden]) #view-rows-body tr');
  assert.deepEqual(await page.texts('#view-rows-head th'), ['customer_id', 'orders']);
  assert.match(await page.text('#view-rows-title'), /^customer_orders: [\d,]+ rows as of checkpoint \d+/);
  await shot('5e-views');
  step('a materialized view: listed with its key, rows and checkpoint; its rows shown');
  await page.goto(`${base}/${viewJob}`);
  await page.waitFor('#job-state.running');
  await page.click('#job-stop');
  await page.waitFor('#job-state.stopped', 20000);

  // A job with a Python function: its page counts the rows the function
  // was called on and those that raised, with the first message.
  await page.goto(`${base}/`);
  await page.waitFor('#examples option:nth-child(2)');
  await page.fill('#sql', PYTHON_RAISING);
  await page.waitFor('#sql-status.ok', 15000);
  await page.fill('#job-name', 'risk');
  await page.fill('#job-parallelism', '1');
  await page.click('#submit');
  await page.waitForFunction(() => /#\/jobs\/[a-z0-9]+/.test(location.hash), null);
  await page.waitForFunction(
    () => {
      const cells = [...document.querySelectorAll('#python-table tbody td')].map((td) => td.textContent);
      return cells[0] === 'risk' && Number(cells[3].replace(/\D/g, '')) > 0;
    },
    null,
    30000,
  );
  assert.equal((await page.texts('#python-table tbody td'))[4], 'ValueError: a big order');
  // Its Delta sink's commits, counted on the page as checkpoints complete,
  // beside where its paced generator started.
  await page.waitForFunction(
    () => {
      const lines = [...document.querySelectorAll('#connector-lines li')].map((li) => li.textContent);
      return lines.some((l) => /^delta sink lake: [1-9]\d* commits, /.test(l))
        && lines.some((l) => /^generator orders: paced from event time \d+ at wall clock \d+/.test(l));
    },
    null,
    30000,
  );
  await shot('5d-python-job');
  await page.click('#job-stop');
  await page.waitFor('#job-state.stopped', 20000);
  step('a job with a Python function and a Delta sink: rows, raised rows, commits and its generator\'s start on its page');

  // Phone width: nothing wider than the screen.
  await page.setViewport(390, 844);
  await page.goto(`${base}/#/`);
  await page.waitFor('#jobs-body tr');
  await shot('6-phone-home');
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `the page is ${overflow}px wider than a phone`);
  step('phone width');
} catch (e) {
  // What the server says of its jobs, to tell a failed job from a slow page.
  const jobs = await fetch(`${base}/api/v1/jobs`)
    .then((r) => r.json())
    .catch((err) => `unreadable: ${err}`);
  const states = Array.isArray(jobs) ? jobs.map((j) => `${j.id} ${j.name}: ${j.state}${j.error ? ` (${j.error})` : ''}`) : [jobs];
  console.error(`web-test (${browserName}): failed at ${page.url ? page.url() : '?'}; the server's jobs:\n  ${states.join('\n  ')}`);
  throw e;
} finally {
  await page.close();
}
if (problems.length) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(`web-test (${browserName}): passed`);
