// Edit and redeploy: a job's SQL changed in place (PUT /api/v1/jobs/{id}),
// with what became of each operator's state, or why the server refused.

import { $, api, state } from './core.js';

let shownFor = null;

// Fills the editor with the job's SQL when another job is shown (never
// while someone is editing it).
export function setupRedeploy(job) {
  if (shownFor === job.id) return;
  shownFor = job.id;
  $('redeploy-sql').value = job.sql;
  $('redeploy-status').textContent = '';
  $('redeploy-go').disabled = Boolean(job.group);
}

function names(list) {
  return list.length ? list.join(', ') : 'none';
}

$('redeploy-go').addEventListener('click', async () => {
  const id = state.jobId;
  if (!id) return;
  const status = $('redeploy-status');
  $('redeploy-go').disabled = true;
  status.className = 'status';
  status.textContent = 'Stopping with a final checkpoint, checking the new SQL against it...';
  try {
    const result = await api(`/api/v1/jobs/${id}`, {
      method: 'PUT',
      body: { sql: $('redeploy-sql').value, allow_dropped_state: $('redeploy-drop').checked },
    });
    status.className = 'status ok';
    status.textContent = `Redeployed. Kept their state: ${names(result.kept)}. Started afresh: ${names(result.started)}. Dropped: ${names(result.dropped)}.`;
  } catch (e) {
    status.className = 'status error';
    status.textContent = (e.body && e.body.error) || e.message;
  } finally {
    $('redeploy-go').disabled = false;
  }
});
