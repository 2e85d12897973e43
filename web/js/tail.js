// A sink's live output (server-sent events), paused and resumed.

import { $, TAIL_ROWS, state } from './core.js';

export function closeTail() {
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

export function setupTail(job) {
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
