// The retry schedule as a table (docs/contract.md §6): exponential, capped, ±25 % jitter; Retry-After honoured
// when it asks for longer, up to a cap. Randomness is injected, so nothing here waits.
import { describe, expect, it } from 'vitest';
import { RETRY_AFTER_CAP_MS, backoffDelay, parseRetryAfter, retryDelay } from '../../src/engine/backoff.js';

const policy = { baseMs: 1000, maxMs: 30_000 };
const low = () => 0; // jitter -25 %
const mid = () => 0.5; // no jitter
const high = () => 1; // jitter +25 %

describe('backoffDelay', () => {
  it.each([
    // n, exact (random 0.5), -25 % (random 0), +25 % (random 1)
    [1, 1000, 750, 1250],
    [2, 2000, 1500, 2500],
    [3, 4000, 3000, 5000],
    [4, 8000, 6000, 10_000],
    [5, 16_000, 12_000, 20_000],
    [6, 30_000, 22_500, 37_500], // 32 000 capped to 30 000, then jittered
    [7, 30_000, 22_500, 37_500],
    [40, 30_000, 22_500, 37_500],
  ])('retry %i waits %i ms (jitter bounds %i..%i)', (n, exact, min, max) => {
    expect(backoffDelay(n, policy, mid)).toBe(exact);
    expect(backoffDelay(n, policy, low)).toBe(min);
    expect(backoffDelay(n, policy, high)).toBe(max);
  });

  it('stays within ±25 % of the capped exponential for any random value', () => {
    for (let n = 1; n <= 12; n++) {
      const exact = Math.min(policy.maxMs, policy.baseMs * 2 ** (n - 1));
      for (let i = 0; i <= 20; i++) {
        const d = backoffDelay(n, policy, () => i / 20);
        expect(d).toBeGreaterThanOrEqual(Math.floor(exact * 0.75));
        expect(d).toBeLessThanOrEqual(Math.ceil(exact * 1.25));
      }
    }
  });

  it('defaults to Math.random and still respects the bounds', () => {
    for (let i = 0; i < 200; i++) {
      const d = backoffDelay(3, policy);
      expect(d).toBeGreaterThanOrEqual(3000);
      expect(d).toBeLessThanOrEqual(5000);
    }
  });

  it('uses the test configuration of the suites (base 20, max 100)', () => {
    const fast = { baseMs: 20, maxMs: 100 };
    expect([1, 2, 3, 4, 5].map((n) => backoffDelay(n, fast, mid))).toEqual([20, 40, 80, 100, 100]);
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2030-01-01T00:00:00Z');

  it.each([
    ['0', 0],
    ['1', 1000],
    ['120', 120_000],
    [' 30 ', 30_000],
    ['Tue, 01 Jan 2030 00:00:10 GMT', 10_000],
    ['Tue, 01 Jan 2030 01:00:00 GMT', 3_600_000],
    // The obsolete RFC 850 and asctime forms are HTTP-dates too (RFC 9110 §5.6.7).
    ['Tuesday, 01-Jan-30 00:00:20 GMT', 20_000],
    ['Tue Jan  1 00:00:30 2030', 30_000],
    // A date in the past means "now".
    ['Mon, 31 Dec 2029 23:00:00 GMT', 0],
  ])('%j → %i ms', (value, expected) => {
    expect(parseRetryAfter(value, now)).toBe(expected);
  });

  // Date.parse alone would read "-1", "1.5" or "Foo 5" as dates in 2001 (and so as "retry now").
  it.each([
    [undefined],
    [''],
    ['soon'],
    ['garbage!'],
    ['1h'],
    ['-1'],
    ['1.5'],
    ['Foo 5'],
    ['2030-01-01T00:00:10Z'],
    ['Fooday, 99 Foo 2030'],
  ])('%j is ignored (null)', (value) => {
    expect(parseRetryAfter(value, now)).toBeNull();
  });
});

describe('retryDelay', () => {
  it('is the backoff when there is no Retry-After', () => {
    expect(retryDelay(2, policy, null, mid)).toBe(2000);
    expect(retryDelay(2, policy, null, low)).toBe(1500);
  });

  it('keeps the backoff when Retry-After asks for less', () => {
    expect(retryDelay(4, policy, 1000, mid)).toBe(8000);
    expect(retryDelay(4, policy, 0, high)).toBe(10_000);
  });

  it('honours a longer Retry-After', () => {
    expect(retryDelay(1, policy, 60_000, mid)).toBe(60_000);
    expect(retryDelay(1, policy, 3_600_000, high)).toBe(3_600_000);
  });

  it('caps Retry-After at RETRY_AFTER_CAP_MS', () => {
    expect(RETRY_AFTER_CAP_MS).toBe(24 * 60 * 60 * 1000);
    expect(retryDelay(1, policy, RETRY_AFTER_CAP_MS, mid)).toBe(RETRY_AFTER_CAP_MS);
    expect(retryDelay(1, policy, RETRY_AFTER_CAP_MS + 1, mid)).toBe(RETRY_AFTER_CAP_MS);
    expect(retryDelay(1, policy, 30 * RETRY_AFTER_CAP_MS, mid)).toBe(RETRY_AFTER_CAP_MS);
  });

  it('combines with parseRetryAfter end to end', () => {
    const now = Date.now();
    expect(retryDelay(1, policy, parseRetryAfter('90', now), mid)).toBe(90_000);
    expect(retryDelay(1, policy, parseRetryAfter('9999999999', now), mid)).toBe(RETRY_AFTER_CAP_MS);
    expect(retryDelay(3, policy, parseRetryAfter('nonsense', now), mid)).toBe(4000);
  });
});
