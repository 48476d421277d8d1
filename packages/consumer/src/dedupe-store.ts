/**
 * What {@link DedupeStore.claim} found:
 * - `claimed`: the caller is first and must call `complete` or `release` when done;
 * - `in_progress`: another request holds the claim right now (the handler answers 409 so the sender
 *   retries later rather than treating the delivery as done);
 * - `completed`: the hook-id was already processed and acknowledged.
 */
export type ClaimResult = 'claimed' | 'in_progress' | 'completed';

/**
 * Remembers which hook-ids were processed. Implement it over Redis, SQL, etc. to deduplicate across
 * processes; `claim` must be atomic (e.g. `SET NX`, `INSERT … ON CONFLICT DO NOTHING`). A shared
 * store should give claims a lease so a crashed process does not block an id forever, and keep
 * completed ids longer than the sender retries (hookline's retry horizon is hours; 24 h is safe).
 */
export interface DedupeStore {
  /** Atomically claims `id` for processing. */
  claim(id: string): ClaimResult | Promise<ClaimResult>;
  /** Marks a claimed id as processed: later claims answer `completed`. */
  complete(id: string): void | Promise<void>;
  /** Drops a claim after a failure, so the sender's retry can process the id again. */
  release(id: string): void | Promise<void>;
}

export interface MemoryDedupeStoreOptions {
  /** How long a completed id is remembered, in ms. Default 24 h: longer than the sender's retries. */
  ttlMs?: number;
  /** Most completed ids kept; beyond it the oldest are forgotten first. Default 100 000. */
  maxEntries?: number;
  /** Clock in Unix ms, injectable for tests. Default `Date.now`. */
  now?: () => number;
}

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * The default, single-process {@link DedupeStore}. Claims in progress are not bounded or expired:
 * they live only as long as the handler's own call, which always completes or releases them.
 */
export class MemoryDedupeStore implements DedupeStore {
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly now: () => number;
  private readonly processing = new Set<string>();
  // Insertion order is completion order and the TTL is fixed, so the oldest entry is always the first
  // to expire: pruning and eviction only ever look at the front of the map.
  private readonly completed = new Map<string, number>();

  constructor(options: MemoryDedupeStoreOptions = {}) {
    this.ttlMs = options.ttlMs ?? DAY_MS;
    this.maxEntries = options.maxEntries ?? 100_000;
    this.now = options.now ?? Date.now;
    if (!(this.ttlMs > 0)) throw new RangeError('ttlMs must be positive');
    if (!Number.isInteger(this.maxEntries) || this.maxEntries < 1) {
      throw new RangeError('maxEntries must be a positive integer');
    }
  }

  /** Completed ids currently remembered. */
  get size(): number {
    this.prune();
    return this.completed.size;
  }

  claim(id: string): ClaimResult {
    this.prune();
    if (this.processing.has(id)) return 'in_progress';
    if (this.completed.has(id)) return 'completed';
    this.processing.add(id);
    return 'claimed';
  }

  complete(id: string): void {
    this.processing.delete(id);
    this.completed.delete(id); // re-insert at the back so order stays by expiry
    this.completed.set(id, this.now() + this.ttlMs);
    for (const oldest of this.completed.keys()) {
      if (this.completed.size <= this.maxEntries) break;
      this.completed.delete(oldest);
    }
  }

  release(id: string): void {
    this.processing.delete(id);
  }

  private prune(): void {
    const now = this.now();
    for (const [id, expiresAt] of this.completed) {
      if (expiresAt > now) break;
      this.completed.delete(id);
    }
  }
}
