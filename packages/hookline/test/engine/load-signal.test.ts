// What an answer says about the endpoint's capacity (engine/outcomes.ts, loadSignal;
// docs/architecture.md, "Adaptive concurrency"): overload by its status only for time-outs, connection
// errors, 429 and 503; a quick 500 or 4xx says nothing about load, so a subscriber failing some
// requests at random keeps its limit.
import { describe, expect, it } from 'vitest';
import { FAST_ANSWER_MS, loadSignal, type AttemptResult } from '../../src/engine/outcomes.js';

const answer = (status: number | null, durationMs = 5): AttemptResult => ({
  ok: status !== null && status >= 200 && status < 300,
  status,
  error: status !== null && status >= 200 && status < 300 ? null : 'failed',
  retryAfterMs: null,
  durationMs,
});

describe('loadSignal', () => {
  it.each([
    ['a quick 2xx', answer(200), 'fast'],
    ['a 2xx slower than FAST_ANSWER_MS', answer(204, FAST_ANSWER_MS + 1), 'slow'],
    ['a time-out or connection error', answer(null, 2000), 'congested'],
    ['429 Too Many Requests', answer(429), 'congested'],
    ['503 Service Unavailable', answer(503), 'congested'],
    ['a quick 500', answer(500), 'none'],
    ['a slow 500 (its time counts as an answer time instead)', answer(500, 3000), 'none'],
    ['502 from a gateway', answer(502), 'none'],
    ['400, 401, 404', answer(404), 'none'],
  ] as const)('%s', (_name, result, signal) => {
    expect(loadSignal(result)).toBe(signal);
  });
});
