// When to try again. Pure, so the schedule is tested as a table and time never has to pass in tests.

export interface BackoffPolicy {
  baseMs: number;
  maxMs: number;
}

/** A subscriber's Retry-After is honoured up to this, so it cannot park a delivery for weeks. */
export const RETRY_AFTER_CAP_MS = 24 * 60 * 60 * 1000;
const JITTER = 0.25;

/** The wait before retry `n` (1, 2, …): min(max, base · 2^(n−1)) with ±25 % jitter. */
export function backoffDelay(n: number, policy: BackoffPolicy, random: () => number = Math.random): number {
  const exponential = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.max(0, n - 1));
  return Math.max(0, Math.round(exponential * (1 + JITTER * (2 * random() - 1))));
}

/** Parses Retry-After (delta seconds or an HTTP date) into milliseconds from `now`; null if absent or invalid. */
export function parseRetryAfter(value: string | undefined, now: number): number | null {
  if (value === undefined) return null;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  // Every HTTP-date form starts with the day name (RFC 9110 §5.6.7). Date.parse alone reads nearly
  // anything as a date ("-1", "1.5" and "Foo 5" are all days in 2001), so garbage is refused first.
  if (!/^(Mon|Tue|Wed|Thu|Fri|Sat|Sun)/.test(trimmed)) return null;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/** The delay before retry `n`: the backoff, or the subscriber's longer Retry-After within the cap. */
export function retryDelay(
  n: number,
  policy: BackoffPolicy,
  retryAfterMs: number | null,
  random: () => number = Math.random,
): number {
  const backoff = backoffDelay(n, policy, random);
  return retryAfterMs === null ? backoff : Math.max(backoff, Math.min(retryAfterMs, RETRY_AFTER_CAP_MS));
}
