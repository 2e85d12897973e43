// The console's shared state, its DOM helper and its API client (the bearer
// token, the connection line).

export const PALETTE = ['#1f6feb', '#1a7f37', '#9a6700', '#8250df', '#cf222e', '#0a7ea4', '#bf3989'];
export const TAIL_ROWS = 200;

export const state = {
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
  viewShown: null,
};

export const $ = (id) => document.getElementById(id);

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

export function setConnection(text) {
  $('connection').textContent = text;
}

export async function api(path, options = {}) {
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
