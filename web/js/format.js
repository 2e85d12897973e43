// Formatting numbers, sizes, durations, and the small elements every view
// uses (state badges, buttons).


export function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
}

export function fmtNumber(n) {
  if (n === null || n === undefined) return '–';
  const abs = Math.abs(n);
  if (abs >= 1e9) return (n / 1e9).toFixed(1) + 'G';
  if (abs >= 1e6) return (n / 1e6).toFixed(1) + 'M';
  if (abs >= 1e4) return (n / 1e3).toFixed(1) + 'k';
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}

export function fmtBytes(n) {
  if (!n) return '0 B';
  if (n >= 1 << 30) return (n / (1 << 30)).toFixed(1) + ' GiB';
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + ' MiB';
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + ' KiB';
  return n + ' B';
}

export function fmtDuration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '–';
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
  return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
}

// A lag means something for a live stream; a replayed or generated one
// (event time more than a day behind the wall clock) shows how far its
// event time has come instead.
const LIVE_LAG_MS = 24 * 3600 * 1000;

export function fmtLag(ms, eventTime) {
  if (ms === null || ms === undefined) return '–';
  if (ms > LIVE_LAG_MS && eventTime) return 'at ' + eventTime.replace('T', ' ').replace(/\.\d+Z$|Z$/, '');
  return fmtDuration(ms);
}

export function uptime(job) {
  if (!job.started_at) return null;
  const end = job.ended_at ? Date.parse(job.ended_at) : Date.now();
  return end - Date.parse(job.started_at);
}

export function badge(stateName) {
  const span = document.createElement('span');
  span.className = `state ${stateName}`;
  span.textContent = stateName;
  return span;
}

export function button(label, text, className, onClick) {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = text;
  b.className = className;
  b.setAttribute('aria-label', label);
  b.addEventListener('click', onClick);
  return b;
}
