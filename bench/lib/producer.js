// The identity product, in its own process: `connections` pg connections to hookline's database, each
// in a closed loop of sign-ups — BEGIN; INSERT a user into the product's own table; emitWithin
// user.created (the built package's producer, docs/producers.md); COMMIT — until `total` have
// committed. Answers the committed transactions per second after the first `warmup` commits, and
// the latencies of the emitWithin call (what the emit adds inside the product's transaction) and of
// the whole transaction (and of its COMMIT alone), over the same commits.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createProducer } from '../../packages/hookline/dist/index.js';
import { childOptions, forkRole, isMain, serveRequests } from './processes.js';
import { eventData } from './payload.js';
import { Samples, now, summarize } from './stats.js';

/** Orchestrator side: runs one product process to completion and resolves with its summary. */
export async function produce(options, { onProgress } = {}) {
  // The emitter's young generation (lib/emitter.js), so the two processes measure alike.
  const child = forkRole(import.meta.url, options, { execArgv: ['--max-semi-space-size=64'] });
  if (onProgress) child.onEvent((m) => m.event === 'progress' && onProgress(m));
  try {
    return await child.call('run');
  } finally {
    child.kill('SIGKILL');
  }
}

function main() {
  const {
    connectionString,
    productSchema,
    schema,
    encryptionKey,
    tenant = 'acme',
    connections = 8,
    total,
    warmup = 0,
  } = childOptions();
  const producer = createProducer({ encryptionKey, schema });
  const table = `${productSchema}.users`;
  // Ids unique to this run, so the product's primary key never refuses a sign-up.
  const run = randomBytes(4).toString('hex');

  async function runAll() {
    const clients = [];
    try {
      for (let i = 0; i < connections; i++) {
        const client = new pg.Client({ connectionString });
        clients.push(client);
        await client.connect();
      }
      await clients[0].query(
        `CREATE TABLE IF NOT EXISTS ${table} (id text PRIMARY KEY, tenant_id text NOT NULL, email text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`,
      );
      const emitLatencies = new Samples();
      const txLatencies = new Samples();
      const commitLatencies = new Samples();
      let next = 0;
      let committed = 0;
      let warmupDoneAt = null;
      let lastCommit = 0;
      const start = now();
      const progress = setInterval(() => process.send({ event: 'progress', committed }), 1000);
      const loop = async (client) => {
        while (next < total) {
          const seq = next++;
          const userId = `user_${run}${seq}`;
          const t0 = now();
          await client.query('BEGIN');
          try {
            await client.query(`INSERT INTO ${table} (id, tenant_id, email) VALUES ($1, $2, $3)`, [
              userId,
              tenant,
              `${userId}@example.com`,
            ]);
            const t1 = now();
            // ~1 KiB with `sentAt`, like the HTTP emitter's events, so the subscriber can time them.
            await producer.emitWithin(client, {
              tenantId: tenant,
              type: 'user.created',
              data: { ...eventData(seq, t1), userId },
            });
            const t2 = now();
            await client.query('COMMIT');
            const t3 = now();
            committed++;
            lastCommit = t3;
            if (committed === warmup) warmupDoneAt = t3;
            if (committed > warmup) {
              emitLatencies.push(t2 - t1);
              txLatencies.push(t3 - t0);
              commitLatencies.push(t3 - t2);
            }
          } catch (err) {
            await client.query('ROLLBACK').catch(() => {});
            throw err;
          }
        }
      };
      await Promise.all(clients.map(loop));
      clearInterval(progress);
      const from = warmup > 0 ? warmupDoneAt : start;
      const counted = committed - Math.min(committed, warmup);
      const emitWithin = summarize(emitLatencies.view());
      const transaction = summarize(txLatencies.view());
      const commit = summarize(commitLatencies.view());
      return {
        committed,
        counted,
        rate: counted > 0 ? (counted / (lastCommit - from)) * 1000 : NaN,
        emitP50: emitWithin.p50,
        emitP99: emitWithin.p99,
        txP50: transaction.p50,
        txP99: transaction.p99,
        commitP50: commit.p50,
        commitP99: commit.p99,
      };
    } finally {
      await Promise.all(clients.map((c) => c.end().catch(() => {})));
    }
  }

  serveRequests({ run: runAll });
}

if (isMain(import.meta.url)) main();
