// Keyset pagination shared by every list: the store is asked for one row more than the page, and the
// extra row's presence says whether there is a next page, whose cursor is the last id shown.
import { HooklineError } from './errors.js';
import { isId, type IdKind } from './ids.js';

export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

/** A cursor must be one this API handed out: an id of the listed kind (or passing `isValid`). */
export function checkCursor(
  cursor: string | null | undefined,
  isValid: IdKind | ((c: string) => boolean),
): string | null {
  if (cursor == null) return null;
  const ok = typeof isValid === 'function' ? isValid(cursor) : isId(isValid, cursor);
  if (!ok) throw new HooklineError('invalid_cursor', 'cursor is not one this API returned');
  return cursor;
}

/** `rows` holds up to `limit + 1` rows in list order. */
export function toPage<R extends { id: string }, T>(
  rows: readonly R[],
  limit: number,
  view: (row: R) => T,
): Page<T> {
  const shown = rows.slice(0, limit);
  const last = shown[shown.length - 1];
  return { data: shown.map(view), next_cursor: rows.length > limit && last ? last.id : null };
}

/** Epoch milliseconds (BIGINT from either store) as the API's ISO-8601 text. */
export function isoTime(ms: number): string;
export function isoTime(ms: number | null): string | null;
export function isoTime(ms: number | null): string | null {
  return ms === null ? null : new Date(Number(ms)).toISOString();
}
