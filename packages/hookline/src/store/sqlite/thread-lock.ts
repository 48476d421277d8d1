// A fair write lock shared by the threads of one process that open the same SQLite file (the API and
// the delivery thread of `hookline serve`). SQLite's own lock, when taken, makes the other connection
// sleep in its busy handler (1, 2, 5 … 100 ms, and it can miss the moment the lock frees again), and
// better-sqlite3 waits synchronously, so an emit could stall the API's event loop behind delivery work.
// Taking this ticket lock first, waiting asynchronously, the threads take turns in arrival order and
// SQLite's lock is never contended between them.

/** After this long the holder is presumed dead (a thread ended mid-transaction) and the lock is taken. */
const STALE_MS = 5000;

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

  constructor(readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(8)) {
    this.cells = new Int32Array(buffer);
  }

  async acquire(): Promise<void> {
    const ticket = Atomics.add(this.cells, 0, 1);
    const started = Date.now();
    for (;;) {
      const serving = Atomics.load(this.cells, 1);
      if (serving === ticket) return;
      const left = STALE_MS - (Date.now() - started);
      if (left <= 0) {
        Atomics.store(this.cells, 1, ticket);
        return;
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
