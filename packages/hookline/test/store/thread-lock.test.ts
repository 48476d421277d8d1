// The write lock the threads of `hookline serve` share (store/sqlite/thread-lock.ts), with real second
// threads holding it and a real SQLite file. Both sides run the built code (dist/), as a worker
// thread cannot load the TypeScript sources.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SqliteDb } from '../../dist/store/sqlite/sqlite-db.js';
import { THREAD_LOCK_BYTES, ThreadLock, ThreadLockTimeout } from '../../dist/store/sqlite/thread-lock.js';

const LOCK_MODULE = new URL('../../dist/store/sqlite/thread-lock.js', import.meta.url).href;
const SQLITE_MODULE = new URL('../../dist/store/sqlite/sqlite-db.js', import.meta.url).href;

/** The lock's two counters: [0] the next ticket, [1] the ticket served. */
const counters = (lock: ThreadLock) => new Int32Array(lock.buffer, 0, 2);

function startThread(code: string, workerData: Record<string, unknown>): Worker {
  return new Worker(`const { parentPort, workerData } = require('node:worker_threads');\n${code}`, {
    eval: true,
    workerData,
  });
}

/** The next message from `worker` (its failure or exit before one fails the test). */
function nextMessage(worker: Worker): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number) => reject(new Error(`thread exited (${code}) before saying anything`));
    worker.once('message', (m) => {
      worker.off('exit', onExit);
      resolve(m);
    });
    worker.once('exit', onExit);
  });
}

/**
 * A thread that takes the lock, says so, and releases it `holdMs` after another ticket is drawn:
 * only once the waiter has started waiting.
 */
async function blockingHolder(buffer: SharedArrayBuffer, holdMs: number): Promise<Worker> {
  const worker = startThread(
    `(async () => {
       const { ThreadLock } = await import(workerData.module);
       const lock = new ThreadLock(workerData.buffer);
       const cells = new Int32Array(workerData.buffer, 0, 2);
       await lock.acquire();
       parentPort.postMessage('holding');
       while (Atomics.load(cells, 0) === 1) {}
       const until = Date.now() + workerData.holdMs;
       while (Date.now() < until) {}
       lock.release();
     })();`,
    { module: LOCK_MODULE, buffer, holdMs },
  );
  expect(await nextMessage(worker)).toBe('holding');
  return worker;
}

describe('ThreadLock', () => {
  it('a waiter takes its turn the moment the other thread releases, not when its event loop next runs', async () => {
    const lock = new ThreadLock(undefined, { blockingWaitMs: 10_000 });
    const worker = await blockingHolder(lock.buffer, 5);
    const acquired = lock.acquire();
    // Before this thread's event loop has run again, the lock is already this thread's: it waited
    // blocked, and no turn stood idle while announced to a busy loop.
    expect(Atomics.load(counters(lock), 1)).toBe(1);
    await acquired;
    lock.release();
    await worker.terminate();
  });

  it('a wait longer than the blocking budget goes on with the event loop free', async () => {
    const lock = new ThreadLock(undefined, { blockingWaitMs: 5 });
    // Held by this thread itself: only a wait that lets the event loop run can ever get the turn.
    await lock.acquire();
    let releasedByTimer = false;
    setTimeout(() => {
      releasedByTimer = true;
      lock.release();
    }, 30);
    await lock.acquire();
    expect(releasedByTimer).toBe(true);
    lock.release();
    expect(Atomics.load(counters(lock), 1)).toBe(2);
    expect(lock.holder()).toBeNull();
  });

  it('a waiter that gives up fails, the holder keeps the lock, and the turn passes over the abandoned ticket', async () => {
    const holder = new ThreadLock(undefined, { blockingWaitMs: 1 });
    const waiter = new ThreadLock(holder.buffer, { blockingWaitMs: 1, giveUpMs: 50 });
    const third = new ThreadLock(holder.buffer, { blockingWaitMs: 1 });
    await holder.acquire();
    for (let i = 0; i < 5; i++) await expect(waiter.acquire()).rejects.toBeInstanceOf(ThreadLockTimeout);
    expect(holder.holder()).toBe(0); // the main thread still holds it
    // Each try after the first took its earlier ticket back: one place in the line, not five.
    expect(Atomics.load(counters(holder), 0)).toBe(2);
    const order: string[] = [];
    const thirdTurn = third.acquire().then(() => order.push('third'));
    // The waiter tries again, and its turn comes before the third's: it kept its place.
    const waiterTurn = waiter.acquire().then(() => {
      order.push('waiter');
      waiter.release();
    });
    holder.release();
    await waiterTurn;
    await thirdTurn;
    third.release();
    expect(order).toEqual(['waiter', 'third']);
    expect(holder.holder()).toBeNull();
  });

  it('a ticket given up on is passed over when its turn comes, and the lock is free after', async () => {
    const holder = new ThreadLock(undefined, { blockingWaitMs: 1 });
    const waiter = new ThreadLock(holder.buffer, { blockingWaitMs: 1, giveUpMs: 30 });
    await holder.acquire();
    await expect(waiter.acquire()).rejects.toThrow(/held the SQLite write lock for over \d+ ms/);
    holder.release();
    expect(holder.holder()).toBeNull();
    // Ticket 1 was abandoned: the release served 2, the next ticket drawn, at once.
    expect(Atomics.load(counters(holder), 1)).toBe(2);
    const other = new ThreadLock(holder.buffer, { giveUpMs: 1000 });
    await other.acquire();
    other.release();
  });

  it('refuses a buffer too small for its slots', () => {
    expect(() => new ThreadLock(new SharedArrayBuffer(8))).toThrow(RangeError);
    expect(THREAD_LOCK_BYTES).toBeGreaterThan(8);
  });
});

describe('ThreadLock between two threads writing one SQLite file', () => {
  let dir: string;
  let file: string;
  let db: SqliteDb;
  let worker: Worker | null = null;
  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'hookline-thread-lock-'));
    file = path.join(dir, 'x.db');
    db = new SqliteDb(file);
    await db.run('CREATE TABLE t (who TEXT NOT NULL)');
  });
  afterEach(async () => {
    await worker?.terminate();
    worker = null;
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * A thread with its own connection to the file and `db`'s lock, whose transaction writes a row,
   * says 'holding', and then waits for a message to write a second row and commit; or, with `die`,
   * ends with an uncaught error while still inside the transaction.
   */
  async function holdingThread(die: boolean): Promise<Worker> {
    const thread = startThread(
      `(async () => {
         const { SqliteDb } = await import(workerData.module);
         const db = new SqliteDb(workerData.file, { threadLock: workerData.buffer });
         const finish = new Promise((resolve) => parentPort.once('message', resolve));
         await db.transaction(async (tx) => {
           await tx.run("INSERT INTO t (who) VALUES ('holder')");
           parentPort.postMessage('holding');
           if (workerData.die) setTimeout(() => { throw new Error('the holder dies'); }, 10);
           await finish;
           await tx.run("INSERT INTO t (who) VALUES ('holder, later')");
         });
         parentPort.postMessage('committed');
         await db.close();
       })();`,
      { module: SQLITE_MODULE, file, buffer: db.threadLock.buffer, die },
    );
    thread.on('error', () => {}); // the dying holder's error is the point of that test
    expect(await nextMessage(thread)).toBe('holding');
    return thread;
  }

  it('a holder slower than the waiter’s limit keeps the lock: the waiter’s transaction fails, the holder’s commits', async () => {
    worker = await holdingThread(false);
    expect(db.threadLock.holder()).toBe(worker.threadId);
    await expect(
      db.transaction((tx) => tx.run("INSERT INTO t (who) VALUES ('waiter')")),
    ).rejects.toBeInstanceOf(ThreadLockTimeout);
    // Gave up, and did not take the lock: the other thread's transaction is still the only one.
    expect(db.threadLock.holder()).toBe(worker.threadId);
    const committed = nextMessage(worker);
    worker.postMessage('finish');
    expect(await committed).toBe('committed');
    expect(db.threadLock.holder()).toBeNull();
    expect(await db.all('SELECT who FROM t ORDER BY rowid')).toEqual([
      { who: 'holder' },
      { who: 'holder, later' },
    ]);
    // And free: this thread's next transaction goes through.
    await db.transaction((tx) => tx.run("INSERT INTO t (who) VALUES ('waiter, again')"));
    expect(await db.all('SELECT who FROM t ORDER BY rowid')).toHaveLength(3);
  }, 60_000);

  it('a holder that dies keeps the lock until the thread that saw it end releases it for it', async () => {
    worker = await holdingThread(true);
    const deadId = worker.threadId;
    await new Promise((resolve) => worker!.once('exit', resolve));
    // Nothing releases it by itself: a waiter gives up as behind any holder.
    const impatient = new ThreadLock(db.threadLock.buffer, { blockingWaitMs: 1, giveUpMs: 50 });
    await expect(impatient.acquire()).rejects.toBeInstanceOf(ThreadLockTimeout);
    expect(db.threadLock.holder()).toBe(deadId);
    db.threadLock.releaseThread(deadId);
    expect(db.threadLock.holder()).toBeNull();
    // The dead thread's connection was closed with it, so SQLite's own lock is free too, and its
    // transaction was rolled back.
    await db.transaction((tx) => tx.run("INSERT INTO t (who) VALUES ('after')"));
    expect(await db.all('SELECT who FROM t')).toEqual([{ who: 'after' }]);
  }, 60_000);
});
