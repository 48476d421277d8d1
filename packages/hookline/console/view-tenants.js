// Tenants & endpoints: GET /v1/admin/tenants on the left; the chosen tenant's endpoints with their
// 24-hour success rate, backlog, adaptive limit and pause (GET /v1/admin/tenants/:id/endpoints) on the right.
/* global window */
import { api, query } from './api.js';
import { $, alertBox, errorParts, fill, fmtNumber, fmtPercent, fmtWhen, h, idText, pill } from './dom.js';

const PAGE = 50;
const state = { tenants: [], next: null, selected: null };
let generation = 0;

export function initTenants() {
  $('#tn-refresh').addEventListener('click', () => void show(state.selected));
  $('#tn-more').addEventListener('click', () => void loadTenants({ append: true }));
}

/** `tenantId` comes from the address (#/tenants/<id>); without one the first tenant is shown. */
export function showTenants(_params, tenantId) {
  void show(tenantId || null);
}

export function hideTenants() {}

async function show(tenantId) {
  state.selected = tenantId;
  await loadTenants({ append: false });
  if (!state.selected && state.tenants[0]) {
    state.selected = state.tenants[0].id;
    window.history.replaceState(null, '', `#/tenants/${encodeURIComponent(state.selected)}`);
    renderTenants();
  }
  if (state.selected) await loadEndpoints(state.selected);
  else renderNoTenant();
}

async function loadTenants({ append }) {
  try {
    const page = await api(`/v1/admin/tenants${query({ limit: PAGE, cursor: append ? state.next : null })}`);
    state.tenants = append ? [...state.tenants, ...page.data] : page.data;
    state.next = page.next_cursor;
    alertBox($('#tn-alert'), null);
  } catch (err) {
    alertBox($('#tn-alert'), 'danger', 'Could not load tenants: ', ...errorParts(err));
  }
  renderTenants();
}

function countsText(e) {
  const parts = [`${e.active} active`];
  if (e.paused) parts.push(`${e.paused} paused`);
  if (e.disabled) parts.push(`${e.disabled} disabled`);
  if (e.deleted) parts.push(`${e.deleted} deleted`);
  return parts.join(' · ');
}

function renderTenants() {
  fill(
    $('#tn-list'),
    state.tenants.map((t) =>
      h(
        'li',
        {},
        h(
          'a',
          {
            href: `#/tenants/${encodeURIComponent(t.id)}`,
            class: t.id === state.selected ? 'active' : '',
            'aria-current': t.id === state.selected ? 'true' : null,
            dataset: { tenant: t.id },
          },
          h('span', { class: 'mono tenant-id' }, t.id),
          h('span', { class: 'muted small' }, countsText(t.endpoints)),
        ),
      ),
    ),
  );
  const empty = $('#tn-list-empty');
  empty.hidden = state.tenants.length > 0;
  fill(empty, 'No tenants yet. A tenant appears with its first key or event.');
  $('#tn-more').hidden = !state.next;
}

function renderNoTenant() {
  fill($('#tn-title'), 'Endpoints');
  fill($('#tn-sub'), 'There are no tenants to show.');
  $('#tn-table').hidden = true;
  $('#tn-empty').hidden = true;
}

async function loadEndpoints(tenantId) {
  const mine = ++generation;
  fill($('#tn-title'), h('span', { class: 'mono' }, tenantId));
  fill($('#tn-sub'), 'Loading endpoints…');
  try {
    const { data } = await api(`/v1/admin/tenants/${encodeURIComponent(tenantId)}/endpoints`);
    if (mine !== generation) return;
    renderEndpoints(tenantId, data);
  } catch (err) {
    if (mine !== generation) return;
    fill($('#tn-sub'), '');
    $('#tn-table').hidden = true;
    $('#tn-empty').hidden = true;
    alertBox($('#tn-alert'), 'danger', `Could not load the endpoints of ${tenantId}: `, ...errorParts(err));
  }
}

function renderEndpoints(tenantId, endpoints) {
  const active = endpoints.filter((e) => e.status === 'active').length;
  const backlog = endpoints.reduce((sum, e) => sum + e.backlog, 0);
  fill(
    $('#tn-sub'),
    endpoints.length === 0
      ? 'No endpoints'
      : `${endpoints.length} endpoint${endpoints.length === 1 ? '' : 's'}, ${active} active · ` +
          `${fmtNumber(backlog)} deliver${backlog === 1 ? 'y' : 'ies'} waiting`,
  );
  $('#tn-table').hidden = endpoints.length === 0;
  const empty = $('#tn-empty');
  empty.hidden = endpoints.length > 0;
  fill(
    empty,
    h('strong', {}, 'No endpoints'),
    h('span', { class: 'muted' }, `${tenantId} has not registered any.`),
  );
  fill(
    $('#tn-rows'),
    endpoints.map((e) => endpointRow(tenantId, e)),
  );
}

/**
 * How deliveries to it are signed, and the names of its custom headers (docs/contract.md §4.1). Only
 * the names: the values often carry the subscriber's token.
 */
function signingText(e) {
  const names = Object.keys(e.headers ?? {});
  return h(
    'div',
    { class: 'sub signing' },
    e.signature_scheme === 'v1a' ? 'v1a (Ed25519) signatures' : 'v1 (HMAC) signatures',
    names.length > 0 ? ` · headers: ${names.join(', ')}` : null,
  );
}

function endpointRow(tenantId, e) {
  return h(
    'tr',
    { dataset: { endpoint: e.id }, class: e.status === 'deleted' ? 'dimmed' : '' },
    h(
      'td',
      { class: 'endpoint-cell' },
      h('div', { class: 'mono truncate url', title: e.url }, e.url),
      h('div', { class: 'sub' }, idText(e.id), e.description ? ` · ${e.description}` : null),
      signingText(e),
      eventChips(e.events),
    ),
    h(
      'td',
      {},
      pill(e.status),
      e.disabled_reason
        ? h('div', { class: 'sub warn-text', title: e.disabled_reason }, e.disabled_reason)
        : null,
    ),
    h(
      'td',
      { class: 'rate-cell' },
      rate(e.health, `#/dead-letters${query({ tenant_id: tenantId, endpoint_id: e.id })}`),
    ),
    h(
      'td',
      { class: `num backlog ${e.backlog > 0 ? 'strong' : 'muted'}` },
      fmtNumber(e.backlog),
      e.status === 'deleted' ? null : deliveryState(e.delivery),
    ),
  );
}

/**
 * How the engine treats the endpoint now: its adaptive in-flight limit, its rate against any rate
 * limit, and any pause (docs/architecture.md).
 */
function deliveryState(d) {
  if (!d) return null;
  const perSecond =
    d.attempts_per_second < 10
      ? d.attempts_per_second.toFixed(1)
      : fmtNumber(Math.round(d.attempts_per_second));
  return [
    h(
      'div',
      { class: 'sub limit', title: `adaptive limit; the ceiling is ${d.concurrency_ceiling}` },
      `${fmtNumber(d.in_flight)} in flight · limit ${fmtNumber(d.concurrency_limit)}`,
    ),
    h(
      'div',
      { class: 'sub rate-limit', title: 'attempts per second over the last minute or two' },
      `${perSecond}/s`,
      d.rate_limit === null ? '' : ` · rate limit ${fmtNumber(d.rate_limit)}/s`,
    ),
    d.circuit_open || d.paused_until
      ? h(
          'div',
          { class: 'sub warn-text paused' },
          d.circuit_open ? 'circuit open' : 'paused',
          d.paused_until ? ` until ${fmtWhen(d.paused_until)}` : '',
        )
      : null,
  ];
}

function eventChips(events) {
  const shown = events.slice(0, 3);
  return h(
    'div',
    { class: 'chips', title: events.join(', ') },
    shown.map((name) => h('span', { class: 'chip mono' }, name)),
    events.length > shown.length
      ? h('span', { class: 'chip more' }, `+${events.length - shown.length}`)
      : null,
  );
}

/**
 * The success rate as a number and a bar coloured by how worrying it is, and the endpoint's dead letters
 * still awaiting an operator, of any age (the overview's count, per endpoint), linking to their list.
 */
function rate(health, deadLink) {
  const awaiting = health.dead_letters_awaiting
    ? h(
        'a',
        { class: 'link awaiting', href: deadLink },
        `${fmtNumber(health.dead_letters_awaiting)} dead letter${health.dead_letters_awaiting === 1 ? '' : 's'} awaiting →`,
      )
    : null;
  if (health.success_rate === null) {
    return h(
      'div',
      {},
      h('span', { class: 'muted small', dataset: { rate: 'none' } }, 'no deliveries in 24 h'),
      awaiting ? h('div', { class: 'sub' }, awaiting) : null,
    );
  }
  const ratio = health.success_rate;
  const tone = ratio >= 0.99 ? 'ok' : ratio >= 0.9 ? 'warn' : 'danger';
  const fillBar = h('div', { class: `rate-fill series-${tone}` });
  fillBar.style.width = `${Math.max(2, ratio * 100)}%`;
  return h(
    'div',
    { class: 'rate', dataset: { rate: String(ratio) } },
    h(
      'div',
      { class: 'rate-top' },
      h('strong', { class: `tone-${tone}` }, fmtPercent(ratio)),
      h('div', { class: 'rate-track' }, fillBar),
    ),
    h(
      'div',
      { class: 'sub' },
      `${fmtNumber(health.succeeded)} ok · ${fmtNumber(health.failed - health.dead)} retried`,
      health.dead ? ` · ${fmtNumber(health.dead)} died` : null,
    ),
    awaiting ? h('div', { class: 'sub' }, awaiting) : null,
    refusedText(health.refused),
  );
}

const REFUSALS = [
  ['ssrf', 'private address', 'the address was not public at connect (HOOKLINE_ALLOW_PRIVATE_NETWORKS)'],
  ['tls', 'TLS', 'the TLS handshake or certificate check failed'],
  ['proxy', 'egress proxy', 'the egress proxy refused or could not be reached'],
];

/**
 * Failed attempts in the 24 hours that never reached the subscriber, by reason (docs/operators.md,
 * "Refused connections"): nothing the tenant sees, and nothing that mends by itself.
 */
function refusedText(refused) {
  const parts = REFUSALS.filter(([key]) => refused?.[key] > 0);
  if (parts.length === 0) return null;
  return h(
    'div',
    {
      class: 'sub warn-text refused',
      dataset: { refused: parts.map(([key]) => `${key}:${refused[key]}`).join(' ') },
      title: parts.map(([, , why]) => why).join('; '),
    },
    `refused: ${parts.map(([key, label]) => `${fmtNumber(refused[key])} ${label}`).join(' · ')}`,
  );
}
