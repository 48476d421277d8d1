// Small DOM and formatting helpers. Everything the API says reaches the page as text nodes or
// attribute values through these, never as HTML: bodies, headers and error messages are untrusted.
/* global document, Node */

/**
 * `h('td', {class: 'mono', title: id}, id)`: an element with attributes, listeners (`onclick`),
 * and children, where strings and numbers become text nodes and null/false are skipped.
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
    else if (name === 'class') el.className = value;
    else if (name === 'dataset') Object.assign(el.dataset, value);
    else if (value === true) el.setAttribute(name, '');
    else el.setAttribute(name, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export const $ = (selector, root = document) => root.querySelector(selector);
export const $$ = (selector, root = document) => [...root.querySelectorAll(selector)];

/** Shows a message in an alert box (`tone`: danger, warning, success, info), or hides it with null. */
export function alertBox(el, tone, ...children) {
  if (tone === null) {
    el.hidden = true;
    el.replaceChildren();
    return;
  }
  el.className = `alert alert-${tone}`;
  fill(el, ...children);
  el.hidden = false;
}

/** An API error as the operator should read it: the code, then the server's message. */
export function errorParts(err) {
  if (err && typeof err.code === 'string') return [h('code', {}, err.code), ' ', err.message];
  return [String(err?.message ?? err)];
}

const TONES = {
  active: 'ok',
  succeeded: 'ok',
  pending: 'info',
  delivering: 'info',
  paused: 'info',
  disabled: 'warn',
  dead: 'danger',
  deleted: 'neutral',
  cancelled: 'neutral',
};

/** A coloured status pill; unknown statuses are neutral. */
export function pill(status, label = status) {
  return h('span', { class: `pill pill-${TONES[status] ?? 'neutral'}`, dataset: { status } }, label);
}

const numberFormat = new Intl.NumberFormat('en');
export const fmtNumber = (n) => numberFormat.format(n);

export function fmtPercent(ratio) {
  if (ratio === null || ratio === undefined) return '–';
  // Rounded down, so 99.96 % reads "99.9 %" and never a reassuring "100 %" it has not earned.
  return ratio >= 1 ? '100 %' : `${(Math.floor(ratio * 1000) / 10).toFixed(1)} %`;
}

const timeFormat = new Intl.DateTimeFormat('en-GB', {
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
});
const shortTime = new Intl.DateTimeFormat('en-GB', { hour: '2-digit', minute: '2-digit' });
const dateTimeFormat = new Intl.DateTimeFormat('en-GB', {
  day: 'numeric',
  month: 'short',
  hour: '2-digit',
  minute: '2-digit',
});

export const fmtClock = (date) => timeFormat.format(date);
export const fmtShortTime = (date) => shortTime.format(date);

/** Time of day for today, day and time otherwise. */
export function fmtWhen(iso) {
  const date = new Date(iso);
  const today = new Date();
  return date.toDateString() === today.toDateString() ? timeFormat.format(date) : dateTimeFormat.format(date);
}

/** "just now", "4 min ago", "3 h ago", "2 d ago". */
export function fmtAgo(iso, now = Date.now()) {
  const seconds = Math.max(0, Math.round((now - new Date(iso).getTime()) / 1000));
  if (seconds < 45) return 'just now';
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86_400) return `${Math.round(seconds / 3600)} h ago`;
  return `${Math.round(seconds / 86_400)} d ago`;
}

/** A timestamp cell: relative time, with the exact UTC time on hover. */
export function timeCell(iso) {
  return h('time', { datetime: iso, title: iso }, fmtAgo(iso));
}

/** Long ids shortened in the middle for tables; the full id stays in the title and copy buffer. */
export function shortId(id, keep = 8) {
  if (id.length <= keep * 2 + 6) return id;
  const cut = id.indexOf('_') + 1;
  return `${id.slice(0, cut + keep)}…${id.slice(-4)}`;
}

/** A monospace id, shortened when long, with the full id on hover. */
export function idText(id, keep) {
  return h('span', { class: 'mono id', title: id }, shortId(id, keep));
}
