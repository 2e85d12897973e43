// Edit and redeploy: a job's SQL changed in place. "Check" asks what would
// become of each operator's state (POST /api/v1/jobs/{id}/redeploy/preview,
// nothing stops); "Redeploy" does it (PUT /api/v1/jobs/{id}) and says what
// became of it, or why the server refused.

import { $, api, state } from './core.js';

let shownFor = null;

// Fills the editor with the job's SQL when another job is shown (never
// while someone is editing it).
export function setupRedeploy(job) {
  if (shownFor === job.id) return;
  shownFor = job.id;
  $('redeploy-sql').value = job.sql;
  $('redeploy-status').textContent = '';
  showPlan(null);
  $('redeploy-go').disabled = Boolean(job.group);
  $('redeploy-check').disabled = Boolean(job.group);
}

function names(list) {
  return list.length ? list.join(', ') : 'none';
}

function request() {
  return { sql: $('redeploy-sql').value, allow_dropped_state: $('redeploy-drop').checked };
}

// The operators kept, kept by name, started and dropped, as a list of
// terms; `null` hides it.
function showPlan(plan) {
  const list = $('redeploy-plan');
  list.replaceChildren();
  list.hidden = !plan;
  if (!plan) return;
  const rows = [
    ['Keep their state', plan.kept, 'kept'],
    ['Kept by name', plan.kept_by_name, 'by-name'],
    ['Start afresh', plan.started, 'started'],
    ['Dropped', plan.dropped, 'dropped'],
  ];
  if (plan.refused) rows.push(['Refused', [plan.refused], 'refused']);
  for (const [term, values, kind] of rows) {
    if (kind === 'by-name' && !values.length) continue;
    const dt = document.createElement('dt');
    dt.textContent = term;
    const dd = document.createElement('dd');
    dd.className = values.length ? kind : `${kind} none`;
    dd.textContent = names(values);
    list.append(dt, dd);
  }
}

$('redeploy-check').addEventListener('click', async () => {
  const id = state.jobId;
  if (!id) return;
  const status = $('redeploy-status');
  status.className = 'status';
  status.textContent = 'Checking the new SQL against the newest checkpoint...';
  try {
    const plan = await api(`/api/v1/jobs/${id}/redeploy/preview`, { method: 'POST', body: request() });
    showPlan(plan);
    status.className = plan.refused ? 'status error' : 'status ok';
    status.textContent = plan.refused
      ? 'A redeploy would be refused (the job would run on unchanged).'
      : plan.checkpoint === null
        ? 'No checkpoint yet: every operator would start afresh.'
        : `Checked against checkpoint ${plan.checkpoint}: Redeploy would do this.`;
  } catch (e) {
    showPlan(null);
    status.className = 'status error';
    status.textContent = (e.body && e.body.error) || e.message;
  }
});

$('redeploy-go').addEventListener('click', async () => {
  const id = state.jobId;
  if (!id) return;
  const status = $('redeploy-status');
  $('redeploy-go').disabled = true;
  status.className = 'status';
  status.textContent = 'Stopping with a final checkpoint, checking the new SQL against it...';
  try {
    const result = await api(`/api/v1/jobs/${id}`, { method: 'PUT', body: request() });
    showPlan(result);
    status.className = 'status ok';
    status.textContent = 'Redeployed.';
  } catch (e) {
    status.className = 'status error';
    status.textContent = (e.body && e.body.error) || e.message;
  } finally {
    $('redeploy-go').disabled = false;
  }
});
