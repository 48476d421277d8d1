import { describe, it, expect } from 'vitest';
import { MemoryDedupeStore } from '../src/index.js';

function clock(start = 1_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => void (now += ms) };
}

describe('MemoryDedupeStore', () => {
  it('lets only the first claimant in, then reports completion', () => {
    const store = new MemoryDedupeStore();
    expect(store.claim('a')).toBe('claimed');
    expect(store.claim('a')).toBe('in_progress');
    store.complete('a');
    expect(store.claim('a')).toBe('completed');
  });

  it('lets a released id be claimed again', () => {
    const store = new MemoryDedupeStore();
    expect(store.claim('a')).toBe('claimed');
    store.release('a');
    expect(store.claim('a')).toBe('claimed');
  });

  it('forgets completed ids after the TTL (24 h by default)', () => {
    const time = clock();
    const store = new MemoryDedupeStore({ now: time.now });
    store.claim('a');
    store.complete('a');
    time.advance(24 * 60 * 60 * 1000 - 1);
    expect(store.claim('a')).toBe('completed');
    time.advance(1);
    expect(store.claim('a')).toBe('claimed');
  });

  it('evicts the oldest completed ids beyond maxEntries', () => {
    const time = clock();
    const store = new MemoryDedupeStore({ maxEntries: 2, now: time.now });
    for (const id of ['a', 'b', 'c']) {
      store.claim(id);
      store.complete(id);
      time.advance(1);
    }
    expect(store.size).toBe(2);
    expect(store.claim('a')).toBe('claimed');
    expect(store.claim('b')).toBe('completed');
    expect(store.claim('c')).toBe('completed');
  });

  it('never evicts claims in progress', () => {
    const store = new MemoryDedupeStore({ maxEntries: 1 });
    store.claim('busy');
    for (const id of ['a', 'b', 'c']) {
      store.claim(id);
      store.complete(id);
    }
    expect(store.claim('busy')).toBe('in_progress');
  });

  it('validates its options', () => {
    expect(() => new MemoryDedupeStore({ ttlMs: 0 })).toThrow(RangeError);
    expect(() => new MemoryDedupeStore({ maxEntries: 0 })).toThrow(RangeError);
  });
});
