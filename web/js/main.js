// eddy console: the jobs list, a SQL editor that validates as you type, and a
// job view (operator graph, event-time health charts, live sink output).
// Plain ES modules served by the eddy server: no build step, no request
// leaves it. This one routes between the views and starts the page.

import { $, state } from './core.js';
import { closeTail } from './tail.js';
import { openJob } from './job.js';
import { refreshJobs } from './jobs.js';
import { refreshViews } from './views.js';
import { loadExamples, renderCode } from './editor.js';

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
    const refresh = () => {
      refreshJobs();
      refreshViews();
    };
    refresh();
    state.timer = setInterval(refresh, 1000);
  }
}

window.addEventListener('hashchange', route);

$('token-form').addEventListener('submit', () => {
  state.token = $('token-input').value.trim();
  sessionStorage.setItem('eddy-token', state.token);
  route();
});

renderCode(null);
loadExamples();
route();
