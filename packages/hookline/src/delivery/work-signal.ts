// Wakes idle workers when there is new work, instead of making them poll tightly. In one process it is
// a plain callback; where processes share the database (PostgreSQL) it is also a notification through
// the store, so API processes wake workers elsewhere. Workers still poll on a timer, so a lost
// notification delays work, never loses it.
import type { Logger } from 'pino';
import type { Db } from '../store/db.js';

const CHANNEL = 'hookline_work';
/** Coalesces bursts of emits into one notification. */
const NOTIFY_DEBOUNCE_MS = 5;

export class WorkSignal {
  private readonly listeners = new Set<() => void>();
  private notifyTimer: NodeJS.Timeout | null = null;
  private stopListening: (() => Promise<void>) | null = null;
  private closed = false;

  private constructor(
    private readonly db: Db,
    private readonly logger: Logger,
  ) {}

  static async create(db: Db, logger: Logger): Promise<WorkSignal> {
    return new WorkSignal(db, logger);
  }

  /** Tells every worker, here and (where the database is shared) in other processes, that work may be waiting. */
  notify(): void {
    this.wakeLocal();
    const notifications = this.db.notifications;
    if (!notifications || this.notifyTimer) return;
    this.notifyTimer = setTimeout(() => {
      this.notifyTimer = null;
      notifications.notify(CHANNEL).catch((err: unknown) => {
        this.logger.warn({ err }, 'NOTIFY failed; workers will find the work on their next poll');
      });
    }, NOTIFY_DEBOUNCE_MS);
    this.notifyTimer.unref();
  }

  private wakeLocal(): void {
    for (const listener of this.listeners) listener();
  }

  /** Subscribes to wake-ups; where the database is shared, the first subscriber starts listening. */
  async onWake(listener: () => void): Promise<() => void> {
    this.listeners.add(listener);
    const notifications = this.db.notifications;
    if (notifications && !this.stopListening && !this.closed) {
      this.stopListening = await notifications.listen(CHANNEL, () => this.wakeLocal(), this.logger);
    }
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    if (this.notifyTimer) clearTimeout(this.notifyTimer);
    const stop = this.stopListening;
    this.stopListening = null;
    await stop?.();
  }
}
