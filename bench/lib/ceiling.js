// The ceiling: how fast this machine can POST signed ~1 KiB webhooks at the subscriber at all — raw
// undici Pool (64 connections, no pipelining) from its own process, bodies signed up front, no queue
// and no database. Every queue's delivery rate is compared with this.
import { Pool } from 'undici';
import { childOptions, forkRole, isMain, serveRequests } from './processes.js';
import { deliveryBody, eventData, newSecret, signedHeaders } from './payload.js';
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

function main() {
  const { url, total, warmup, connections } = childOptions();
  const target = new URL(url);
  const secret = newSecret();
  serveRequests({
    async run() {
      const requests = Array.from({ length: warmup + total }, (_, i) => {
        const body = deliveryBody(eventData(i));
        return {
          path: target.pathname,
          method: 'POST',
          headers: signedHeaders(secret, `msg_${i}`, body),
          body,
        };
      });
      const pool = new Pool(target.origin, { connections, pipelining: 1 });
      let failed = 0;
      const send = async (list) => {
        let next = 0;
        const loop = async () => {
          while (next < list.length) {
            const res = await pool.request(list[next++]);
            await res.body.dump();
            if (res.statusCode >= 300) failed++;
          }
        };
        await Promise.all(Array.from({ length: connections }, loop));
      };
      // Untimed warm-up (connections opened, code compiled on both sides), then the timed run.
      await send(requests.slice(0, warmup));
      const start = now();
      await send(requests.slice(warmup));
      const elapsedMs = now() - start;
      await pool.close();
      return { rate: (total / elapsedMs) * 1000, elapsedMs, failed };
    },
  });
}

if (isMain(import.meta.url)) main();
