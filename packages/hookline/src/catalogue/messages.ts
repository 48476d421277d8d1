// What an unknown name is told: where the names are listed, and the nearest one when it looks like a typo.
import { WILDCARDS } from './event-filter.js';
import { EVENT_TYPES } from './events.js';

/** Edit distance, stopping early: names further apart than `max` all answer max + 1. */
function distance(a: string, b: string, max: number): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
    }
    if (Math.min(...current) > max) return max + 1;
    previous = current;
  }
  return previous[b.length]!;
}

/**
 * The nearest name a few edits from `name` (case aside): at most one edit per three characters, and
 * three at most, so a short name is not "corrected" into an unrelated one.
 */
function nearest(name: string, candidates: readonly string[]): string | null {
  if (name.length > 100) return null;
  const max = Math.min(3, Math.floor(name.length / 3));
  let best: string | null = null;
  let bestDistance = max + 1;
  for (const candidate of candidates) {
    const d = distance(name.toLowerCase(), candidate.toLowerCase(), max);
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  return best;
}

function quote(name: string): string {
  return JSON.stringify(name.length > 100 ? `${name.slice(0, 100)}…` : name);
}

function didYouMean(name: string, candidates: readonly string[]): string {
  const near = nearest(name, candidates);
  return near === null ? '' : ` (did you mean ${quote(near)}?)`;
}

/** The message of 400 unknown_event_type. */
export function unknownEventTypeMessage(type: string): string {
  return (
    `unknown event type ${quote(type)}${didYouMean(type, EVENT_TYPES)}; ` +
    `GET /v1/event-types lists the ${EVENT_TYPES.length} names`
  );
}

/** The message of 400 invalid_event_filter for the entries of `events` that are not filters. */
export function invalidEventFiltersMessage(invalid: readonly string[]): string {
  const filters = [...EVENT_TYPES, ...WILDCARDS];
  const named = invalid.map((name) => `${quote(name)}${didYouMean(name, filters)}`).join(', ');
  return (
    `events has unknown event filter${invalid.length > 1 ? 's' : ''} ${named}; ` +
    `use event type names (GET /v1/event-types lists them) or the wildcards ${WILDCARDS.join(', ')}`
  );
}
