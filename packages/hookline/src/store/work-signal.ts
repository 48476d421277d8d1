// Wakes idle workers when there is new work, instead of making them poll tightly. In one process it is
// a plain callback; where processes share the database (PostgreSQL) it is also a notification through
// the store, so API processes wake workers elsewhere. Workers still poll on a timer, so a lost
// notification delays work, never loses it.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Db } from './db.js';

const CHANNEL = 'hookline_work';
/** Coalesces bursts of emits into one notification. */
const NOTIFY_DEBOUNCE_MS = 5;

/**
 * What is waiting: messages to fan out (`fanout`: an emit), deliveries to claim (`claim`: a fan-out,
 * a replay), either (`work`), or a bulk-replay job to run (`replay`), which alone wakes the workers'
 * replay runners, each of which asks the database for jobs when woken. A worker runs only the loops
 * a wake-up is for: under a stream of emits, a claim woken by every emit's notification found nothing
 * the fan-out had not yet made, and a fan-out woken by another worker's fan-out found its messages
 * taken. A process that does not know a kind (an older version during a rolling upgrade) takes it
 * for `work`.
 */
export type WakeKind = 'work' | 'fanout' | 'claim' | 'replay';
const KINDS: ReadonlySet<string> = new Set<WakeKind>(['work', 'fanout', 'claim', 'replay']);
export type WakeListener = (kind: WakeKind) => void;

export class WorkSignal {
  private readonly listeners = new Set<WakeListener>();
  /** Names this signal's notifications, so that it does not wake its own listeners twice. */
  readonly origin = randomUUID();
  private readonly unsent = new Set<WakeKind>();
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
  notify(kind: WakeKind = 'work'): void {
    this.wakeHere(kind);
    if (!this.db.notifications || this.closed) return;
    this.unsent.add(kind);
    if (this.notifyTimer) return;
    this.notifyTimer = setTimeout(() => void this.send(), NOTIFY_DEBOUNCE_MS);
    this.notifyTimer.unref();
  }

  private async send(): Promise<void> {
    this.notifyTimer = null;
    const notifications = this.db.notifications;
    if (!notifications || this.unsent.size === 0) return;
    const payload = `${this.origin} ${[...this.unsent].join(',')}`;
    this.unsent.clear();
    await notifications.notify(CHANNEL, payload).catch((err: unknown) => {
      this.logger.warn({ err }, 'NOTIFY failed; workers will find the work on their next poll');
    });
  }

  /** Wakes this signal's own listeners only: for news that other processes have already been told. */
  wakeHere(kind: WakeKind = 'work'): void {
    for (const listener of this.listeners) listener(kind);
  }

  /** A notification from the database: its sender's own listeners were woken when it was sent. */
  private received(payload: string): void {
    const [origin, kinds = 'work'] = payload.split(' ');
    if (origin === this.origin) return;
    for (const kind of kinds.split(',')) this.wakeHere(KINDS.has(kind) ? (kind as WakeKind) : 'work');
  }

  /**
   * Subscribes to wake-ups; where the database is shared, the first subscriber starts listening,
   * unless it asks for this process's own news only (`listen: false`).
   */
  async onWake(listener: WakeListener, { listen = true }: { listen?: boolean } = {}): Promise<() => void> {
    this.listeners.add(listener);
    const notifications = this.db.notifications;
    if (listen && notifications && !this.stopListening && !this.closed) {
      this.stopListening = await notifications.listen(
        CHANNEL,
        (payload) => this.received(payload),
        this.logger,
      );
    }
    return () => this.listeners.delete(listener);
  }

  /** Sends what is still waiting for the debounce (a one-shot command exits right after). */
  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    if (this.notifyTimer) {
      clearTimeout(this.notifyTimer);
      await this.send();
    }
    const stop = this.stopListening;
    this.stopListening = null;
    await stop?.();
  }
}
