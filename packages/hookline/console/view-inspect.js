// The inspect panel for one dead letter: its metadata, the headers and body as first sent (decrypted
// by GET /v1/admin/dead-letters/:id, which is audited — so it is read once per opening, and the
// replay status afterwards comes from the list's own refreshes via syncInspect), and a Replay button.
/* global document, navigator, window, TextEncoder */
import { api } from './api.js';
import { $, alertBox, errorParts, fill, fmtNumber, fmtWhen, h, pill, timeCell } from './dom.js';

let current = null; // { id, view, onReplayed, returnFocus, slots }
let bodyMode = 'pretty';

export function initInspect() {
  for (const el of document.querySelectorAll('#inspect [data-close]'))
    el.addEventListener('click', closeInspect);
  document.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && !$('#inspect').hidden) closeInspect();
  });
}

export async function openInspect(id, { onReplayed = () => {} } = {}) {
  current = { id, view: null, onReplayed, returnFocus: document.activeElement, slots: null };
  fill($('#inspect-title'), id);
  fill($('#inspect-body'), h('div', { class: 'loading' }, 'Decrypting the original message…'));
  $('#inspect').hidden = false;
  document.body.classList.add('drawer-open');
  $('#inspect [data-close].btn-icon').focus();
  try {
    const view = await api(`/v1/admin/dead-letters/${encodeURIComponent(id)}`);
    if (current?.id !== id) return;
    current.view = view;
    renderAll(view);
  } catch (err) {
    if (current?.id !== id) return;
    fill(
      $('#inspect-body'),
      h('div', { class: 'alert alert-danger' }, 'Could not open it: ', ...errorParts(err)),
    );
  }
}

export function closeInspect() {
  $('#inspect').hidden = true;
  document.body.classList.remove('drawer-open');
  const back = current?.returnFocus;
  current = null;
  if (back && document.contains(back)) back.focus();
}

/** Called with freshly listed rows: keeps the open panel's replay status current without re-reading it. */
export function syncInspect(rows) {
  if (!current?.view) return;
  const row = rows.find((r) => r.id === current.id);
  if (!row) return;
  current.view = { ...current.view, ...row };
  renderStatus(current.view);
}

const busy = (view) => view.replay_status === 'pending' || view.replay_status === 'delivering';

function renderAll(view) {
  const slots = { alert: h('div', { hidden: true }), status: h('div', { class: 'inspect-status' }) };
  current.slots = slots;
  const meta = [
    ['Event type', h('strong', {}, view.event_type)],
    ['Tenant', h('span', { class: 'mono' }, view.tenant_id)],
    ['Endpoint', h('span', { class: 'mono' }, view.endpoint_id)],
    ['Hook id', h('span', { class: 'mono' }, view.hook_id)],
    ...(view.ordering_key ? [['Ordering key', h('span', { class: 'mono' }, view.ordering_key)]] : []),
    ['Attempts', fmtNumber(view.attempts)],
    ['Died', h('span', {}, fmtWhen(view.died_at), ' · ', timeCell(view.died_at))],
  ];
  fill(
    $('#inspect-body'),
    slots.alert,
    slots.status,
    h(
      'section',
      { class: 'inspect-section' },
      h('h3', {}, 'Details'),
      h(
        'dl',
        { class: 'meta' },
        meta.map(([term, value]) => [h('dt', {}, term), h('dd', {}, value)]),
      ),
      h('div', { class: 'last-error' }, h('div', { class: 'eyebrow' }, 'Last error'), view.last_error ?? '–'),
    ),
    h(
      'section',
      { class: 'inspect-section' },
      h('h3', {}, 'Headers ', h('span', { class: 'muted' }, 'as first sent')),
      headersTable(view.headers),
    ),
    bodySection(view.body),
  );
  renderStatus(view);
}

function renderStatus(view) {
  const button = h('button', {
    type: 'button',
    class: 'btn btn-primary',
    disabled: busy(view),
    onclick: replay,
  });
  fill(button, busy(view) ? 'Replaying…' : view.replay_status ? 'Replay again' : 'Replay');
  fill(
    current.slots.status,
    h(
      'div',
      { class: 'inspect-replay' },
      h('span', { class: 'eyebrow' }, 'Replay'),
      view.replay_status
        ? h(
            'span',
            { class: 'replay-state' },
            pill(view.replay_status),
            view.replayed_at ? timeCell(view.replayed_at) : null,
          )
        : h('span', { class: 'muted' }, 'never replayed'),
    ),
    button,
  );
}

async function replay() {
  const { id, slots } = current;
  try {
    const queued = await api(`/v1/admin/dead-letters/${encodeURIComponent(id)}/replay`, { method: 'POST' });
    if (current?.id !== id) return;
    alertBox(
      slots.alert,
      'success',
      'Replay queued as delivery ',
      h('span', { class: 'mono' }, queued.replay_delivery_id),
      '.',
    );
    current.view = { ...current.view, replay_status: 'pending', replayed_at: new Date().toISOString() };
    renderStatus(current.view);
  } catch (err) {
    if (current?.id !== id) return;
    alertBox(slots.alert, 'danger', 'Replay refused: ', ...errorParts(err));
  }
  // The list re-reads itself (and this panel's status with it) until the replay has finished.
  current?.onReplayed();
}

function headersTable(headers) {
  const entries = Object.entries(headers ?? {});
  if (entries.length === 0) return h('p', { class: 'muted small' }, 'No headers were recorded.');
  return h(
    'table',
    { class: 'kv' },
    h(
      'tbody',
      {},
      entries.map(([name, value]) => h('tr', {}, h('th', {}, name), h('td', {}, value))),
    ),
  );
}

function bodySection(body) {
  let pretty = null;
  try {
    pretty = JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    pretty = null; // not JSON: only the raw form makes sense
  }
  const pre = h('pre', { class: 'code', tabindex: '0' });
  const tabs = h('div', { class: 'segmented small', role: 'group', 'aria-label': 'Body format' });
  const show = (mode) => {
    bodyMode = mode;
    const usePretty = mode === 'pretty' && pretty !== null;
    fill(pre, usePretty ? highlight(pretty) : body);
    pre.dataset.mode = usePretty ? 'pretty' : 'raw';
    for (const b of tabs.children) b.setAttribute('aria-pressed', String(b.dataset.mode === mode));
  };
  if (pretty !== null) {
    for (const [mode, label] of [
      ['pretty', 'Pretty'],
      ['raw', 'Raw'],
    ]) {
      tabs.append(h('button', { type: 'button', dataset: { mode }, onclick: () => show(mode) }, label));
    }
  }
  const copy = h('button', { type: 'button', class: 'btn btn-ghost btn-sm' }, 'Copy raw');
  copy.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(body);
      fill(copy, 'Copied');
    } catch {
      fill(copy, 'Copy failed');
    }
    window.setTimeout(() => fill(copy, 'Copy raw'), 1500);
  });
  show(pretty === null ? 'raw' : bodyMode);
  const bytes = new TextEncoder().encode(body).length;
  return h(
    'section',
    { class: 'inspect-section' },
    h(
      'div',
      { class: 'section-head' },
      h(
        'h3',
        {},
        'Body ',
        h('span', { class: 'muted' }, `${fmtNumber(bytes)} bytes${pretty === null ? ', not JSON' : ''}`),
      ),
      h('div', { class: 'section-tools' }, pretty !== null ? tabs : null, copy),
    ),
    pre,
  );
}

// Strings (keys told apart by the colon after them), literals and numbers of pretty-printed JSON.
const TOKEN = /("(?:[^"\\]|\\.)*")(\s*:)?|\b(true|false|null)\b|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g;

/** Pretty JSON as text nodes and classed spans: colour without ever parsing it as HTML. */
function highlight(text) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(TOKEN)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    if (m[1]) {
      out.push(h('span', { class: m[2] ? 'tok-key' : 'tok-string' }, m[1]));
      if (m[2]) out.push(m[2]);
    } else if (m[3]) out.push(h('span', { class: 'tok-literal' }, m[3]));
    else out.push(h('span', { class: 'tok-number' }, m[4]));
    last = m.index + m[0].length;
  }
  out.push(text.slice(last));
  return out;
}
