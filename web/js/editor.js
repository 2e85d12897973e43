// The SQL editor: validation as you type (errors marked at their line and
// column), parameters, examples, submitting.

import { $, ApiError, api, state } from './core.js';
import { button, escapeHtml } from './format.js';

const sql = $('sql');

function errorToken(lines, line, column) {
  const text = lines[line - 1] || '';
  const start = Math.max(0, Math.min(column - 1, text.length));
  const word = text.slice(start).match(/^[A-Za-z0-9_$]+/);
  return { start, end: start + (word ? word[0].length : 1) };
}

export function renderCode(mark) {
  const text = sql.value;
  const lines = text.split('\n');
  $('gutter').innerHTML = lines
    .map((_, i) => (mark && mark.line === i + 1 ? `<span class="error">${i + 1}</span>` : String(i + 1)))
    .join('\n');
  if (!mark || mark.line < 1 || mark.line > lines.length) {
    $('backdrop').innerHTML = escapeHtml(text) + '\n';
    return;
  }
  const before = lines.slice(0, mark.line - 1).map((l) => l + '\n').join('');
  const { start, end } = errorToken(lines, mark.line, mark.column);
  const lineText = lines[mark.line - 1];
  const token = lineText.slice(start, end) || ' ';
  const after = lineText.slice(end) + lines.slice(mark.line).map((l) => '\n' + l).join('');
  $('backdrop').innerHTML =
    escapeHtml(before + lineText.slice(0, start)) +
    `<mark data-line="${mark.line}" data-column="${mark.column}">${escapeHtml(token)}</mark>` +
    escapeHtml(after) +
    '\n';
  syncScroll();
}

function syncScroll() {
  $('backdrop').scrollTop = sql.scrollTop;
  $('backdrop').scrollLeft = sql.scrollLeft;
  $('gutter').scrollTop = sql.scrollTop;
}

function showStatus(text, kind) {
  const status = $('sql-status');
  status.textContent = text;
  status.className = `status ${kind || ''}`;
}

function showError(error) {
  const body = error.body || {};
  if (body.line) {
    renderCode({ line: body.line, column: body.column || 1 });
    showStatus(`Line ${body.line}, column ${body.column}: ${body.error}`, 'error');
  } else {
    renderCode(null);
    showStatus(body.error || error.message, 'error');
  }
}

function params() {
  const out = {};
  for (const row of $('params').querySelectorAll('.param')) {
    const [name, value] = row.querySelectorAll('input');
    if (name.value.trim()) out[name.value.trim()] = value.value;
  }
  return out;
}

async function validate() {
  const mine = ++state.validation;
  if (!sql.value.trim()) {
    renderCode(null);
    showStatus('', '');
    return;
  }
  let result;
  try {
    result = await api('/api/v1/validate', { method: 'POST', body: { sql: sql.value, params: params() } });
  } catch (e) {
    if (mine === state.validation) showStatus(e.message, 'error');
    return;
  }
  if (mine !== state.validation) return;
  if (result.valid) {
    renderCode(null);
    showStatus(`Valid: ${result.graph.length} operators.`, 'ok');
  } else {
    showError(new ApiError(400, result.errors[0].error, result.errors[0]));
  }
}

sql.addEventListener('input', () => {
  renderCode(null);
  clearTimeout(state.validateTimer);
  state.validateTimer = setTimeout(validate, 300);
});
sql.addEventListener('scroll', syncScroll);
sql.addEventListener('keydown', (event) => {
  // Tab indents; Escape leaves the editor (keyboard users are not trapped).
  if (event.key === 'Tab' && !event.shiftKey && !event.ctrlKey && !event.metaKey) {
    event.preventDefault();
    const { selectionStart, selectionEnd, value } = sql;
    sql.value = value.slice(0, selectionStart) + '  ' + value.slice(selectionEnd);
    sql.selectionStart = sql.selectionEnd = selectionStart + 2;
    sql.dispatchEvent(new Event('input'));
  } else if (event.key === 'Escape') {
    $('add-param').focus();
  }
});

function addParam(name = '', value = '') {
  const row = document.createElement('div');
  row.className = 'param';
  const n = document.createElement('input');
  n.placeholder = 'NAME';
  n.value = name;
  n.setAttribute('aria-label', 'Parameter name');
  const v = document.createElement('input');
  v.placeholder = 'value';
  v.value = value;
  v.setAttribute('aria-label', 'Parameter value');
  const remove = button('Remove parameter', 'Remove', 'small secondary', () => {
    row.remove();
    validate();
  });
  for (const input of [n, v]) input.addEventListener('change', validate);
  row.append(n, v, remove);
  $('params').append(row);
  n.focus();
}

$('add-param').addEventListener('click', () => addParam());

$('submit').addEventListener('click', async () => {
  const submit = $('submit');
  submit.disabled = true;
  try {
    const job = await api('/api/v1/jobs', {
      method: 'POST',
      body: {
        name: $('job-name').value.trim() || null,
        sql: sql.value,
        params: params(),
        // Empty: the server's default (one instance per core).
        parallelism: Number($('job-parallelism').value) || null,
      },
    });
    showStatus(`Submitted ${job.name}.`, 'ok');
    location.hash = `#/jobs/${job.id}`;
  } catch (e) {
    showError(e);
  } finally {
    submit.disabled = false;
  }
});

export async function loadExamples() {
  let examples;
  try {
    examples = await api('/api/v1/examples');
  } catch (e) {
    return;
  }
  const select = $('examples');
  for (const [i, example] of examples.entries()) {
    const option = document.createElement('option');
    option.value = String(i);
    option.textContent = example.name;
    select.append(option);
  }
  select.addEventListener('change', () => {
    const example = examples[Number(select.value)];
    sql.value = example ? example.sql : '';
    if (example && !$('job-name').value) $('job-name').value = example.name.replace(/[^A-Za-z0-9]+/g, '-').toLowerCase();
    sql.dispatchEvent(new Event('input'));
  });
}
