// The ceiling: how fast this machine can POST signed ~1 KiB webhooks at the subscriber at all — raw
// undici Pool (64 connections, no pipelining) from its own process, bodies signed up front, no queue
// and no database. Every queue's delivery rate is compared with this.
import { Pool } from 'undici';
import { childOptions, forkRole, isMain, serveRequests } from './processes.js';
import { postAll, signedPosts } from './payload.js';
import { now } from './stats.js';

/** Orchestrator side: `warmup` untimed POSTs, then `total` timed; resolves with {rate, elapsedMs, failed}. */
export async function ceiling({ url, total, warmup = 1000, connections = 64 }) {
  const child = forkRole(import.meta.url, { url, total, warmup, connections });
  try {
    return await child.call('run');
  } finally {
    child.kill('SIGKILL');
  }
}

/**
 * Starts a ceiling run of `total` POSTs without a warm-up of its own (a steady window leaves the
 * start out); answers its `pid` and `done`, a promise of its summary.
 */
export function startCeiling({ url, total, connections = 64 }) {
  const child = forkRole(import.meta.url, { url, total, warmup: 0, connections });
  const done = child.call('run').finally(() => child.kill('SIGKILL'));
  return { pid: child.pid, done };
}

function main() {
  const { url, total, warmup, connections } = childOptions();
  const target = new URL(url);
  serveRequests({
    async run() {
      const requests = signedPosts(target.pathname, warmup + total);
      const pool = new Pool(target.origin, { connections, pipelining: 1 });
      // Untimed warm-up (connections opened, code compiled on both sides), then the timed run.
      let failed = await postAll(pool, requests.slice(0, warmup), connections);
      const start = now();
      failed += await postAll(pool, requests.slice(warmup), connections);
      const elapsedMs = now() - start;
      await pool.close();
      return { rate: (total / elapsedMs) * 1000, elapsedMs, failed };
    },
  });
}

if (isMain(import.meta.url)) main();
