// The sender thread, started ahead of the worker that will use it (docs/architecture.md, "Sending").
// `hookline worker` spawns it first thing; the worker's SenderThread adopts it and gives it its
// options. Nothing else is imported here (database-url.ts imports nothing): the main thread would
// load it before the thread started.
import { Worker } from 'node:worker_threads';
import { isPostgresUrl } from '../database-url.js';

let booted: Worker | null = null;

/**
 * Whether a worker on this database sends from a thread of its own. On SQLite its main thread runs
 * the SQL itself, and the HTTP work is better off elsewhere; on PostgreSQL the SQL runs in the server,
 * the main thread has room for the HTTP work, and each hop to and from a thread costs latency: there
 * drains ran 5-7 % faster without it (docs/architecture.md, "Sending"). `databaseUrl` as
 * HOOKLINE_DATABASE_URL gives it: unset or `sqlite:` is SQLite.
 */
export function sendsFromThread(databaseUrl: string | undefined): boolean {
  return !isPostgresUrl(databaseUrl?.trim() ?? '');
}

/** Spawns a sender thread that waits for its options; the next SenderThread to start adopts it. */
export function bootSenderThread(): void {
  if (booted) return;
  const worker = new Worker(new URL('./sender-thread.js', import.meta.url), {
    workerData: { hooklineSender: true },
  });
  // Until adopted, it must not keep the process alive (a command that fails earlier still exits), and
  // a thread that fails to start is simply not adopted: its SenderThread then starts its own.
  worker.unref();
  worker.on('error', () => {});
  worker.once('exit', () => {
    if (booted === worker) booted = null;
  });
  booted = worker;
}

/** The thread bootSenderThread started and that is still running, once; otherwise null. */
export function takeBootedSenderThread(): Worker | null {
  const worker = booted;
  booted = null;
  worker?.ref();
  return worker;
}
