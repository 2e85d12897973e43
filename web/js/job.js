// A job's view: its operator graph with live counters, event-time health
// charts, its sources.

import { $, PALETTE, api, state } from './core.js';
import { badge, escapeHtml, fmtBytes, fmtDuration, fmtLag, fmtNumber, uptime } from './format.js';
import { closeTail, setupTail } from './tail.js';
import { deleteJob, stopJob } from './jobs.js';
import { setupRedeploy } from './redeploy.js';

export function openJob(id) {
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

export async function refreshJob() {
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
  $('job-savepoint').disabled = job.state !== 'running' || Boolean(job.group);
  const savepoints = job.savepoints.map((s) => `${s.id} (checkpoint ${s.checkpoint}, ${s.parallelism} instance(s), ${fmtBytes(s.bytes)})`);
  if (job.from_savepoint) savepoints.unshift(`started from ${job.from_savepoint}`);
  $('job-savepoints').hidden = savepoints.length === 0;
  $('job-savepoints').textContent = savepoints.length ? `savepoints: ${savepoints.join('; ')}` : '';
  $('job-error').hidden = !job.error;
  $('job-error').textContent = job.error || '';
  const stateBytes = job.metrics.reduce((sum, m) => sum + m.state_bytes, 0);
  const figures = [
    ['events/s', fmtNumber(job.events_per_second)],
    [job.watermark_lag_ms > 24 * 3600 * 1000 ? 'event time' : 'watermark lag', fmtLag(job.watermark_lag_ms, job.event_time)],
    ['late rows', fmtNumber(job.late_rows)],
    ['bad rows', fmtNumber(job.bad_rows)],
    ['state', fmtBytes(stateBytes)],
    ['time on workers', job.pool_ms < 10000 ? `${fmtNumber(job.pool_ms)} ms` : fmtDuration(job.pool_ms)],
    ['instances', job.parallelism],
    ['checkpoints', `${job.checkpoints.completed}${job.checkpoints.restored_from ? ` (resumed from #${job.checkpoints.restored_from})` : ''}`],
  ];
  if (job.group) {
    const here = job.group.tasks_here.length ? job.group.tasks_here.join(', ') : 'none';
    figures.push([`group ${job.group.name}: tasks here of ${job.group.tasks}`, here]);
  }
  $('job-figures').innerHTML = figures
    .map(([label, value]) => `<div><b>${escapeHtml(String(value))}</b><span>${escapeHtml(label)}</span></div>`)
    .join('');
  renderGraph(job);
  renderCharts(job);
  renderSources(job);
  renderPython(job);
  renderConnectors(job);
  setupTail(job);
  setupRedeploy(job);
}

$('job-stop').addEventListener('click', () => state.jobId && stopJob(state.jobId));
$('job-savepoint').addEventListener('click', () => state.jobId && stopJob(state.jobId, true));
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
  const tasks = new Set(job.graph.map((n) => n.task)).size;
  svg.setAttribute('aria-label', `Operator graph with ${job.graph.length} nodes in ${tasks} tasks`);
  for (const node of job.graph) {
    const to = position.get(node.id);
    for (const edge of node.inputs) {
      const from = position.get(edge.from);
      const path = document.createElementNS(ns, 'path');
      const [x1, y1, x2, y2] = [from.x + 190, from.y + 35, to.x, to.y + 35];
      path.setAttribute('d', `M${x1},${y1} C${x1 + 25},${y1} ${x2 - 25},${y2} ${x2},${y2}`);
      path.setAttribute('class', `edge${edge.port === 'late' ? ' late' : ''}${edge.chained ? ' chained' : ''}`);
      svg.append(path);
    }
  }
  for (const node of job.graph) {
    const { x, y } = position.get(node.id);
    const m = metrics.get(node.id) || {};
    const group = document.createElementNS(ns, 'g');
    const kindClass = node.kind === 'source' || node.kind === 'sink' ? node.kind : node.stateful ? 'stateful' : '';
    group.setAttribute('class', `node ${kindClass}${node.updating ? ' updating' : ''}`);
    group.setAttribute('data-kind', node.kind);
    group.setAttribute('data-task', node.task);
    const title = document.createElementNS(ns, 'title');
    const taskmates = job.graph.filter((n) => n.task === node.task).length;
    title.textContent = `${node.description}\ntask ${node.task}${taskmates > 1 ? ` (a chain of ${taskmates} nodes on one thread)` : ''}`;
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
    if (node.stateful) {
      lines.push([`state ${fmtNumber(m.state_rows)} (≤ ${fmtNumber(m.peak_state_rows)}) · ${fmtBytes(m.state_bytes)}${m.spill_disk_bytes ? ` + ${fmtBytes(m.spill_disk_bytes)} on disk` : ''}`, 'kind']);
      // Rows the operator dropped because its state for them was final.
      if (m.late_rows > 0) lines[1][0] += ` · ${fmtNumber(m.late_rows)} late`;
    }
    // A PostgreSQL source (no watermark, so no late rows) shows its lag.
    else if (node.kind === 'source' && m.connector && 'lag_bytes' in m.connector) {
      lines.push([`bad ${fmtNumber(m.bad_rows)} · lag ${fmtBytes(m.connector.lag_bytes)}, ${fmtNumber(m.connector.lag_ms)} ms`, 'kind']);
    }
    else if (node.kind === 'source') lines.push([`late ${fmtNumber(m.late_rows)} · bad ${fmtNumber(m.bad_rows)}`, 'kind']);
    // A database sink (jdbc) shows what it committed.
    else if (node.kind === 'sink' && m.connector && 'transactions' in m.connector) {
      lines.push([`written ${fmtNumber(m.connector.rows_written)} in ${fmtNumber(m.connector.transactions)} tx`, 'kind']);
    }
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
  $('graph-tasks').textContent = `${job.graph.length} nodes run as ${tasks} task${tasks === 1 ? '' : 's'}; a thick edge joins nodes chained into one task, which pass batches by call on one thread.`;
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
  // A replayed or generated stream (event time more than a day behind the
  // wall clock) has no lag worth plotting: how far its event time has
  // advanced since the first point is plotted instead.
  const replayed = names.some((n) => {
    const lags = per(n, 'watermark_lag_ms');
    return lags.length && lags[lags.length - 1][1] > 24 * 3600 * 1000;
  });
  $('chart-lag').querySelector('figcaption').textContent = replayed
    ? 'Event time advanced per source (s)'
    : 'Watermark lag per source (s)';
  const lagSeries = (n) => {
    const lags = per(n, 'watermark_lag_ms');
    if (!replayed || !lags.length) return lags.map(([at, lag]) => [at, lag / 1000]);
    const start = lags[0][0] - lags[0][1];
    return lags.map(([at, lag]) => [at, (at - lag - start) / 1000]);
  };
  lineChart($('chart-lag'), names.map((n, i) => ({ name: n, color: color(i), points: lagSeries(n) })), fmtNumber);
  lineChart(
    $('chart-late'),
    names.flatMap((n, i) => [
      { name: `${n} late`, color: color(i), points: per(n, 'late_rows') },
      { name: `${n} bad`, color: color(i), dashed: true, points: per(n, 'bad_rows') },
    ]),
    fmtNumber,
  );
}

// The job's Python functions: rows each was called on, and those that
// raised (their value NULL) with the first message.
function renderPython(job) {
  const functions = job.python_functions || [];
  $('python-table').hidden = functions.length === 0;
  const rows = functions
    .map(
      (f) => `<tr><td>${escapeHtml(f.name)}</td><td class="num">${fmtNumber(f.rows)}</td><td class="num">${fmtNumber(f.calls)}</td>` +
        `<td class="num">${fmtNumber(f.raised)}</td><td>${escapeHtml(f.first_error || '–')}</td></tr>`,
    )
    .join('');
  $('python-table').innerHTML =
    '<caption class="sr-only">Python functions</caption><thead><tr><th scope="col">Python function</th><th scope="col" class="num">Rows</th>' +
    '<th scope="col" class="num">Calls</th><th scope="col" class="num">Raised</th><th scope="col">First error</th></tr></thead>' +
    `<tbody>${rows}</tbody>`;
}

// What the connectors did beyond rows: a Delta sink's commits, files,
// bytes, rewrites, compactions and vacuumed files, a line each.
function renderConnectors(job) {
  const lines = job.connectors || [];
  $('connector-lines').hidden = lines.length === 0;
  $('connector-lines').innerHTML = lines.map((l) => `<li>${escapeHtml(l)}</li>`).join('');
}

function renderSources(job) {
  const sources = job.metrics.filter((m) => m.kind === 'source');
  const waiting = job.metrics.filter((m) => m.kind === 'window_aggregate').reduce((sum, m) => sum + m.state_rows, 0);
  const rows = sources
    .map(
      (m) => `<tr><td>${escapeHtml(m.name)}</td><td class="num">${fmtNumber(m.rows_in)}</td><td class="num">${fmtNumber(m.events_per_second)}</td>` +
        `<td class="num">${m.watermark ? escapeHtml(new Date(m.watermark).toISOString()) : '–'}</td><td class="num">${fmtLag(m.watermark_lag_ms, m.watermark ? new Date(m.watermark).toISOString() : null)}</td>` +
        `<td class="num">${fmtNumber(m.late_rows)}</td><td class="num">${fmtNumber(m.bad_rows)}</td></tr>`,
    )
    .join('');
  $('sources-table').innerHTML =
    '<caption class="sr-only">Sources</caption><thead><tr><th scope="col">Source</th><th scope="col" class="num">Rows</th><th scope="col" class="num">Events/s</th>' +
    '<th scope="col" class="num">Watermark</th><th scope="col" class="num">Lag</th><th scope="col" class="num">Late</th><th scope="col" class="num">Bad</th></tr></thead>' +
    `<tbody>${rows}</tbody><tfoot><tr><td colspan="7" class="muted">${fmtNumber(waiting)} window groups waiting to fire</td></tr></tfoot>`;
}
