// The ordered-delivery scenario shared by the in-process suite and the PostgreSQL process suite: keys
// × events emitted so that each key's events are acknowledged in order, to subscribers that fail at
// random and answer slowly, and the check that each key's deliveries first succeeded in emit order at
// every subscriber (docs/contract.md §6); and the one-second-window count the rate-limit suites share.
import { expect } from 'vitest';
import type { Queryable } from '../../src/store/db.js';
import { countAwaitingFanout } from '../../src/store/messages.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

/** A small seeded generator, so a failure is reproducible from its seed. */
export function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Event {
  key: string | null;
  n: number;
}

export interface OrderedSubscriber {
  receiver: Receiver;
  /** Each key's event numbers, in the order their first successful attempt was answered. */
  firstSuccesses: Map<string, number[]>;
  /** Unkeyed events answered 2xx, in order. */
  unkeyedSuccesses: number;
  /** Keys whose deliveries fail until told otherwise. */
  failing: Set<string>;
  /** Keys whose deliveries take this long to answer. */
  slow: Map<string, number>;
}

/**
 * A subscriber that answers 500 to a share of attempts (and to every attempt of a key in `failing`)
 * and takes up to `maxDelayMs` to answer.
 */
export async function startOrderedSubscriber(
  seed: number,
  o: { failureRate?: number; maxDelayMs?: number } = {},
): Promise<OrderedSubscriber> {
  const random = seeded(seed);
  const seen = new Set<string>();
  const sub: OrderedSubscriber = {
    receiver: null as unknown as Receiver,
    firstSuccesses: new Map(),
    unkeyedSuccesses: 0,
    failing: new Set(),
    slow: new Map(),
  };
  sub.receiver = await startReceiver((request) => {
    const event = (JSON.parse(request.body) as { data: Event }).data;
    const delayMs = sub.slow.get(event.key ?? '') ?? Math.floor(random() * (o.maxDelayMs ?? 10));
    const fail = random() < (o.failureRate ?? 0.25) || (event.key !== null && sub.failing.has(event.key));
    if (fail) return { status: 500, delayMs };
    const hookId = String(request.headers['hook-id']);
    if (!seen.has(hookId)) {
      seen.add(hookId);
      if (event.key === null) sub.unkeyedSuccesses++;
      else {
        const list = sub.firstSuccesses.get(event.key) ?? [];
        list.push(event.n);
        sub.firstSuccesses.set(event.key, list);
      }
    }
    return { status: 200, delayMs };
  });
  return sub;
}

export const keyName = (k: number) => `user_${String(k).padStart(2, '0')}`;

/**
 * Emits `events` rounds: in each, one event of every key and `unkeyedPerRound` unkeyed ones, all
 * concurrently; a round starts once the previous one is acknowledged, so each key's events are
 * acknowledged in order while keys interleave.
 */
export async function emitRounds(
  emit: (body: { type: string; data: Event; ordering_key?: string }) => Promise<void>,
  o: { keys: number; events: number; unkeyedPerRound?: number; onRound?: (round: number) => Promise<void> },
): Promise<void> {
  for (let n = 0; n < o.events; n++) {
    const batch: Promise<void>[] = [];
    for (let k = 0; k < o.keys; k++) {
      batch.push(emit({ type: 'user.updated', data: { key: keyName(k), n }, ordering_key: keyName(k) }));
    }
    for (let u = 0; u < (o.unkeyedPerRound ?? 0); u++) {
      batch.push(emit({ type: 'user.updated', data: { key: null, n } }));
    }
    await Promise.all(batch);
    await o.onRound?.(n);
  }
}

/** Every key's events first succeeded in emit order, each exactly once counted. */
export function expectEmitOrder(sub: OrderedSubscriber, keys: number, events: number): void {
  const expected = Array.from({ length: events }, (_, n) => n);
  for (let k = 0; k < keys; k++) {
    expect(sub.firstSuccesses.get(keyName(k)), `order of ${keyName(k)}`).toEqual(expected);
  }
}

/** The most attempts in any window [t, t + 1000) ms, of times in ascending order (rate limits). */
export function busiestSecond(times: readonly number[]): number {
  let most = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[i]! - times[j]! >= 1000) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

export function deliveredCount(sub: OrderedSubscriber): number {
  let n = sub.unkeyedSuccesses;
  for (const list of sub.firstSuccesses.values()) n += list.length;
  return n;
}

/**
 * Waits until every subscriber has `total` first successes. It fails as soon as none arrives for
 * `stallMs` (well inside the test's time-out), with what the store holds: the unfinished deliveries
 * and the endpoints' queue rows, so a stall says why it stalled.
 */
export async function waitForDeliveries(
  db: Queryable,
  subs: readonly OrderedSubscriber[],
  total: number,
  stallMs = 15_000,
): Promise<void> {
  const count = () => subs.reduce((n, s) => n + deliveredCount(s), 0);
  let seen = count();
  let progressAt = Date.now();
  while (seen < total * subs.length) {
    const delivered = count();
    if (delivered > seen) {
      seen = delivered;
      progressAt = Date.now();
    } else if (Date.now() - progressAt > stallMs) {
      throw new Error(
        `no delivery for ${stallMs} ms at ${seen} of ${total * subs.length}; now=${Date.now()}\n` +
          (await describeQueues(db)),
      );
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function describeQueues(db: Queryable): Promise<string> {
  // The heads: every unfinished delivery not held behind another (held ones are only counted).
  const heads = await db.all(
    `SELECT id, endpoint_id, status, attempts, ordering_key, ordering_seq, next_attempt_at,
       lease_expires_at, updated_at
     FROM deliveries WHERE status NOT IN ('succeeded', 'cancelled', 'held')
     ORDER BY endpoint_id, ordering_key, ordering_seq LIMIT 60`,
  );
  const held = await db.all(
    "SELECT endpoint_id, COUNT(*) AS n FROM deliveries WHERE status = 'held' GROUP BY endpoint_id",
  );
  const queues = await db.all('SELECT * FROM endpoint_queues ORDER BY endpoint_id');
  const unfanned = await countAwaitingFanout(db);
  return JSON.stringify({ heads, held, queues, unfanned });
}
