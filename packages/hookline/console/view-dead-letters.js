// Dead letters: the filtered, paginated list from GET /v1/admin/dead-letters, replay of a selection
// (one POST per id, so each gets its own answer) or of everything matching the filter (one bulk POST
// that starts a job; its progress comes from GET /v1/admin/replays/:id until it is done).
/* global window */
import { api, query } from './api.js';
import { $, alertBox, errorParts, fill, fmtNumber, h, idText, pill, shortId, timeCell } from './dom.js';
import { openInspect, syncInspect } from './view-inspect.js';

const PAGE = 50;
/** While a listed replay is still under way the list re-reads itself this often. */
const POLL_MS = 2000;
/** A bulk-replay job is asked for its progress this often. */
const JOB_POLL_MS = 500;

const state = { filter: { tenant_id: '', endpoint_id: '' }, rows: [], next: null, selected: new Set() };
let visible = false;
let pollTimer = null;
let generation = 0;
/** The bulk-replay job being followed, so a second one does not start behind its back. */
let followedJob = null;

export function initDeadLetters() {
  const form = $('#dl-filter');
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    setFilter({ tenant_id: form.tenant_id.value.trim(), endpoint_id: form.endpoint_id.value.trim() });
  });
  $('#dl-clear').addEventListener('click', () => setFilter({ tenant_id: '', endpoint_id: '' }));
  $('#dl-refresh').addEventListener('click', () => void refresh());
  $('#dl-more').addEventListener('click', () => void loadMore());
  $('#dl-replay-selected').addEventListener('click', () => void replaySelected());
  $('#dl-replay-all').addEventListener('click', askReplayAll);
  $('#dl-confirm-cancel').addEventListener('click', () => ($('#dl-confirm').hidden = true));
  $('#dl-confirm-go').addEventListener('click', () => void replayAll());
  $('#dl-check-all').addEventListener('change', (event) => {
    for (const row of state.rows) {
      if (event.target.checked) state.selected.add(row.id);
      else state.selected.delete(row.id);
    }
    renderRows();
  });
}

/** `params` from the address (#/dead-letters?tenant_id=…) pre-set the filter, for links from elsewhere. */
export function showDeadLetters(params) {
  visible = true;
  const filter = { tenant_id: params.get('tenant_id') ?? '', endpoint_id: params.get('endpoint_id') ?? '' };
  const form = $('#dl-filter');
  form.tenant_id.value = filter.tenant_id;
  form.endpoint_id.value = filter.endpoint_id;
  state.filter = filter;
  void refresh({ reset: true });
}

export function hideDeadLetters() {
  visible = false;
  window.clearTimeout(pollTimer);
}

function setFilter(filter) {
  // Through the address, so the filter survives a reload and the back button undoes it.
  const target = `#/dead-letters${query(filter)}`;
  if (window.location.hash === target) void refresh({ reset: true });
  else window.location.hash = target;
}

/** Re-reads the list from the top, as many rows as are loaded now (at least one page). */
async function refresh({ reset = false } = {}) {
  const mine = ++generation;
  window.clearTimeout(pollTimer);
  const limit = reset ? PAGE : Math.min(100, Math.max(PAGE, state.rows.length));
  try {
    const page = await api(`/v1/admin/dead-letters${query({ ...state.filter, limit })}`);
    if (mine !== generation) return; // a newer read (another filter) has already answered
    state.rows = page.data;
    state.next = page.next_cursor;
    const ids = new Set(page.data.map((r) => r.id));
    for (const id of state.selected) if (!ids.has(id)) state.selected.delete(id);
    if (reset) alertBox($('#dl-result'), null);
    renderRows();
    syncInspect(state.rows);
  } catch (err) {
    if (mine !== generation) return;
    state.rows = [];
    state.next = null;
    renderRows();
    alertBox($('#dl-result'), 'danger', 'Could not load dead letters: ', ...errorParts(err));
  }
  schedulePoll();
}

async function loadMore() {
  if (!state.next) return;
  const mine = generation;
  try {
    const page = await api(
      `/v1/admin/dead-letters${query({ ...state.filter, limit: PAGE, cursor: state.next })}`,
    );
    if (mine !== generation) return;
    state.rows.push(...page.data);
    state.next = page.next_cursor;
    renderRows();
  } catch (err) {
    alertBox($('#dl-result'), 'danger', 'Could not load more: ', ...errorParts(err));
  }
}

function schedulePoll() {
  const busy = state.rows.some((r) => r.replay_status === 'pending' || r.replay_status === 'delivering');
  if (visible && busy) pollTimer = window.setTimeout(() => void refresh(), POLL_MS);
}

function renderRows() {
  const tbody = $('#dl-rows');
  fill(tbody, state.rows.map(rowFor));
  const filtered = state.filter.tenant_id || state.filter.endpoint_id;
  const empty = $('#dl-empty');
  empty.hidden = state.rows.length > 0;
  // An empty table is just a header; the empty state says more on its own.
  $('#dl-table').hidden = state.rows.length === 0;
  $('#dl-replay-all').disabled = state.rows.length === 0;
  fill(
    empty,
    h('strong', {}, filtered ? 'No dead letters match this filter' : 'No dead letters'),
    h(
      'span',
      { class: 'muted' },
      filtered
        ? 'Clear the filter to see all of them.'
        : 'Every message was delivered or is still being retried.',
    ),
  );
  $('#dl-more').hidden = !state.next;
  fill($('#dl-heading'), filtered ? 'Matching dead letters' : 'All dead letters');
  const shown = state.rows.length;
  const scope = [state.filter.tenant_id, state.filter.endpoint_id].filter(Boolean).join(' · ');
  fill(
    $('#dl-count'),
    shown === 0
      ? 'None to show'
      : `Newest first · ${fmtNumber(shown)} shown${state.next ? ', more below' : ''}${scope ? ` · ${scope}` : ''}`,
  );
  const n = state.selected.size;
  const button = $('#dl-replay-selected');
  button.disabled = n === 0;
  fill(button, n === 0 ? 'Replay selected' : `Replay selected (${n})`);
  const all = $('#dl-check-all');
  all.checked = n > 0 && n === state.rows.length;
  all.indeterminate = n > 0 && n < state.rows.length;
}

function replayCell(row) {
  if (!row.replay_status) return h('span', { class: 'muted small' }, 'not replayed');
  return h(
    'div',
    { class: 'stack' },
    pill(row.replay_status),
    row.replayed_at ? timeCell(row.replayed_at) : null,
  );
}

function rowFor(row) {
  const selected = state.selected.has(row.id);
  const checkbox = h('input', {
    type: 'checkbox',
    'aria-label': `Select ${row.id}`,
    checked: selected,
    onclick: (event) => event.stopPropagation(),
    onchange: (event) => {
      if (event.target.checked) state.selected.add(row.id);
      else state.selected.delete(row.id);
      renderRows();
    },
  });
  const inspect = () => openInspect(row.id, { onReplayed: () => void refresh() });
  return h(
    'tr',
    { class: selected ? 'clickable selected' : 'clickable', dataset: { id: row.id }, onclick: inspect },
    h(
      'td',
      {
        class: 'col-check',
        // The whole cell is the checkbox's target: a near miss selects rather than opens the panel.
        onclick: (event) => {
          event.stopPropagation();
          if (event.target !== checkbox) checkbox.click();
        },
      },
      checkbox,
    ),
    h(
      'td',
      {},
      h(
        'button',
        {
          type: 'button',
          class: 'link strong',
          title: `Inspect ${row.id}`,
          onclick: (event) => {
            event.stopPropagation();
            inspect();
          },
        },
        row.event_type,
      ),
      h('div', { class: 'sub mono', title: `hook-id ${row.hook_id}` }, shortId(row.hook_id, 10)),
      row.ordering_key
        ? h(
            'div',
            { class: 'sub mono ordering-key', title: 'ordering key: a replay joins the back of its line' },
            `key ${row.ordering_key}`,
          )
        : null,
    ),
    h('td', { class: 'mono' }, row.tenant_id),
    h('td', {}, idText(row.endpoint_id)),
    h('td', { class: 'num' }, fmtNumber(row.attempts)),
    h(
      'td',
      { class: 'error-cell' },
      h('span', { class: 'truncate', title: row.last_error ?? '' }, row.last_error ?? '–'),
    ),
    h('td', { class: 'nowrap' }, timeCell(row.died_at)),
    h('td', { class: 'replay-cell' }, replayCell(row)),
  );
}

async function replaySelected() {
  const ids = [...state.selected];
  if (ids.length === 0) return;
  $('#dl-replay-selected').disabled = true;
  const results = await Promise.all(
    ids.map((id) =>
      api(`/v1/admin/dead-letters/${encodeURIComponent(id)}/replay`, { method: 'POST' }).then(
        (queued) => ({ id, ok: true, queued }),
        (err) => ({ id, ok: false, err }),
      ),
    ),
  );
  const ok = results.filter((r) => r.ok).length;
  alertBox(
    $('#dl-result'),
    ok === results.length ? 'success' : ok === 0 ? 'danger' : 'warning',
    h('strong', {}, `${ok} of ${results.length} queued for replay.`),
    h(
      'ul',
      { class: 'result-list' },
      results.map((r) =>
        h(
          'li',
          { class: r.ok ? 'ok' : 'failed', dataset: { id: r.id } },
          h('span', { class: 'mono' }, r.id),
          ' ',
          r.ok ? 'queued' : errorParts(r.err),
        ),
      ),
    ),
  );
  state.selected.clear();
  await refresh();
}

function filterText() {
  const parts = [];
  if (state.filter.tenant_id) parts.push(`tenant ${state.filter.tenant_id}`);
  if (state.filter.endpoint_id) parts.push(`endpoint ${state.filter.endpoint_id}`);
  return parts.length ? `of ${parts.join(' and ')}` : 'of every tenant';
}

function askReplayAll() {
  fill(
    $('#dl-confirm-text'),
    `Replay every dead letter ${filterText()} that has not yet been replayed successfully and is not being replayed now? Each goes out again with its original hook-id.`,
  );
  $('#dl-confirm').hidden = false;
  $('#dl-confirm-go').focus();
}

/** "3 skipped (already being replayed or delivered), 1 not replayable (endpoint deleted or disabled)." */
function outcomeText(job) {
  const parts = [];
  if (job.skipped > 0) parts.push(`${fmtNumber(job.skipped)} skipped (already being replayed or delivered)`);
  if (job.failed > 0) parts.push(`${fmtNumber(job.failed)} not replayable (endpoint deleted or disabled)`);
  return parts.length ? `${parts.join(', ')}.` : 'None skipped.';
}

/** The job's progress: a bar, and how many of how many. */
function showJob(job) {
  const handled = job.replayed + job.skipped + job.failed;
  const share = job.count === 0 ? 1 : Math.min(1, handled / job.count);
  const percent = Math.floor(share * 100);
  if (job.status === 'running') {
    alertBox(
      $('#dl-result'),
      'info',
      h('strong', {}, `Replaying… ${percent} %`),
      ' ',
      `${fmtNumber(handled)} of ${fmtNumber(job.count)} handled: ${fmtNumber(job.replayed)} queued for replay.`,
      h('progress', {
        class: 'job-progress',
        max: job.count,
        value: handled,
        'aria-label': 'Bulk replay progress',
        dataset: { job: job.id },
      }),
    );
    return;
  }
  const failed = job.status === 'failed';
  alertBox(
    $('#dl-result'),
    failed ? 'danger' : job.replayed > 0 ? 'success' : 'info',
    h(
      'strong',
      {},
      failed
        ? `Bulk replay stopped after ${fmtNumber(job.replayed)} of ${fmtNumber(job.count)}: ${job.error ?? 'failed'}.`
        : `${fmtNumber(job.replayed)} dead letter${job.replayed === 1 ? '' : 's'} queued for replay.`,
    ),
    ' ',
    outcomeText(job),
  );
}

async function followJob(id) {
  followedJob = id;
  let listedAt = 0;
  for (;;) {
    let job;
    try {
      job = await api(`/v1/admin/replays/${encodeURIComponent(id)}`);
    } catch (err) {
      alertBox($('#dl-result'), 'danger', 'Could not follow the bulk replay: ', ...errorParts(err));
      break;
    }
    if (followedJob !== id) return; // a newer job is followed now
    showJob(job);
    if (job.status !== 'running') break;
    // The list follows too, at its own pace: replays of what the job queued show up as they go.
    if (visible && Date.now() - listedAt >= POLL_MS) {
      listedAt = Date.now();
      void refresh();
    }
    await new Promise((resolve) => window.setTimeout(resolve, JOB_POLL_MS));
  }
  followedJob = null;
  await refresh();
}

async function replayAll() {
  $('#dl-confirm').hidden = true;
  const body = {};
  if (state.filter.tenant_id) body.tenant_id = state.filter.tenant_id;
  if (state.filter.endpoint_id) body.endpoint_id = state.filter.endpoint_id;
  let started;
  try {
    started = await api('/v1/admin/dead-letters/replay', { method: 'POST', body });
  } catch (err) {
    alertBox($('#dl-result'), 'danger', 'Bulk replay failed: ', ...errorParts(err));
    return;
  }
  showJob({ id: started.id, status: 'running', count: started.count, replayed: 0, skipped: 0, failed: 0 });
  await followJob(started.id);
}
