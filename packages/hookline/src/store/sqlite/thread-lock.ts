// A fair write lock shared by the threads of one process that open the same SQLite file (the API and
// the delivery thread of `hookline serve`). SQLite's own lock, when taken, makes the other connection
// sleep in its busy handler (1, 2, 5 … 100 ms, and it can miss the moment the lock frees again), and
// better-sqlite3 waits synchronously, so an emit could stall the API's event loop behind delivery work.
// Taking this ticket lock first, the threads take turns in arrival order and SQLite's lock is never
// contended between them (docs/architecture.md, "One process: the delivery thread").
//
// A thread waits for its turn blocked, not on its event loop: the other thread's transactions last
// a fraction of a millisecond, and a turn announced to a busy event loop was taken only after the
// loop's current work, 4-10 ms later, while the lock stood idle and the other thread queued behind
// it. Only a wait that outlasts BLOCKING_WAIT_MS goes on with the event loop free.
//
// There is never more than one holder. A waiter that has waited GIVE_UP_MS gives up: its acquire
// throws ThreadLockTimeout (its transaction fails, as SQLite's busy timeout would fail it), the holder
// keeps the lock, and the waiter's ticket is marked abandoned so that the turn passes over it. The
// same connection's next acquire takes that ticket back if it has not been passed over yet, so a
// connection that keeps retrying behind a stuck holder keeps one place in the line, not one per try.
// A thread that ends while holding or waiting (killed, or an uncaught error) cannot release; whoever
// sees it end (the thread that started it) calls releaseThread with its id.

import { threadId } from 'node:worker_threads';

/** How long a waiter waits for its turn before its transaction fails (as SQLite's busy_timeout). */
const GIVE_UP_MS = 5000;

/** How long a thread blocks for its turn before it waits with its event loop free instead. */
const BLOCKING_WAIT_MS = 20;

/**
 * Tickets waiting or held at once, at most: each connection has at most one, live or abandoned
 * (SqliteDb runs its transactions one at a time), and a process has a handful of connections.
 */
const SLOTS = 64;

/** Bytes of shared memory a lock needs: the two counters, then one 64-bit slot per ticket. */
export const THREAD_LOCK_BYTES = 8 + 8 * SLOTS;

/** A slot's state: the thread (id + 1) that waits for or holds the ticket, or this. */
const ABANDONED = -1;

/** This thread's mark in the slots; the main thread's id is 0. */
const ME = threadId + 1;

/** Atomics.waitAsync (Node 16+), which TypeScript's ES2022 library does not declare. */
const waitAsync = (
  Atomics as unknown as {
    waitAsync(
      cells: Int32Array,
      index: number,
      value: number,
      timeoutMs: number,
    ): { async: boolean; value: Promise<string> | string };
  }
).waitAsync.bind(Atomics);

/** A slot names its ticket as well as its state, so that a slot reused by a later ticket never matches. */
function entry(ticket: number, state: number): bigint {
  return BigInt.asIntN(64, (BigInt(ticket) << 32n) | BigInt(state >>> 0));
}

/** Thrown by acquire when the turn did not come within the limit. */
export class ThreadLockTimeout extends Error {
  /** As SQLite's own busy error, which the API answers with 503 and Retry-After (store/db.ts). */
  readonly code = 'SQLITE_BUSY';
  constructor(waitedMs: number) {
    super(
      `another thread of this process held the SQLite write lock for over ${waitedMs} ms; this transaction gave up without writing`,
    );
    this.name = 'ThreadLockTimeout';
  }
}

export interface ThreadLockOptions {
  blockingWaitMs?: number;
  giveUpMs?: number;
}

export class ThreadLock {
  /** [0]: the next ticket to hand out; [1]: the ticket now served. */
  private readonly cells: Int32Array;
  /** For ticket t, slot t mod SLOTS: entry(t, who waits for or holds it | ABANDONED). */
  private readonly slots: BigInt64Array;
  private readonly blockingWaitMs: number;
  private readonly giveUpMs: number;
  /** This connection's ticket given up on, which its next acquire takes back if still in line. */
  private abandoned: number | null = null;

  constructor(
    readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(THREAD_LOCK_BYTES),
    options: ThreadLockOptions = {},
  ) {
    if (buffer.byteLength < THREAD_LOCK_BYTES) {
      throw new RangeError(`a thread lock needs ${THREAD_LOCK_BYTES} bytes, not ${buffer.byteLength}`);
    }
    this.cells = new Int32Array(buffer, 0, 2);
    this.slots = new BigInt64Array(buffer, 8, SLOTS);
    this.blockingWaitMs = options.blockingWaitMs ?? BLOCKING_WAIT_MS;
    this.giveUpMs = options.giveUpMs ?? GIVE_UP_MS;
  }

  private slot(ticket: number): number {
    return ticket & (SLOTS - 1);
  }

  /** Marks `ticket`'s slot `to` if it is still `from`; true if it was. */
  private swap(ticket: number, from: number, to: number): boolean {
    const expected = entry(ticket, from);
    return Atomics.compareExchange(this.slots, this.slot(ticket), expected, entry(ticket, to)) === expected;
  }

  /** Resolves once this thread holds the lock; throws ThreadLockTimeout after giveUpMs instead. */
  async acquire(): Promise<void> {
    const ticket = this.ticket();
    const started = Date.now();
    for (;;) {
      const serving = Atomics.load(this.cells, 1);
      if (serving === ticket) return;
      const waited = Date.now() - started;
      const left = this.giveUpMs - waited;
      if (left <= 0) return this.giveUp(ticket, waited);
      if (waited < this.blockingWaitMs) {
        Atomics.wait(this.cells, 1, serving, this.blockingWaitMs - waited);
        continue;
      }
      const wait = waitAsync(this.cells, 1, serving, left);
      if (wait.async) await wait.value;
    }
  }

  /** Its ticket given up on earlier, if the turn has not passed over it yet; else a new one. */
  private ticket(): number {
    const earlier = this.abandoned;
    this.abandoned = null;
    if (earlier !== null && this.swap(earlier, ABANDONED, ME)) return earlier;
    const ticket = Atomics.add(this.cells, 0, 1);
    Atomics.store(this.slots, this.slot(ticket), entry(ticket, ME));
    return ticket;
  }

  private giveUp(ticket: number, waited: number): void {
    this.swap(ticket, ME, ABANDONED);
    // The turn may have come just now, from a release that looked at the slot before it was marked
    // and so stopped here. Whichever of the two takes the mark back acts on it: a release passes the
    // turn on; this waiter, taking it back, holds the lock after all.
    if (Atomics.load(this.cells, 1) === ticket && this.swap(ticket, ABANDONED, ME)) return;
    this.abandoned = ticket;
    throw new ThreadLockTimeout(waited);
  }

  release(): void {
    const ticket = Atomics.load(this.cells, 1);
    Atomics.store(this.slots, this.slot(ticket), 0n);
    this.serve((ticket + 1) | 0);
  }

  /** Serves `ticket`, and past it every ticket given up on, until one that is still wanted. */
  private serve(ticket: number): void {
    let next = ticket;
    for (;;) {
      Atomics.store(this.cells, 1, next);
      if (!this.swap(next, ABANDONED, 0)) break;
      next = (next + 1) | 0;
    }
    Atomics.notify(this.cells, 1);
  }

  /**
   * Frees what thread `id` held or waited for, once it has ended: nothing else can, and otherwise the
   * lock stays held, and every waiter gives up, for the rest of the process's life. Call it only
   * for a thread that has ended. (A thread ended between drawing its ticket and marking it cannot be
   * recognised; that window is two instructions wide.)
   */
  releaseThread(id: number): void {
    const theirs = id + 1;
    for (let i = 0; i < SLOTS; i++) {
      const value = Atomics.load(this.slots, i);
      if (Number(BigInt.asIntN(32, value)) !== theirs) continue;
      const ticket = Number(BigInt.asIntN(32, value >> 32n));
      this.swap(ticket, theirs, ABANDONED);
    }
    // If the turn is one of theirs (they held the lock), pass it on, unless a release already is.
    const serving = Atomics.load(this.cells, 1);
    if (this.swap(serving, ABANDONED, 0)) this.serve((serving + 1) | 0);
  }

  /** The id of the thread that holds the lock, or null when it is free (for diagnostics and tests). */
  holder(): number | null {
    const serving = Atomics.load(this.cells, 1);
    const value = Atomics.load(this.slots, this.slot(serving));
    if (Number(BigInt.asIntN(32, value >> 32n)) !== serving) return null;
    const state = Number(BigInt.asIntN(32, value));
    return state > 0 ? state - 1 : null;
  }
}
