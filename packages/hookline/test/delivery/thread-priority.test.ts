// The delivery thread's lower CPU priority (delivery/thread-priority.ts): it applies to the calling
// thread alone, never to the process's other threads, and never lowers a nice value already higher.
// A thread cannot load the TypeScript sources, so the threads here run the compiled module, as
// `hookline serve` does.
import { getPriority } from 'node:os';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { DELIVERY_THREAD_NICE } from '../../dist/delivery/thread-priority.js';

const MODULE = new URL('../../dist/delivery/thread-priority.js', import.meta.url).href;

interface Lowered {
  tid: number;
  results: (number | null)[];
}

/** A thread that lowers its own priority to each of `steps` in turn, reports, and waits to be ended. */
function threadLowering(steps: number[]): { worker: Worker; report: Promise<Lowered> } {
  const code = `
    const { parentPort, workerData } = require('node:worker_threads');
    const { readlinkSync } = require('node:fs');
    import(workerData.module).then(({ lowerThreadPriority }) => {
      const results = workerData.steps.map((n) => lowerThreadPriority(n));
      const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
      parentPort.postMessage({ tid, results });
    });
    setInterval(() => {}, 1000);
  `;
  const worker = new Worker(code, { eval: true, workerData: { module: MODULE, steps } });
  const report = new Promise<Lowered>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  return { worker, report };
}

describe.skipIf(process.platform !== 'linux')('lowerThreadPriority', () => {
  const workers: Worker[] = [];
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.terminate()));
  });

  // A new thread starts at its creator's nice value, which the test runner may have raised already:
  // the expected values start from it.
  it('lowers the calling thread alone', async () => {
    const mainBefore = getPriority();
    const expected = Math.max(mainBefore, DELIVERY_THREAD_NICE);
    const { worker, report } = threadLowering([DELIVERY_THREAD_NICE]);
    workers.push(worker);
    const { tid, results } = await report;
    expect(tid).not.toBe(process.pid);
    expect(results).toEqual([expected]);
    expect(getPriority(tid)).toBe(expected);
    expect(getPriority()).toBe(mainBefore);
  });

  it('never lowers a nice value that is already higher', async () => {
    const expected = Math.max(getPriority(), 15);
    const { worker, report } = threadLowering([15, DELIVERY_THREAD_NICE]);
    workers.push(worker);
    const { tid, results } = await report;
    expect(results).toEqual([expected, expected]);
    expect(getPriority(tid)).toBe(expected);
  });
});
