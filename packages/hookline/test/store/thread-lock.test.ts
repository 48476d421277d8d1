// The write lock the threads of `hookline serve` share (store/sqlite/thread-lock.ts), with a real
// second thread holding it.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ThreadLock } from '../../src/store/sqlite/thread-lock.js';

/**
 * A thread that takes the lock, says so, and releases it `holdMs` after another ticket is taken:
 * only once the waiter has started waiting.
 */
function holder(buffer: SharedArrayBuffer, holdMs: number): Promise<Worker> {
  const worker = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads');
     const cells = new Int32Array(workerData.buffer);
     const ticket = Atomics.add(cells, 0, 1);
     while (Atomics.load(cells, 1) !== ticket) Atomics.wait(cells, 1, Atomics.load(cells, 1), 10);
     parentPort.postMessage('holding');
     while (Atomics.load(cells, 0) === ticket + 1) {}
     const until = Date.now() + workerData.holdMs;
     while (Date.now() < until) {}
     Atomics.add(cells, 1, 1);
     Atomics.notify(cells, 1);`,
    { eval: true, workerData: { buffer, holdMs } },
  );
  return new Promise((resolve, reject) => {
    worker.once('message', () => resolve(worker));
    worker.once('error', reject);
  });
}

describe('ThreadLock', () => {
  it('a waiter takes its turn the moment the other thread releases, not when its event loop next runs', async () => {
    const lock = new ThreadLock(new SharedArrayBuffer(8), 10_000);
    const worker = await holder(lock.buffer, 5);
    const acquired = lock.acquire();
    // Before this thread's event loop has run again, the lock is already this thread's: it waited
    // blocked, and no turn stood idle while announced to a busy loop.
    expect(Atomics.load(new Int32Array(lock.buffer), 1)).toBe(1);
    await acquired;
    lock.release();
    await worker.terminate();
  });

  it('a wait longer than the blocking budget goes on with the event loop free', async () => {
    const lock = new ThreadLock(new SharedArrayBuffer(8), 5);
    // Held by this thread itself: only a wait that lets the event loop run can ever get the turn.
    await lock.acquire();
    let releasedByTimer = false;
    setTimeout(() => {
      releasedByTimer = true;
      lock.release();
    }, 30);
    await lock.acquire();
    // The turn came from the release (the timer ran), not from taking over a lock presumed stale.
    expect(releasedByTimer).toBe(true);
    lock.release();
    expect(Atomics.load(new Int32Array(lock.buffer), 1)).toBe(2);
  });
});
