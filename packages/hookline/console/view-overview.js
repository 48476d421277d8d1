// Overview: the queue right now, and throughput and queue depth over the chosen range, from
// GET /v1/admin/stats. Refreshes itself every 10 s while it is on screen.
/* global document, window, CustomEvent */
import { api, query } from './api.js';
import { chart, legend } from './charts.js';
import { $, $$, alertBox, errorParts, fill, fmtClock, fmtNumber, fmtPercent, h } from './dom.js';

const REFRESH_MS = 10_000;
/** Minutes per chart slot for each range, keeping every chart under ~100 bars. */
const SLOT_MINUTES = { 60: 1, 360: 5, 1440: 15 };
const RANGE_TEXT = { 60: 'the last hour', 360: 'the last 6 hours', 1440: 'the last 24 hours' };

const THROUGHPUT = [
  { key: 'succeeded', label: 'Succeeded', tone: 'ok' },
  { key: 'failed', label: 'Failed, retrying', tone: 'warn' },
  { key: 'dead', label: 'Dead-lettered', tone: 'danger' },
];
const QUEUE = [
  { key: 'due', label: 'Due', tone: 'info' },
  { key: 'scheduled', label: 'Scheduled retries', tone: 'violet' },
  { key: 'delivering', label: 'Delivering', tone: 'teal' },
  { key: 'dead_letters', label: 'Dead letters kept', tone: 'danger' },
];

let minutes = 60;
let timer = null;
let loading = false;
let charts = null;

export function initOverview() {
  charts = { throughput: chart($('#ov-throughput')), queue: chart($('#ov-queue')) };
  for (const button of $$('#view-overview .segmented button')) {
    button.addEventListener('click', () => {
      minutes = Number(button.dataset.minutes);
      for (const b of $$('#view-overview .segmented button')) {
        b.setAttribute('aria-pressed', String(b === button));
      }
      void load();
    });
  }
}

export function showOverview() {
  void load();
  window.clearInterval(timer);
  // Skipped while the tab is in the background: nobody is looking, and the server need not work.
  timer = window.setInterval(() => document.hidden || load(), REFRESH_MS);
}

export function hideOverview() {
  window.clearInterval(timer);
  timer = null;
}

async function load() {
  if (loading) return;
  loading = true;
  try {
    const stats = await api(`/v1/admin/stats${query({ minutes })}`);
    alertBox($('#ov-alert'), null);
    render(stats);
    document.dispatchEvent(new CustomEvent('hookline:stats', { detail: stats }));
  } catch (err) {
    alertBox($('#ov-alert'), 'danger', 'Could not load the statistics: ', ...errorParts(err));
  } finally {
    loading = false;
  }
}

/** Empty slots from the start of the range to the slot holding `nowMs` (the server's clock). */
function slotsFor(nowMs) {
  const stepMs = SLOT_MINUTES[minutes] * 60_000;
  const count = Math.ceil(minutes / SLOT_MINUTES[minutes]);
  const last = Math.floor(nowMs / stepMs) * stepMs;
  const start = last - (count - 1) * stepMs;
  const slots = Array.from({ length: count }, (_, i) => ({ at: start + i * stepMs, values: null }));
  const indexOf = (iso) => {
    const i = Math.floor((new Date(iso).getTime() - start) / stepMs);
    return i >= 0 && i < count ? i : -1;
  };
  return { slots, stepMs, indexOf };
}

function render(stats) {
  const now = new Date(stats.current.at).getTime();
  const totals = { succeeded: 0, failed: 0, dead: 0 };

  const through = slotsFor(now);
  for (const slot of through.slots) slot.values = { succeeded: 0, failed: 0, dead: 0 };
  for (const point of stats.throughput) {
    const slot = through.slots[through.indexOf(point.at)];
    for (const key of Object.keys(totals)) {
      totals[key] += point[key];
      if (slot) slot.values[key] += point[key];
    }
  }

  // Queue samples are snapshots, so a slot shows its latest one rather than a sum; the last slot is
  // the depth right now.
  const queue = slotsFor(now);
  for (const sample of stats.queue) {
    const slot = queue.slots[queue.indexOf(sample.at)];
    if (slot) slot.values = sample;
  }
  queue.slots[queue.slots.length - 1].values = stats.current;

  renderCards(stats.current, totals);
  const per = SLOT_MINUTES[minutes] === 1 ? 'minute' : `${SLOT_MINUTES[minutes]} minutes`;
  fill($('#ov-throughput-sub'), `Delivery attempts per ${per} over ${RANGE_TEXT[minutes]}`);
  fill($('#ov-throughput-legend'), legend(THROUGHPUT, totals));
  charts.throughput.render({
    kind: 'bars',
    label: 'Delivery attempts over time',
    slots: through.slots,
    series: THROUGHPUT,
    stepMs: through.stepMs,
    emptyText: `No delivery attempts in ${RANGE_TEXT[minutes]}`,
  });
  fill($('#ov-queue-sub'), `Deliveries waiting, sampled once a minute; the last point is now`);
  fill($('#ov-queue-legend'), legend(QUEUE));
  charts.queue.render({
    kind: 'lines',
    label: 'Queue depth over time',
    slots: queue.slots,
    series: QUEUE,
    stepMs: queue.stepMs,
    emptyText: 'The queue has been empty',
  });
  fill($('#ov-updated'), `Updated ${fmtClock(new Date())} · every 10 s`);
}

function renderCards(current, totals) {
  const attempts = totals.succeeded + totals.failed + totals.dead;
  const card = (label, value, hint, tone = '', href = null) =>
    h(
      href ? 'a' : 'div',
      { class: `stat ${tone}`, href, dataset: { stat: label } },
      h('span', { class: 'stat-label' }, label),
      h('span', { class: 'stat-value' }, value),
      h('span', { class: 'stat-hint' }, hint),
    );
  fill(
    $('#ov-cards'),
    card('Due now', fmtNumber(current.due), 'ready to be sent', current.due > 0 ? 'tone-info' : ''),
    card('Scheduled retries', fmtNumber(current.scheduled), 'waiting out their backoff'),
    card('Delivering', fmtNumber(current.delivering), 'attempts in flight'),
    // Those not replayed, or whose replay died: a replayed one is handled (docs/operators.md).
    card(
      'Dead letters',
      fmtNumber(current.dead_letters_awaiting),
      current.dead_letters_awaiting > 0
        ? 'awaiting an operator →'
        : current.dead_letters > 0
          ? `none awaiting · ${fmtNumber(current.dead_letters)} kept`
          : 'nothing to replay',
      current.dead_letters_awaiting > 0 ? 'tone-danger' : 'tone-ok',
      '#/dead-letters',
    ),
    card(
      'Success rate',
      attempts === 0 ? '–' : fmtPercent(totals.succeeded / attempts),
      attempts === 0 ? `no attempts in ${RANGE_TEXT[minutes]}` : `of ${fmtNumber(attempts)} attempts`,
    ),
  );
}
