// Wakes idle workers when there is new work, instead of making them poll tightly. In one process it is
// a plain callback; on PostgreSQL it is also NOTIFY/LISTEN so API processes wake workers elsewhere.
// Workers still poll on a timer, so a lost notification delays work, never loses it.
import pg from 'pg';
import type { Logger } from 'pino';
import type { Db } from '../store/db.js';
import { PgDb } from '../store/postgres/pg-db.js';

const CHANNEL = 'hookline_work';
/** Coalesces bursts of emits into one NOTIFY. */
const NOTIFY_DEBOUNCE_MS = 5;

export class WorkSignal {
  private readonly listeners = new Set<() => void>();
  private notifyTimer: NodeJS.Timeout | null = null;
  private listenClient: pg.Client | null = null;
  private closed = false;

  private constructor(
    private readonly pgDb: PgDb | null,
    private readonly logger: Logger,
  ) {}

  static async create(db: Db, logger: Logger): Promise<WorkSignal> {
    return new WorkSignal(db instanceof PgDb ? db : null, logger);
  }

  /** Tells every worker, here and (on PostgreSQL) in other processes, that work may be waiting. */
  notify(): void {
    this.wakeLocal();
    if (!this.pgDb || this.notifyTimer) return;
    this.notifyTimer = setTimeout(() => {
      this.notifyTimer = null;
      this.pgDb?.run(`SELECT pg_notify('${CHANNEL}', '')`).catch((err: unknown) => {
        this.logger.warn({ err }, 'NOTIFY failed; workers will find the work on their next poll');
      });
    }, NOTIFY_DEBOUNCE_MS);
    this.notifyTimer.unref();
  }

  private wakeLocal(): void {
    for (const listener of this.listeners) listener();
  }

  /** Subscribes to wake-ups; on PostgreSQL the first subscriber starts listening. */
  async onWake(listener: () => void): Promise<() => void> {
    this.listeners.add(listener);
    if (this.pgDb && !this.listenClient) await this.listen();
    return () => this.listeners.delete(listener);
  }

  private async listen(): Promise<void> {
    if (!this.pgDb || this.closed) return;
    const client = new pg.Client(this.pgDb.pool.options);
    this.listenClient = client;
    client.on('notification', () => this.wakeLocal());
    client.on('error', (err) => {
      this.logger.warn({ err }, 'LISTEN connection lost; reconnecting');
      this.listenClient = null;
      client.end().catch(() => {});
      setTimeout(() => void this.listen().catch(() => {}), 1000).unref();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
    } catch (err) {
      this.logger.warn({ err }, 'could not LISTEN; workers fall back to polling');
      this.listenClient = null;
      await client.end().catch(() => {});
      if (!this.closed) setTimeout(() => void this.listen().catch(() => {}), 1000).unref();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    if (this.notifyTimer) clearTimeout(this.notifyTimer);
    const client = this.listenClient;
    this.listenClient = null;
    await client?.end().catch(() => {});
  }
}
