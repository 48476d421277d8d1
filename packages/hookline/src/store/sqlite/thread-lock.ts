// A fair write lock shared by the threads of one process that open the same SQLite file (the API and
// the delivery thread of `hookline serve`). SQLite's own lock, when taken, makes the other connection
// sleep in its busy handler (1, 2, 5 … 100 ms, and it can miss the moment the lock frees again), and
// better-sqlite3 waits synchronously, so an emit could stall the API's event loop behind delivery work.
// Taking this ticket lock first, the threads take turns in arrival order and SQLite's lock is never
// contended between them.
//
// A thread waits for its turn blocked, not on its event loop: the other thread's transactions last
// a fraction of a millisecond, and a turn announced to a busy event loop was taken only after the
// loop's current work, 4-10 ms later, while the lock stood idle and the other thread queued behind
// it (bench/RESULTS.md, "Session of run R"). Only a wait that outlasts BLOCKING_WAIT_MS goes on with
// the event loop free.

/** After this long the holder is presumed dead (a thread ended mid-transaction) and the lock is taken. */
const STALE_MS = 5000;

/** How long a thread blocks for its turn before it waits with its event loop free instead. */
const BLOCKING_WAIT_MS = 20;

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

export class ThreadLock {
  /** [0]: the next ticket to hand out; [1]: the ticket now served. */
  private readonly cells: Int32Array;

  constructor(
    readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(8),
    private readonly blockingWaitMs = BLOCKING_WAIT_MS,
  ) {
    this.cells = new Int32Array(buffer);
  }

  async acquire(): Promise<void> {
    const ticket = Atomics.add(this.cells, 0, 1);
    const started = Date.now();
    for (;;) {
      const serving = Atomics.load(this.cells, 1);
      if (serving === ticket) return;
      const waited = Date.now() - started;
      const left = STALE_MS - waited;
      if (left <= 0) {
        Atomics.store(this.cells, 1, ticket);
        return;
      }
      if (waited < this.blockingWaitMs) {
        Atomics.wait(this.cells, 1, serving, this.blockingWaitMs - waited);
        continue;
      }
      const wait = waitAsync(this.cells, 1, serving, left);
      if (wait.async) await wait.value;
    }
  }

  release(): void {
    Atomics.add(this.cells, 1, 1);
    Atomics.notify(this.cells, 1);
  }
}
