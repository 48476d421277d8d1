// Two small SVG charts for the overview: stacked bars (throughput) and lines (queue depth) over time
// slots of equal width. Drawn by hand so the console needs no library and no network; colours come
// from CSS classes (.series-ok, …) so the stylesheet owns the palette.
/* global document, ResizeObserver */
import { fmtNumber, fmtShortTime, h } from './dom.js';

const NS = 'http://www.w3.org/2000/svg';
const HEIGHT = 220;
const PAD = { top: 14, right: 14, bottom: 26, left: 46 };

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  for (const child of children) el.append(child);
  return el;
}

/** A y axis topping out at a round number just above `max`, with four or five gridlines. */
function niceScale(max) {
  if (max <= 4) return { top: 4, ticks: [0, 1, 2, 3, 4] };
  const rough = max / 4;
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((m) => m >= rough) ?? 10 * magnitude;
  const top = Math.ceil(max / step) * step;
  const ticks = [];
  for (let v = 0; v <= top + step / 2; v += step) ticks.push(v);
  return { top, ticks };
}

const compact = new Intl.NumberFormat('en', { notation: 'compact', maximumFractionDigits: 1 });

/** Minutes between x labels: the first round interval giving at most seven labels. */
function labelEvery(spanMinutes) {
  return [5, 10, 15, 30, 60, 120, 180, 240, 360, 720].find((m) => spanMinutes / m <= 7) ?? 1440;
}

/**
 * A chart bound to a container that redraws itself when the container is resized. `render(spec)`:
 * `slots` [{at: ms, values: {key: number|null}}], `series` [{key, label, tone}], `stepMs`,
 * `kind` 'bars' | 'lines', `emptyText` shown when there is nothing to plot.
 */
export function chart(container) {
  let spec = null;
  const observer = new ResizeObserver(() => spec && draw(container, spec));
  observer.observe(container);
  return {
    render(next) {
      spec = next;
      draw(container, spec);
    },
  };
}

function draw(container, spec) {
  const { slots, series, stepMs, kind } = spec;
  const width = Math.max(320, container.clientWidth || 800);
  const plotW = width - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const slotW = plotW / Math.max(1, slots.length);

  const valueAt = (slot, key) => slot.values?.[key] ?? null;
  const heightOf = (slot) =>
    kind === 'bars'
      ? series.reduce((sum, se) => sum + (valueAt(slot, se.key) ?? 0), 0)
      : Math.max(0, ...series.map((se) => valueAt(slot, se.key) ?? 0));
  const max = Math.max(0, ...slots.map(heightOf));
  const hasData = slots.some((slot) => series.some((se) => (valueAt(slot, se.key) ?? 0) > 0));
  const { top, ticks } = niceScale(max);
  const y = (v) => PAD.top + plotH - (v / top) * plotH;
  const xCenter = (i) => PAD.left + slotW * (i + 0.5);

  const svg = s('svg', {
    viewBox: `0 0 ${width} ${HEIGHT}`,
    width,
    height: HEIGHT,
    class: 'chart-svg',
    role: 'img',
    'aria-label': spec.label ?? '',
  });

  // Gridlines with their values, then time labels on round minutes.
  for (const tick of ticks) {
    svg.append(s('line', { x1: PAD.left, x2: width - PAD.right, y1: y(tick), y2: y(tick), class: 'grid' }));
    const label = s('text', { x: PAD.left - 8, y: y(tick) + 4, class: 'axis', 'text-anchor': 'end' });
    label.textContent = compact.format(tick);
    svg.append(label);
  }
  const every = labelEvery((slots.length * stepMs) / 60_000) * 60_000;
  slots.forEach((slot, i) => {
    if (slot.at % every !== 0) return;
    const label = s('text', { x: xCenter(i), y: HEIGHT - 8, class: 'axis', 'text-anchor': 'middle' });
    label.textContent = fmtShortTime(new Date(slot.at));
    svg.append(label);
  });

  if (kind === 'bars') drawBars(svg, spec, { y, slotW, plotH });
  else drawLines(svg, spec, { y, xCenter });

  const guide = s('line', { y1: PAD.top, y2: PAD.top + plotH, class: 'guide', visibility: 'hidden' });
  svg.append(guide);
  const hit = s('rect', { x: PAD.left, y: PAD.top, width: plotW, height: plotH, class: 'hit' });
  svg.append(hit);

  const tip = h('div', { class: 'chart-tip', hidden: true });
  const empty = hasData ? null : h('div', { class: 'chart-empty' }, spec.emptyText ?? 'No data');
  container.replaceChildren(svg, tip, ...(empty ? [empty] : []));

  // Hover: a guide line on the slot under the pointer and a tooltip with its values.
  hit.addEventListener('pointermove', (event) => {
    const box = svg.getBoundingClientRect();
    const x = ((event.clientX - box.left) / box.width) * width;
    const i = Math.min(slots.length - 1, Math.max(0, Math.floor((x - PAD.left) / slotW)));
    const slot = slots[i];
    if (!slot) return;
    guide.setAttribute('x1', String(xCenter(i)));
    guide.setAttribute('x2', String(xCenter(i)));
    guide.setAttribute('visibility', 'visible');
    const from = fmtShortTime(new Date(slot.at));
    const to = fmtShortTime(new Date(slot.at + stepMs));
    tip.replaceChildren(
      h('div', { class: 'chart-tip-time' }, stepMs > 60_000 ? `${from}–${to}` : from),
      ...series.map((se) => {
        const v = valueAt(slot, se.key);
        return h(
          'div',
          { class: 'chart-tip-row' },
          h('span', { class: `dot series-${se.tone}` }),
          h('span', {}, se.label),
          h('strong', {}, v === null ? '–' : fmtNumber(v)),
        );
      }),
    );
    tip.hidden = false;
    const left = (xCenter(i) / width) * box.width;
    // Flip to the left of the guide near the right edge so the tooltip stays inside the card.
    const flip = left > box.width - 190;
    tip.style.left = `${flip ? left - 12 : left + 12}px`;
    tip.style.transform = flip ? 'translateX(-100%)' : 'none';
  });
  hit.addEventListener('pointerleave', () => {
    guide.setAttribute('visibility', 'hidden');
    tip.hidden = true;
  });
}

function drawBars(svg, { slots, series }, { y, slotW }) {
  const barW = Math.max(1, Math.min(28, slotW * 0.7));
  slots.forEach((slot, i) => {
    let base = 0;
    const x = PAD.left + slotW * i + (slotW - barW) / 2;
    for (const se of series) {
      const v = slot.values?.[se.key] ?? 0;
      if (v <= 0) continue;
      const y0 = y(base);
      const y1 = y(base + v);
      // At least a pixel, so a single failure among thousands still shows.
      const height = Math.max(1, y0 - y1);
      svg.append(s('rect', { x, y: y0 - height, width: barW, height, class: `bar series-${se.tone}` }));
      base += v;
    }
  });
}

function drawLines(svg, { slots, series }, { y, xCenter }) {
  for (const se of series) {
    // Slots without a sample break the line instead of drawing a made-up slope across the gap.
    const runs = [];
    let run = [];
    slots.forEach((slot, i) => {
      const v = slot.values?.[se.key];
      if (v === null || v === undefined) {
        if (run.length) runs.push(run);
        run = [];
      } else run.push([xCenter(i), y(v)]);
    });
    if (run.length) runs.push(run);
    for (const points of runs) {
      if (points.length === 1) {
        const [[cx, cy]] = points;
        svg.append(s('circle', { cx, cy, r: 3, class: `point series-${se.tone}` }));
        continue;
      }
      const d = points.map(([px, py], k) => `${k ? 'L' : 'M'}${px.toFixed(1)},${py.toFixed(1)}`).join('');
      svg.append(s('path', { d, class: `line series-${se.tone}` }));
    }
    const last = runs.at(-1)?.at(-1);
    if (last && runs.at(-1).length > 1) {
      svg.append(s('circle', { cx: last[0], cy: last[1], r: 3, class: `point series-${se.tone}` }));
    }
  }
}

/** Legend chips for a chart header. */
export function legend(series, totals = null) {
  return series.map((se) =>
    h(
      'span',
      { class: 'legend-item' },
      h('span', { class: `dot series-${se.tone}` }),
      se.label,
      totals ? h('strong', {}, fmtNumber(totals[se.key] ?? 0)) : null,
    ),
  );
}
