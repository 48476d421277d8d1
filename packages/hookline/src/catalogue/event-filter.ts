import { isEventType, type EventType } from './events.js';

/**
 * The only wildcards of spec §6 / docs/contract.md §4.1. There is deliberately no general glob syntax:
 * `organizationInvitation.*` or `connection.*` are refused so that a subscription cannot
 * silently start receiving event families the spec never promised a wildcard for.
 */
export const WILDCARDS = ['user.*', 'organization.*', 'organizationMembership.*', '*'] as const;

export type Wildcard = (typeof WILDCARDS)[number];

/** An entry of an endpoint's `events` list: an exact catalogue name or one of the four wildcards. */
export type EventFilter = EventType | Wildcard;

const WILDCARD_SET: ReadonlySet<string> = new Set(WILDCARDS);

export function isWildcard(s: string): s is Wildcard {
  return WILDCARD_SET.has(s);
}

export function isValidEventFilter(s: string): s is EventFilter {
  // Exact, case-sensitive comparison only: no trimming or case folding, so what is stored is
  // byte-for-byte what matching later compares against.
  return isEventType(s) || isWildcard(s);
}

/** The invalid entries of `list`, each reported once, in the order they first appear. */
export function findInvalidEventFilters(list: readonly string[]): string[] {
  const invalid = new Set<string>();
  for (const entry of list) {
    if (!isValidEventFilter(entry)) invalid.add(entry);
  }
  return [...invalid];
}

function filterMatches(filter: string, type: EventType): boolean {
  if (filter === '*') return true;
  if (isWildcard(filter)) {
    // Keep the trailing dot: `organization.` must not be a prefix of `organizationMembership.…`.
    return type.startsWith(filter.slice(0, -1));
  }
  return filter === type;
}

/**
 * Whether an endpoint subscribed with `filters` should receive an event of `type`.
 * Unknown types match nothing, not even `*`: only catalogue events are ever delivered, so a
 * typo'd type must not fan out to every catch-all subscriber. Invalid filters never match.
 */
export function matchesEventFilter(filters: readonly string[], type: string): boolean {
  if (!isEventType(type)) return false;
  return filters.some((filter) => isValidEventFilter(filter) && filterMatches(filter, type));
}
