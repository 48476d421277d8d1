// Bulk-replay jobs (docs/contract.md §4.3): each state transition of a job is one statement. A job is
// held by one worker at a time through a lease; every batch renews it first, fenced by the owner, so a
// worker whose lease was taken over cannot write another batch (admin/replay-jobs.ts).
import { forUpdate, type Queryable } from './db.js';

export type ReplayJobStatus = 'running' | 'done' | 'failed';

export interface ReplayJobRow {
  id: string;
  status: ReplayJobStatus;
  tenant_id: string | null;
  endpoint_id: string | null;
  since: number | null;
  until: number | null;
  /** The newest dead letter the job covers: later ones are not part of it. */
  last_id: string | null;
  /** The last dead letter handled: the job resumes after it. */
  cursor_id: string | null;
  count: number;
  replayed: number;
  skipped: number;
  failed: number;
  error: string | null;
  lease_owner: string | null;
  lease_expires_at: number | null;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
}

/** Both drivers may answer BIGINT and COUNT-like columns as strings. */
function typed(row: ReplayJobRow): ReplayJobRow {
  const n = (v: number | null) => (v === null ? null : Number(v));
  return {
    ...row,
    since: n(row.since),
    until: n(row.until),
    count: Number(row.count),
    replayed: Number(row.replayed),
    skipped: Number(row.skipped),
    failed: Number(row.failed),
    lease_expires_at: n(row.lease_expires_at),
    created_at: Number(row.created_at),
    updated_at: Number(row.updated_at),
    finished_at: n(row.finished_at),
  };
}

export async function insertReplayJob(
  q: Queryable,
  job: Pick<
    ReplayJobRow,
    'id' | 'status' | 'tenant_id' | 'endpoint_id' | 'since' | 'until' | 'last_id' | 'count' | 'created_at'
  >,
): Promise<void> {
  await q.run(
    `INSERT INTO replay_jobs (id, status, tenant_id, endpoint_id, since, until, last_id, count, created_at,
       updated_at, finished_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, CASE WHEN $2 = 'running' THEN NULL ELSE CAST($9 AS BIGINT) END)`,
    [
      job.id,
      job.status,
      job.tenant_id,
      job.endpoint_id,
      job.since,
      job.until,
      job.last_id,
      job.count,
      job.created_at,
    ],
  );
}

export async function getReplayJob(q: Queryable, id: string): Promise<ReplayJobRow | undefined> {
  const row = await q.one<ReplayJobRow>('SELECT * FROM replay_jobs WHERE id = $1', [id]);
  return row && typed(row);
}

/**
 * Takes the oldest running job nobody holds (never held, given back, or its lease ran out) for
 * `owner`; jobs another transaction has locked are skipped, not waited for. Without one, answers when
 * the next held or resting job can be taken (null: no job is running).
 */
export async function claimReplayJob(
  q: Queryable,
  owner: string,
  now: number,
  leaseUntil: number,
): Promise<{ job: ReplayJobRow | null; nextAt: number | null }> {
  // A plain read first: idle workers ask every poll interval and there is usually nothing, which then
  // costs no write (SQLite's one writer) and no row lock.
  const soonest = await q.one<{ at: number | string | null }>(
    "SELECT MIN(COALESCE(lease_expires_at, 0)) AS at FROM replay_jobs WHERE status = 'running'",
  );
  const at = soonest?.at == null ? null : Number(soonest.at);
  if (at === null || at >= now) return { job: null, nextAt: at };
  const free = "status = 'running' AND (lease_expires_at IS NULL OR lease_expires_at < $2)";
  const row = await q.one<ReplayJobRow>(
    `UPDATE replay_jobs SET lease_owner = $1, lease_expires_at = $3, updated_at = $2
     WHERE id = (SELECT id FROM replay_jobs WHERE ${free} ORDER BY created_at, id LIMIT 1 ${forUpdate(q.dialect, true)})
       AND ${free}
     RETURNING *`,
    [owner, now, leaseUntil],
  );
  return { job: row ? typed(row) : null, nextAt: row ? null : now };
}

/**
 * The fence of every batch: extends `owner`'s lease and answers the job, or nothing if the job is no
 * longer `owner`'s or no longer running. On PostgreSQL the row stays locked until the batch commits.
 */
export async function renewReplayJob(
  q: Queryable,
  id: string,
  owner: string,
  now: number,
  leaseUntil: number,
): Promise<ReplayJobRow | undefined> {
  const row = await q.one<ReplayJobRow>(
    `UPDATE replay_jobs SET lease_expires_at = $4, updated_at = $3
     WHERE id = $1 AND lease_owner = $2 AND status = 'running'
     RETURNING *`,
    [id, owner, now, leaseUntil],
  );
  return row && typed(row);
}

/** Records a batch: how far the job got and what it did; a finished job gives up its lease. */
export async function advanceReplayJob(
  q: Queryable,
  id: string,
  progress: { cursor: string | null; replayed: number; skipped: number; failed: number; done: boolean },
  now: number,
): Promise<void> {
  await q.run(
    `UPDATE replay_jobs SET cursor_id = COALESCE($2, cursor_id), replayed = replayed + $3,
       skipped = skipped + $4, failed = failed + $5, updated_at = $6,
       status = CASE WHEN $7 = 1 THEN 'done' ELSE status END,
       finished_at = CASE WHEN $7 = 1 THEN CAST($6 AS BIGINT) ELSE finished_at END,
       lease_owner = CASE WHEN $7 = 1 THEN NULL ELSE lease_owner END,
       lease_expires_at = CASE WHEN $7 = 1 THEN NULL ELSE lease_expires_at END
     WHERE id = $1`,
    [id, progress.cursor, progress.replayed, progress.skipped, progress.failed, now, progress.done ? 1 : 0],
  );
}

/** Ends a job that cannot go on; what it queued so far stays queued. */
export async function failReplayJob(
  q: Queryable,
  id: string,
  owner: string,
  error: string,
  now: number,
): Promise<boolean> {
  const changed = await q.run(
    `UPDATE replay_jobs SET status = 'failed', error = $3, finished_at = $4, updated_at = $4,
       lease_owner = NULL, lease_expires_at = NULL
     WHERE id = $1 AND lease_owner = $2 AND status = 'running'`,
    [id, owner, error, now],
  );
  return changed === 1;
}

/**
 * Gives a job back: at once (`until` null: its worker is stopping), or to be taken again from `until`
 * (it is paced), so that meanwhile any worker runs other jobs.
 */
export async function releaseReplayJob(
  q: Queryable,
  id: string,
  owner: string,
  now: number,
  until: number | null = null,
): Promise<void> {
  await q.run(
    `UPDATE replay_jobs SET lease_owner = NULL, lease_expires_at = $4, updated_at = $3
     WHERE id = $1 AND lease_owner = $2`,
    [id, owner, now, until],
  );
}
