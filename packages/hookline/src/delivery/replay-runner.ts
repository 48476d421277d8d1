// The worker's side of bulk replay (admin/replay-jobs.ts): takes a running job nobody holds, runs its
// batches until it is done or paced (the endpoints it adds to are at their bound: the job then rests
// for PACE_MS, unheld), and gives the job back when the worker stops. Any number of workers may run this against one database: a job is held
// by one of them at a time (a lease), and a worker that froze past its lease finds its next batch
// refused once another has taken over.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { REPLAY_LEASE_MS, runReplayBatch, type BatchOptions } from '../engine/replay-batch.js';
import type { Context } from '../context.js';
import { claimReplayJob, failReplayJob, releaseReplayJob } from '../store/replay-jobs.js';
import { Wake } from './wake.js';

/** While paced, how often the endpoints' backlog is looked at again. */
const PACE_MS = 200;
/** A job whose batch fails this many times in a row (the database answering) is marked failed. */
const MAX_FAILURES = 5;
const RETRY_MS = 1000;

export interface ReplayRunnerOptions extends BatchOptions {
  /** Longest sleep while no job is waiting; wake-ups (a job was created) usually end it sooner. */
  idleMs: number;
  paceMs?: number;
  /** Deliveries were added: claimers may find work. */
  onQueued: () => void;
}

export class ReplayRunner {
  private running = false;
  /** Ends the idle sleep: new work may be waiting, or the worker stops. */
  private readonly idle = new Wake();
  /** Ends the retry sleep only when stopping. */
  private readonly stopping = new Wake();
  readonly owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;

  constructor(
    private readonly ctx: Context,
    private readonly options: ReplayRunnerOptions,
  ) {}

  wake(): void {
    this.idle.fire();
  }

  /** Runs until stop(); resolves once the job in hand is given back. */
  async run(): Promise<void> {
    this.running = true;
    const paceMs = this.options.paceMs ?? PACE_MS;
    const { idleMs } = this.options;
    while (this.running) {
      let sleepMs = idleMs;
      try {
        const now = this.ctx.clock();
        const claimed = await claimReplayJob(
          this.ctx.db,
          this.owner,
          now,
          now + (this.options.leaseMs ?? REPLAY_LEASE_MS),
        );
        if (claimed.job) {
          await this.work(claimed.job.id, paceMs);
          continue; // other jobs may be waiting, or this one again
        }
        // Held elsewhere or resting: look again when it can be taken (a lapsed lease, a paced job).
        if (claimed.nextAt !== null) sleepMs = Math.max(1, Math.min(idleMs, claimed.nextAt - now + 1));
      } catch (err) {
        this.ctx.logger.error({ err }, 'could not look for replay jobs; retrying');
      }
      await this.idle.sleep(sleepMs);
    }
  }

  stop(): void {
    this.running = false;
    this.idle.fire();
    this.stopping.fire();
  }

  /** Runs a job's batches until it ends, is taken over, is paced (then it rests) or the worker stops. */
  private async work(jobId: string, paceMs: number): Promise<'ended' | 'paced' | 'stopped'> {
    const log = this.ctx.logger.child({ replay_job: jobId });
    let failures = 0;
    while (this.running) {
      let result;
      try {
        result = await runReplayBatch(this.ctx, jobId, this.owner, this.options);
        failures = 0;
      } catch (err) {
        failures += 1;
        log.error({ err, failures }, 'replay batch failed');
        if (failures >= MAX_FAILURES) {
          const message = err instanceof Error ? err.message : String(err);
          await failReplayJob(this.ctx.db, jobId, this.owner, message, this.ctx.clock()).catch(() => {});
          return 'ended';
        }
        await this.stopping.sleep(RETRY_MS * failures);
        continue;
      }
      if (result.added > 0) this.options.onQueued();
      if (result.state === 'done') {
        log.info('replay job done');
        return 'ended';
      }
      if (result.state === 'lost') {
        log.warn('replay job taken over by another worker (this one held it past its lease)');
        return 'ended';
      }
      if (result.state === 'paced') {
        // It rests, unheld, until paceMs from now: meanwhile this and every other worker may run
        // other jobs, so one job waiting on a slow endpoint holds up no other.
        const now = this.ctx.clock();
        await releaseReplayJob(this.ctx.db, jobId, this.owner, now, now + paceMs).catch((err: unknown) =>
          log.warn({ err }, 'could not rest the paced replay job; its lease will expire'),
        );
        return 'paced';
      }
    }
    // Stopping: another worker may take the job at once instead of after the lease.
    await releaseReplayJob(this.ctx.db, jobId, this.owner, this.ctx.clock()).catch((err: unknown) =>
      log.warn({ err }, 'could not give the replay job back; its lease will expire'),
    );
    return 'stopped';
  }
}
