// Copies SQLite's write-ahead log back into the database from a thread of its own (docs/architecture.md,
// "SQLite checkpoints"). Left to SQLite, the commit that crosses its threshold (1,000 pages)
// checkpoints inside itself: every few hundred commits one took 6–13 ms instead of ~0.1 ms, syncing
// the database file while the writer's event loop waited, and those few were half of all commit time
// in a drain. Here the long-running processes' connections stop checkpointing, and this thread's own
// connection does a passive checkpoint every CHECKPOINT_INTERVAL_MS: it takes no write lock, so
// writers go on, and a page rewritten many times in between is copied once.
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** How often the log is copied back. */
const CHECKPOINT_INTERVAL_MS = 250;

// The thread's whole program. Given as source (CommonJS, `eval`), so it runs the same from the
// compiled package and from the TypeScript sources under test.
const THREAD = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file);
db.pragma('busy_timeout = 1000');
const timer = setInterval(() => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } catch {
    // Busy (another checkpoint, or a writer changing the log's header): the next tick tries again.
  }
}, workerData.intervalMs);
parentPort.on('message', () => {
  clearInterval(timer);
  db.close();
  parentPort.close();
});
parentPort.postMessage('ready');
`;

export class SqliteCheckpointer {
  private readonly exited: Promise<void>;

  private constructor(private readonly worker: Worker) {
    this.exited = new Promise((resolve) => worker.once('exit', () => resolve()));
  }

  /** Starts checkpointing `file`; resolves once the thread has opened it. */
  static async start(file: string): Promise<SqliteCheckpointer> {
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    const worker = new Worker(THREAD, {
      eval: true,
      workerData: { file, driver, intervalMs: CHECKPOINT_INTERVAL_MS },
    });
    await new Promise<void>((resolve, reject) => {
      worker.once('message', () => resolve());
      worker.once('error', reject);
      worker.once('exit', (code) => reject(new Error(`checkpointer thread exited (${code})`)));
    });
    return new SqliteCheckpointer(worker);
  }

  /** Stops after the checkpoint under way, if any. */
  async stop(): Promise<void> {
    this.worker.postMessage('stop');
    await this.exited;
  }
}
