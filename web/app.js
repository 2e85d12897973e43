// eddy console: the jobs list, a SQL editor that validates as you type, and a
// job view (operator graph, event-time health charts, live sink output).
// Plain modules, no build step, no request leaves the eddy server.

const PALETTE = ['#1f6feb', '#1a7f37', '#9a6700', '#8250df', '#cf222e', '#0a7ea4', '#bf3989'];
const STATEFUL = new Set([
  'window_aggregate', 'session_aggregate', 'window_rank', 'interval_join', 'regular_join', 'over',
  'updating_aggregate', 'updating_rank', 'updating_join',
]);
const TAIL_ROWS = 200;

const state = {
  token: sessionStorage.getItem('eddy-token') || '',
  timer: null,
  validateTimer: null,
  validation: 0,
  jobId: null,
  job: null,
  graphKey: '',
  tail: null,
  tailSink: '',
  tailPaused: false,
  tailEnded: false,
};

const $ = (id) => document.getElementById(id);

class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

function setConnection(text) {
  $('connection').textContent = text;
}

async function api(path, options = {}) {
  const headers = {};
  if (options.body !== undefined) headers['Content-Type'] = 'application/json';
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  let response;
  try {
    response = await fetch(path, {
      method: options.method || 'GET',
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
  } catch (e) {
    setConnection('cannot reach the eddy server');
    throw new ApiError(0, 'cannot reach the eddy server');
  }
  setConnection('');
  if (response.status === 401) {
    askToken();
    throw new ApiError(401, 'this server needs a token');
  }
  const text = await response.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch (e) {
    body = { error: text };
  }
  if (!response.ok) throw new ApiError(response.status, (body && body.error) || response.statusText, body);
  return body;
}

function askToken() {
  const dialog = $('token-dialog');
  if (!dialog.open) dialog.showModal();
}

$('token-form').addEventListener('submit', () => {
  state.token = $('token-input').value.trim();
  sessionStorage.setItem('eddy-token', state.token);
  route();
});

// ---------- formatting ----------

function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
}

function fmtNumber(n) {
  if (n === null || n === undefined) return '–';
  const abs = Math.abs(n);
  if (abs >= 1e9) return (n / 1e9).toFixed(1) + 'G';
  if (abs >= 1e6) return (n / 1e6).toFixed(1) + 'M';
  if (abs >= 1e4) return (n / 1e3).toFixed(1) + 'k';
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}

function fmtBytes(n) {
  if (!n) return '0 B';
  if (n >= 1 << 30) return (n / (1 << 30)).toFixed(1) + ' GiB';
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + ' MiB';
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + ' KiB';
  return n + ' B';
}

function fmtDuration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '–';
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
  return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
}

function fmtLag(ms) {
  return ms === null || ms === undefined ? '–' : fmtDuration(ms);
}

function uptime(job) {
  if (!job.started_at) return null;
  const end = job.ended_at ? Date.parse(job.ended_at) : Date.now();
  return end - Date.parse(job.started_at);
}

function badge(stateName) {
  const span = document.createElement('span');
  span.className = `state ${stateName}`;
  span.textContent = stateName;
  return span;
}

function button(label, text, className, onClick) {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = text;
  b.className = className;
  b.setAttribute('aria-label', label);
  b.addEventListener('click', onClick);
  return b;
}

// ---------- routing ----------

function route() {
  clearInterval(state.timer);
  state.timer = null;
  const match = location.hash.match(/^#\/jobs\/([A-Za-z0-9_-]+)/);
  if (match) {
    $('home').hidden = true;
    $('job').hidden = false;
    openJob(match[1]);
  } else {
    closeTail();
    state.jobId = null;
    $('job').hidden = true;
    $('home').hidden = false;
    refreshJobs();
    state.timer = setInterval(refreshJobs, 1000);
  }
}

window.addEventListener('hashchange', route);

// ---------- jobs list ----------

async function refreshJobs() {
  let jobs;
  try {
    jobs = await api('/api/v1/jobs');
  } catch (e) {
    return;
  }
  const body = $('jobs-body');
  body.replaceChildren();
  for (const job of jobs) {
    const row = document.createElement('tr');
    row.dataset.id = job.id;
    row.dataset.state = job.state;
    const name = document.createElement('td');
    const link = document.createElement('a');
    link.href = `#/jobs/${job.id}`;
    link.textContent = job.name;
    name.append(link);
    const cells = [
      name,
      cell(badge(job.state)),
      cell(fmtDuration(uptime(job))),
      cell(fmtNumber(job.events_per_second), 'num'),
      cell(fmtLag(job.watermark_lag_ms), 'num'),
      cell(fmtNumber(job.late_rows), 'num'),
      cell(fmtNumber(job.bad_rows), 'num'),
    ];
    const actions = document.createElement('td');
    actions.className = 'actions';
    if (job.state === 'running') {
      actions.append(button(`Stop ${job.name}`, 'Stop', 'small secondary', () => stopJob(job.id)));
    }
    actions.append(button(`Delete ${job.name}`, 'Delete', 'small danger', () => deleteJob(job.id)));
    cells.push(actions);
    row.append(...cells);
    body.append(row);
  }
  $('jobs-empty').hidden = jobs.length > 0;
}

function cell(content, className) {
  const td = document.createElement('td');
  if (className) td.className = className;
  td.append(content);
  return td;
}

async function stopJob(id) {
  try {
    await api(`/api/v1/jobs/${id}/stop`, { method: 'POST', body: {} });
  } catch (e) {
    setConnection(e.message);
  }
  if (state.jobId === id) refreshJob();
  else refreshJobs();
}

async function deleteJob(id) {
  try {
    await api(`/api/v1/jobs/${id}`, { method: 'DELETE' });
  } catch (e) {
    setConnection(e.message);
  }
  if (state.jobId === id) location.hash = '#/';
  else refreshJobs();
}

// ---------- editor ----------

const sql = $('sql');

function errorToken(lines, line, column) {
  const text = lines[line - 1] || '';
  const start = Math.max(0, Math.min(column - 1, text.length));
  const word = text.slice(start).match(/^[A-Za-z0-9_$]+/);
  return { start, end: start + (word ? word[0].length : 1) };
}

function renderCode(mark) {
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

async function loadExamples() {
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

// ---------- job view ----------

function openJob(id) {
  if (state.jobId !== id) {
    closeTail();
    state.jobId = id;
    state.job = null;
    state.graphKey = '';
    state.tailSink = '';
    state.tailPaused = false;
    state.tailEnded = false;
    $('tail').replaceChildren();
    $('tail-sink').replaceChildren();
    $('tail-toggle').textContent = 'Pause';
  }
  refreshJob();
  state.timer = setInterval(refreshJob, 1000);
}

async function refreshJob() {
  const id = state.jobId;
  if (!id) return;
  let job;
  try {
    job = await api(`/api/v1/jobs/${id}`);
  } catch (e) {
    if (e.status === 404 && state.jobId === id) location.hash = '#/';
    return;
  }
  if (state.jobId !== id) return;
  state.job = job;
  renderJob(job);
}

function renderJob(job) {
  $('job-title').textContent = job.name;
  $('job-state').replaceWith(Object.assign(badge(job.state), { id: 'job-state' }));
  $('job-uptime').textContent = `up ${fmtDuration(uptime(job))}`;
  $('job-stop').disabled = job.state !== 'running';
  $('job-error').hidden = !job.error;
  $('job-error').textContent = job.error || '';
  const stateBytes = job.metrics.reduce((sum, m) => sum + m.state_bytes, 0);
  const figures = [
    ['events/s', fmtNumber(job.events_per_second)],
    ['watermark lag', fmtLag(job.watermark_lag_ms)],
    ['late rows', fmtNumber(job.late_rows)],
    ['bad rows', fmtNumber(job.bad_rows)],
    ['state', fmtBytes(stateBytes)],
    ['instances', job.parallelism],
    ['checkpoints', `${job.checkpoints.completed}${job.checkpoints.restored_from ? ` (resumed from #${job.checkpoints.restored_from})` : ''}`],
  ];
  $('job-figures').innerHTML = figures
    .map(([label, value]) => `<div><b>${escapeHtml(String(value))}</b><span>${escapeHtml(label)}</span></div>`)
    .join('');
  renderGraph(job);
  renderCharts(job);
  renderSources(job);
  setupTail(job);
}

$('job-stop').addEventListener('click', () => state.jobId && stopJob(state.jobId));
$('job-delete').addEventListener('click', () => state.jobId && deleteJob(state.jobId));

function layout(graph) {
  const layer = new Map();
  for (const node of graph) {
    const inputs = node.inputs.map((e) => layer.get(e.from) ?? 0);
    layer.set(node.id, inputs.length ? Math.max(...inputs) + 1 : 0);
  }
  const columns = [];
  for (const node of graph) {
    const l = layer.get(node.id);
    (columns[l] ||= []).push(node.id);
  }
  const position = new Map();
  columns.forEach((ids, l) => ids.forEach((id, i) => position.set(id, { x: 10 + l * 230, y: 10 + i * 84 })));
  const width = 20 + columns.length * 230 - 40;
  const height = 20 + Math.max(...columns.map((c) => c.length)) * 84 - 14;
  return { position, width, height };
}

function renderGraph(job) {
  const metrics = new Map(job.metrics.map((m) => [m.id, m]));
  const key = job.graph.map((n) => `${n.id}:${n.inputs.map((e) => e.from).join(',')}`).join(';');
  const { position, width, height } = layout(job.graph);
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('class', 'graph');
  svg.setAttribute('width', width);
  svg.setAttribute('height', height);
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', `Operator graph with ${job.graph.length} nodes`);
  for (const node of job.graph) {
    const to = position.get(node.id);
    for (const edge of node.inputs) {
      const from = position.get(edge.from);
      const path = document.createElementNS(ns, 'path');
      const [x1, y1, x2, y2] = [from.x + 190, from.y + 35, to.x, to.y + 35];
      path.setAttribute('d', `M${x1},${y1} C${x1 + 25},${y1} ${x2 - 25},${y2} ${x2},${y2}`);
      path.setAttribute('class', `edge ${edge.port === 'late' ? 'late' : ''}`);
      svg.append(path);
    }
  }
  for (const node of job.graph) {
    const { x, y } = position.get(node.id);
    const m = metrics.get(node.id) || {};
    const group = document.createElementNS(ns, 'g');
    const kindClass = node.kind === 'source' || node.kind === 'sink' ? node.kind : STATEFUL.has(node.kind) ? 'stateful' : '';
    group.setAttribute('class', `node ${kindClass}${node.updating ? ' updating' : ''}`);
    group.setAttribute('data-kind', node.kind);
    const title = document.createElementNS(ns, 'title');
    title.textContent = node.description;
    const rect = document.createElementNS(ns, 'rect');
    rect.setAttribute('x', x);
    rect.setAttribute('y', y);
    rect.setAttribute('width', 190);
    rect.setAttribute('height', 70);
    group.append(title, rect);
    const lines = [
      [node.name, ''],
      [node.updating ? `${node.kind} · updating` : node.kind, 'kind'],
      [`in ${fmtNumber(m.rows_in)} · out ${fmtNumber(m.rows_out)}`, ''],
    ];
    if (STATEFUL.has(node.kind)) {
      lines.push([`state ${fmtNumber(m.state_rows)} (≤ ${fmtNumber(m.peak_state_rows)}) · ${fmtBytes(m.state_bytes)}`, 'kind']);
    }
    else if (node.kind === 'source') lines.push([`late ${fmtNumber(m.late_rows)} · bad ${fmtNumber(m.bad_rows)}`, 'kind']);
    lines.forEach(([text, cls], i) => {
      const t = document.createElementNS(ns, 'text');
      t.setAttribute('x', x + 8);
      t.setAttribute('y', y + 16 + i * 15);
      if (cls) t.setAttribute('class', cls);
      if (i === 0) t.setAttribute('font-weight', '600');
      t.textContent = text.length > 30 ? text.slice(0, 29) + '…' : text;
      group.append(t);
    });
    svg.append(group);
  }
  $('graph').replaceChildren(svg);
  state.graphKey = key;
}

function lineChart(figure, series, format) {
  const ns = 'http://www.w3.org/2000/svg';
  const [w, h, left, bottom] = [400, 150, 44, 18];
  const points = series.flatMap((s) => s.points);
  figure.querySelectorAll('svg, .legend').forEach((e) => e.remove());
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', `0 0 ${w} ${h}`);
  svg.setAttribute('preserveAspectRatio', 'none');
  svg.setAttribute('role', 'img');
  const caption = figure.querySelector('figcaption').textContent;
  svg.setAttribute('aria-label', `${caption}: ${points.length ? 'latest ' + series.map((s) => `${s.name} ${format(s.points.at(-1)?.[1] ?? 0)}`).join(', ') : 'no data yet'}`);
  const t0 = points.length ? Math.min(...points.map((p) => p[0])) : 0;
  const t1 = points.length ? Math.max(...points.map((p) => p[0])) : 1;
  const vmax = Math.max(1, ...points.map((p) => p[1]));
  const sx = (t) => left + ((t - t0) / Math.max(1, t1 - t0)) * (w - left - 6);
  const sy = (v) => h - bottom - (v / vmax) * (h - bottom - 8);
  for (const frac of [0, 0.5, 1]) {
    const line = document.createElementNS(ns, 'line');
    line.setAttribute('x1', left);
    line.setAttribute('x2', w - 6);
    line.setAttribute('y1', sy(vmax * frac));
    line.setAttribute('y2', sy(vmax * frac));
    line.setAttribute('class', 'grid');
    const label = document.createElementNS(ns, 'text');
    label.setAttribute('x', 4);
    label.setAttribute('y', sy(vmax * frac) + 3);
    label.setAttribute('class', 'axis');
    label.textContent = format(vmax * frac);
    svg.append(line, label);
  }
  const span = document.createElementNS(ns, 'text');
  span.setAttribute('x', w - 6);
  span.setAttribute('y', h - 4);
  span.setAttribute('text-anchor', 'end');
  span.setAttribute('class', 'axis');
  span.textContent = points.length ? `last ${fmtDuration(t1 - t0)}` : 'waiting for samples';
  svg.append(span);
  series.forEach((s) => {
    if (!s.points.length) return;
    const line = document.createElementNS(ns, 'polyline');
    line.setAttribute('points', s.points.map(([t, v]) => `${sx(t).toFixed(1)},${sy(v).toFixed(1)}`).join(' '));
    line.setAttribute('stroke', s.color);
    if (s.dashed) line.setAttribute('stroke-dasharray', '4 3');
    line.dataset.points = String(s.points.length);
    svg.append(line);
  });
  const legend = document.createElement('div');
  legend.className = 'legend';
  legend.innerHTML = series
    .map((s) => `<span><i class="${s.dashed ? 'dashed' : ''}" style="--swatch:${s.color}"></i>${escapeHtml(s.name)}</span>`)
    .join('');
  figure.append(svg, legend);
}

function renderCharts(job) {
  const history = job.history || [];
  const names = [...new Set(history.flatMap((s) => s.sources.map((x) => x.name)))];
  const color = (i) => PALETTE[i % PALETTE.length];
  const per = (name, field, scale = 1) =>
    history.flatMap((s) => {
      const source = s.sources.find((x) => x.name === name);
      const value = source ? source[field] : null;
      return value === null || value === undefined ? [] : [[s.at_ms, value * scale]];
    });
  lineChart(
    $('chart-events'),
    [{ name: 'all sources', color: color(0), points: history.map((s) => [s.at_ms, s.events_per_second]) }].concat(
      names.length > 1 ? names.map((n, i) => ({ name: n, color: color(i + 1), points: per(n, 'events_per_second') })) : [],
    ),
    fmtNumber,
  );
  lineChart($('chart-lag'), names.map((n, i) => ({ name: n, color: color(i), points: per(n, 'watermark_lag_ms', 0.001) })), fmtNumber);
  lineChart(
    $('chart-late'),
    names.flatMap((n, i) => [
      { name: `${n} late`, color: color(i), points: per(n, 'late_rows') },
      { name: `${n} bad`, color: color(i), dashed: true, points: per(n, 'bad_rows') },
    ]),
    fmtNumber,
  );
}

function renderSources(job) {
  const sources = job.metrics.filter((m) => m.kind === 'source');
  const waiting = job.metrics.filter((m) => m.kind === 'window_aggregate').reduce((sum, m) => sum + m.state_rows, 0);
  const rows = sources
    .map(
      (m) => `<tr><td>${escapeHtml(m.name)}</td><td class="num">${fmtNumber(m.rows_in)}</td><td class="num">${fmtNumber(m.events_per_second)}</td>` +
        `<td class="num">${m.watermark ? escapeHtml(new Date(m.watermark).toISOString()) : '–'}</td><td class="num">${fmtLag(m.watermark_lag_ms)}</td>` +
        `<td class="num">${fmtNumber(m.late_rows)}</td><td class="num">${fmtNumber(m.bad_rows)}</td></tr>`,
    )
    .join('');
  $('sources-table').innerHTML =
    '<caption class="sr-only">Sources</caption><thead><tr><th scope="col">Source</th><th scope="col" class="num">Rows</th><th scope="col" class="num">Events/s</th>' +
    '<th scope="col" class="num">Watermark</th><th scope="col" class="num">Lag</th><th scope="col" class="num">Late</th><th scope="col" class="num">Bad</th></tr></thead>' +
    `<tbody>${rows}</tbody><tfoot><tr><td colspan="7" class="muted">${fmtNumber(waiting)} window groups waiting to fire</td></tr></tfoot>`;
}

// ---------- tail ----------

function closeTail() {
  if (state.tail) {
    state.tail.close();
    state.tail = null;
  }
}

function tailStatus(text) {
  $('tail-status').textContent = text;
}

function tailLine(text, className) {
  const list = $('tail');
  const li = document.createElement('li');
  li.textContent = text;
  if (className) li.className = className;
  list.append(li);
  while (list.children.length > TAIL_ROWS) list.firstElementChild.remove();
  list.scrollTop = list.scrollHeight;
}

function setupTail(job) {
  const select = $('tail-sink');
  if (!select.options.length) {
    for (const sink of job.sinks) {
      const option = document.createElement('option');
      option.value = sink;
      option.textContent = sink;
      select.append(option);
    }
    state.tailSink = job.sinks[0] || '';
  }
  if (job.state !== 'running') {
    closeTail();
    $('tail-toggle').disabled = true;
    if (!state.tailEnded) tailStatus(`the job is ${job.state}`);
    return;
  }
  $('tail-toggle').disabled = false;
  if (!state.tail && !state.tailPaused && state.tailSink) openTail(job.id, state.tailSink);
}

function openTail(id, sink) {
  closeTail();
  const query = state.token ? `?token=${encodeURIComponent(state.token)}` : '';
  const source = new EventSource(`/api/v1/jobs/${encodeURIComponent(id)}/sinks/${encodeURIComponent(sink)}/tail${query}`);
  state.tail = source;
  tailStatus(`following ${sink}`);
  source.addEventListener('row', (event) => tailLine(event.data));
  // An updating sink's rows come with their kind (+I, -U, +U, -D).
  source.addEventListener('change', (event) => {
    const { kind, row } = JSON.parse(event.data);
    tailLine(`${kind} ${JSON.stringify(row)}`, kind.startsWith('-') ? 'retraction' : '');
  });
  source.addEventListener('skipped', (event) => {
    const { rows } = JSON.parse(event.data);
    tailLine(`… ${rows} rows skipped (the page fell behind)`, 'skipped');
  });
  source.addEventListener('end', () => {
    state.tailEnded = true;
    tailStatus('the sink is done');
    closeTail();
  });
  source.onerror = () => closeTail();
}

$('tail-sink').addEventListener('change', () => {
  state.tailSink = $('tail-sink').value;
  $('tail').replaceChildren();
  closeTail();
  if (state.job && state.job.state === 'running' && !state.tailPaused) openTail(state.job.id, state.tailSink);
});

$('tail-toggle').addEventListener('click', () => {
  state.tailPaused = !state.tailPaused;
  $('tail-toggle').textContent = state.tailPaused ? 'Resume' : 'Pause';
  $('tail-toggle').setAttribute('aria-pressed', String(state.tailPaused));
  if (state.tailPaused) {
    closeTail();
    tailStatus('paused');
  } else if (state.job && state.job.state === 'running') {
    openTail(state.job.id, state.tailSink);
  }
});

// ---------- start ----------

renderCode(null);
loadExamples();
route();
