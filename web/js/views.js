// The materialized views: each view's key, rows and the checkpoint its rows
// are from, and (on request) its first rows, as SELECTs over the server's
// PostgreSQL port would read them.

import { $, api, setConnection, state } from './core.js';
import { button, fmtNumber } from './format.js';

const SHOWN_ROWS = 20;

export async function refreshViews() {
  let views;
  try {
    views = await api('/api/v1/views');
  } catch (e) {
    return;
  }
  $('views-panel').hidden = views.length === 0;
  const body = $('views-body');
  body.replaceChildren();
  for (const view of views) {
    const row = document.createElement('tr');
    row.dataset.view = view.name;
    const published = view.published_at ? new Date(view.published_at).toLocaleTimeString() : 'not yet';
    const cells = [
      cell(view.name),
      cell(view.key ? view.key.join(', ') : 'whole rows'),
      cell(fmtNumber(view.rows), 'num'),
      cell(String(view.epoch), 'num'),
      cell(published),
    ];
    const actions = document.createElement('td');
    actions.className = 'actions';
    actions.append(button(`Show rows of ${view.name}`, 'Rows', 'small secondary', () => showRows(view.name)));
    cells.push(actions);
    row.append(...cells);
    body.append(row);
  }
  if (state.viewShown && !views.some((v) => v.name === state.viewShown)) {
    state.viewShown = null;
    $('view-rows').hidden = true;
  }
}

async function showRows(name) {
  let view;
  try {
    view = await api(`/api/v1/views/${encodeURIComponent(name)}?limit=${SHOWN_ROWS}`);
  } catch (e) {
    setConnection(e.message);
    return;
  }
  state.viewShown = name;
  $('view-rows-title').textContent = `${name}: ${fmtNumber(view.rows)} rows as of checkpoint ${view.epoch}`
    + (view.rows > SHOWN_ROWS ? ` (the first ${SHOWN_ROWS})` : '');
  const head = document.createElement('tr');
  for (const column of view.columns) {
    const th = document.createElement('th');
    th.scope = 'col';
    th.textContent = column;
    head.append(th);
  }
  const rows = view.data.map((values) => {
    const tr = document.createElement('tr');
    for (const column of view.columns) {
      const value = values[column];
      tr.append(cell(value === null || value === undefined ? 'NULL' : String(value), typeof value === 'number' ? 'num' : ''));
    }
    return tr;
  });
  $('view-rows-head').replaceChildren(head);
  $('view-rows-body').replaceChildren(...rows);
  $('view-rows').hidden = false;
}

function cell(content, className) {
  const td = document.createElement('td');
  if (className) td.className = className;
  td.append(content);
  return td;
}
