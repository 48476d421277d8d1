// Ids sort by creation time; within one millisecond, by the order one process made them.
import { describe, expect, it } from 'vitest';
import { idAt, isId, newId } from '../src/ids.js';

describe('ids', () => {
  it('made in the same millisecond, sort in the order they were made', () => {
    const now = 1_700_000_000_000;
    const ids = Array.from({ length: 2000 }, () => newId('deadLetter', now));
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(isId('deadLetter', id)).toBe(true);
  });

  it('sort by time across milliseconds, including a clock that goes back', () => {
    const a = newId('message', 1_700_000_000_005);
    const b = newId('message', 1_700_000_000_001);
    expect(b < a).toBe(true);
    expect(b >= idAt('message', 1_700_000_000_001)).toBe(true);
    expect(b < idAt('message', 1_700_000_000_002)).toBe(true);
  });
});
