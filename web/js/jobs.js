// The jobs list: every job with its state, rates and lags; stop and delete.

import { $, api, setConnection, state } from './core.js';
import { badge, button, fmtDuration, fmtLag, fmtNumber, uptime } from './format.js';
import { refreshJob } from './job.js';

export async function refreshJobs() {
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
      cell(fmtLag(job.watermark_lag_ms, job.event_time), 'num'),
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

export async function stopJob(id, savepoint = false) {
  try {
    await api(`/api/v1/jobs/${id}/stop`, { method: 'POST', body: { savepoint } });
  } catch (e) {
    setConnection(e.message);
  }
  if (state.jobId === id) refreshJob();
  else refreshJobs();
}

export async function deleteJob(id) {
  try {
    await api(`/api/v1/jobs/${id}`, { method: 'DELETE' });
  } catch (e) {
    setConnection(e.message);
  }
  if (state.jobId === id) location.hash = '#/';
  else refreshJobs();
}
