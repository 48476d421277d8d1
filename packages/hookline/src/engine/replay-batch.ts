// One batch of a bulk replay job (docs/contract.md §4.3, docs/operators.md "Bulk replay"), run by
// the workers (delivery/replay-runner.ts) on jobs the API records (admin/replay-jobs.ts). A batch is
// one transaction of a few set-based statements whatever its size, reads no sealed original, and
// moves the job's cursor with the deliveries it adds, so a crash repeats or loses nothing. It adds to
// an endpoint only while that endpoint's backlog is below REPLAY_QUEUE_BOUND: a replay of 100,000
// dead letters reaches the subscriber at the pace it answers, and live traffic is never behind more
// than the bound.
import type { Context } from '../context.js';
import { newId } from '../ids.js';
import { markReplayedMany, replayCandidates, type DeadLetterFilter } from '../store/dead-letters.js';
import { insertDeliveries } from '../store/deliveries.js';
import { getQueues, lockQueues } from '../store/endpoint-queues.js';
import { nextOrderingSeqs } from '../store/messages.js';
import { advanceReplayJob, renewReplayJob } from '../store/replay-jobs.js';

/** Dead letters one batch looks at. */
export const REPLAY_BATCH = 100;
/**
 * A job adds to an endpoint only while its deliveries waiting and in flight are fewer than this. Above
 * the largest adaptive limit (HOOKLINE_ENDPOINT_CONCURRENCY, 64 by default), so a healthy subscriber
 * is kept busy; small enough that a live event waits behind at most this many replays.
 */
export const REPLAY_QUEUE_BOUND = 200;
/** How long a worker holds a job without renewing it (each batch renews it). */
export const REPLAY_LEASE_MS = 30_000;

/** A replay in one of these states is under way or has delivered: a job leaves the record alone. */
const UNDER_WAY = new Set(['held', 'pending', 'delivering', 'succeeded']);

export interface BatchOptions {
  batchSize?: number;
  queueBound?: number;
  leaseMs?: number;
}

export interface BatchResult {
  /** lost: the job is no longer this worker's (its lease was taken over, or the job ended). */
  state: 'progress' | 'paced' | 'done' | 'lost';
  /** Deliveries added. */
  added: number;
}

/** One batch of a job `owner` holds: one transaction, fenced by the lease. */
export async function runReplayBatch(
  ctx: Context,
  jobId: string,
  owner: string,
  options: BatchOptions = {},
): Promise<BatchResult> {
  const batchSize = options.batchSize ?? REPLAY_BATCH;
  const bound = options.queueBound ?? REPLAY_QUEUE_BOUND;
  const leaseMs = options.leaseMs ?? REPLAY_LEASE_MS;
  return ctx.db.transaction(async (tx): Promise<BatchResult> => {
    const now = ctx.clock();
    // First, as in every transaction that touches the job: it also locks the job row (PostgreSQL).
    const job = await renewReplayJob(tx, jobId, owner, now, now + leaseMs);
    if (!job) return { state: 'lost', added: 0 };
    const filter: DeadLetterFilter = {
      tenantId: job.tenant_id,
      endpointId: job.endpoint_id,
      since: job.since,
      until: job.until,
    };
    const candidates =
      job.last_id === null
        ? []
        : await replayCandidates(tx, filter, job.cursor_id ?? '', job.last_id, batchSize);
    // Queue rows before dead letters and deliveries: the lock order of every transaction
    // (store/endpoint-queues.ts). Read under the lock, the backlog cannot grow behind this batch's back.
    const endpoints = [
      ...new Set(candidates.filter((c) => c.endpoint_status === 'active').map((c) => c.endpoint_id)),
    ];
    await lockQueues(tx, endpoints);
    const room = new Map(
      (await getQueues(tx, endpoints)).map((q) => [
        q.endpoint_id,
        bound - Number(q.queued) - Number(q.in_flight),
      ]),
    );
    const { chosen, cursor, paced, failed, skipped } = choose(candidates, room, bound, now);
    const marked = await markReplayedMany(
      tx,
      chosen.map((c) => ({
        id: c.id,
        previousReplayDeliveryId: c.replay_delivery_id,
        replayDeliveryId: c.deliveryId,
      })),
      now,
    );
    // A single replay of the same record that started meanwhile won: this one is skipped.
    const won = chosen.filter((c) => marked.has(c.id));
    // Each joins the back of its key's line (docs/contract.md §6), in dead-letter order.
    const seqs = await nextOrderingSeqs(tx, won.filter((c) => c.ordering_key !== null).length);
    let nextSeq = 0;
    await insertDeliveries(
      tx,
      won.map((c) => ({
        id: c.deliveryId,
        message_id: c.message_id,
        endpoint_id: c.endpoint_id,
        tenant_id: c.tenant_id,
        event_type: c.event_type,
        next_attempt_at: now,
        replay_of: c.id,
        first_headers: null,
        ordering_key: c.ordering_key,
        ordering_seq: c.ordering_key === null ? null : seqs[nextSeq++]!,
      })),
      now,
    );
    const done = !paced && candidates.length < batchSize;
    await advanceReplayJob(
      tx,
      jobId,
      { cursor, replayed: won.length, skipped: skipped + chosen.length - won.length, failed, done },
      now,
    );
    return { state: done ? 'done' : paced ? 'paced' : 'progress', added: won.length };
  });
}

type Candidate = Awaited<ReturnType<typeof replayCandidates>>[number];

/**
 * The candidates a batch replays, in id order and no further than the first whose endpoint is full:
 * the cursor is exact. A record whose replay is under way is skipped; one whose endpoint is gone fails.
 */
function choose(candidates: readonly Candidate[], room: Map<string, number>, bound: number, now: number) {
  let cursor: string | null = null;
  let skipped = 0;
  let failed = 0;
  let paced = false;
  const chosen: (Candidate & { deliveryId: string })[] = [];
  for (const c of candidates) {
    if (c.endpoint_status !== 'active') failed += 1;
    else if (c.replay_status !== null && UNDER_WAY.has(c.replay_status)) skipped += 1;
    else {
      const left = room.get(c.endpoint_id) ?? bound;
      if (left <= 0) {
        paced = true;
        break;
      }
      room.set(c.endpoint_id, left - 1);
      chosen.push({ ...c, deliveryId: newId('delivery', now) });
    }
    cursor = c.id;
  }
  return { chosen, cursor, skipped, failed, paced };
}
