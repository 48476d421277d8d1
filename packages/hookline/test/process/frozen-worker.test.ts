// A worker frozen (SIGSTOP) in the middle of a transaction must not stall the fleet: the server ends
// its session after idle_in_transaction_session_timeout, which releases the queue row it locked, and
// the other worker reaps the frozen one's leases and delivers them within HOOKLINE_DELIVERY_TIMEOUT_MS
// + 30 s (docs/contract.md §6), while the frozen one is still stopped. After SIGCONT it carries on,
// and nothing acknowledged is lost.
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { startEventStream, tally } from '../helpers/event-stream.js';
import { eventually, startReceiver } from '../helpers/receiver.js';
import { createApiKeys, postJson, startProcess, type RunningProcess } from '../helpers/process.js';
import { testEnv } from '../helpers/service.js';
import { STORE_KINDS, createTestDatabase } from '../helpers/stores.js';

const DELIVERY_TIMEOUT_MS = 1000;

/** Local TCP ports of a process's sockets (Linux /proc): tells which receiver connections are B's. */
function localPorts(pid: number): Set<number> {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m?.[1]) inodes.add(m[1]);
    } catch {
      // closed meanwhile
    }
  }
  const ports = new Set<number>();
  for (const table of ['tcp', 'tcp6']) {
    // sl local_address rem_address st queues tr retrnsmt uid timeout inode …
    for (const line of readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f[9] && inodes.has(f[9])) ports.add(parseInt(f[1]!.split(':')[1]!, 16));
    }
  }
  return ports;
}
/** docs/contract.md §6: a lease expires at most this long after the claim. */
const BOUND_MS = DELIVERY_TIMEOUT_MS + 30_000;

describe.runIf(STORE_KINDS.includes('postgres') && process.platform === 'linux')(
  'a frozen worker on PostgreSQL',
  () => {
    const cleanup: (() => Promise<unknown>)[] = [];
    afterEach(async () => {
      for (const fn of cleanup.splice(0).reverse()) await fn().catch(() => {});
    });

    it('does not stop the other worker from taking over its leases', async () => {
      const database = await createTestDatabase('postgres');
      cleanup.push(() => database.drop());
      const env = testEnv(database, {
        HOOKLINE_DELIVERY_TIMEOUT_MS: String(DELIVERY_TIMEOUT_MS),
        HOOKLINE_MAX_RETRIES: '20',
      });
      const { tenantKey, producerKey } = await createApiKeys(env);
      // A little latency, so each worker always has attempts in flight.
      const receiver = await startReceiver(() => ({ status: 200, delayMs: 200 }));
      cleanup.push(() => receiver.close());

      const api: RunningProcess = await startProcess(['serve', '--no-worker'], env);
      cleanup.push(() => api.kill());
      const post = (path: string, key: string, body: unknown) => postJson(api.address, path, key, body);
      // One endpoint: its one queue row is what every claim, outcome and reap of the fleet locks.
      expect((await post('/v1/webhooks', tenantKey, { url: receiver.url, events: ['*'] })).status).toBe(201);

      // PGAPPNAME names B's sessions, so the test can see when B is inside a transaction.
      const b = await startProcess(['worker'], { ...env, PGAPPNAME: 'hookline-frozen-b' });
      const c = await startProcess(['worker'], env);
      cleanup.push(() => c.kill('SIGKILL'));
      cleanup.push(() => b.kill('SIGKILL'));
      cleanup.push(async () => b.child.kill('SIGCONT'));

      const stream = startEventStream(() => api.address, producerKey);
      cleanup.push(() => stream.stop());
      const accepted = stream.accepted;
      await receiver.waitFor(100, 30_000);

      const db = database.open();
      cleanup.push(() => db.close());
      // Stop B at a moment its session sits inside a transaction holding the queue row's lock; if the
      // moment passed before the signal landed, let it go and try again.
      const holdsQueueLock = async () =>
        (
          await db.all(
            `SELECT a.pid FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid JOIN pg_class c ON c.oid = l.relation
           JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE a.application_name = 'hookline-frozen-b' AND a.state = 'idle in transaction'
             AND n.nspname = $1 AND c.relname = 'endpoint_queues'
             AND l.mode IN ('RowShareLock', 'RowExclusiveLock') AND l.granted`,
            [database.schema],
          )
        ).length > 0;
      // B's attempts in flight: requests that came over B's connections whose deliveries are still leased.
      const leasedByB = async () => {
        const ports = localPorts(b.child.pid!);
        const hookIds = receiver.requests
          .filter((r) => ports.has(r.remotePort))
          .map((r) => String(r.headers['hook-id']));
        return db.all<{ id: string }>(
          `SELECT id FROM deliveries WHERE status = 'delivering'
         AND message_id IN (SELECT jsonb_array_elements_text($1::jsonb))`,
          [JSON.stringify(hookIds)],
        );
      };
      let frozenAt = 0;
      let leased: { id: string }[] = [];
      const giveUpAt = Date.now() + 60_000;
      while (frozenAt === 0) {
        expect(Date.now(), 'B never caught inside a transaction with attempts in flight').toBeLessThan(
          giveUpAt,
        );
        const inTransaction = await db.all(
          `SELECT pid FROM pg_stat_activity WHERE application_name = 'hookline-frozen-b' AND state = 'idle in transaction'`,
        );
        if (inTransaction.length === 0) continue;
        b.child.kill('SIGSTOP');
        await new Promise((r) => setTimeout(r, 20));
        if (await holdsQueueLock()) leased = await leasedByB();
        if (leased.length > 0) frozenAt = Date.now();
        else b.child.kill('SIGCONT');
      }

      // While B stays stopped, C makes B's attempts again within the bound, and delivers events emitted
      // after the freeze too.
      const taken = await eventually(async () => {
        const rows = await db.all<{ status: string; attempts: number }>(
          `SELECT status, attempts FROM deliveries WHERE id IN (SELECT jsonb_array_elements_text($1::jsonb))`,
          [JSON.stringify(leased.map((r) => r.id))],
        );
        return rows.every((r) => r.status === 'succeeded') ? rows : undefined;
      }, BOUND_MS);
      const takeOverMs = Date.now() - frozenAt;
      const emittedAfter = new Set(accepted.filter((a) => a.at > frozenAt).map((a) => a.id));
      await eventually(() => receiver.requests.some((r) => emittedAfter.has(String(r.headers['hook-id']))));
      expect(b.child.signalCode).toBeNull(); // stopped, not dead
      const stillFrozen = await db.one<{ n: number }>(
        `SELECT COUNT(*) AS n FROM pg_stat_activity WHERE application_name = 'hookline-frozen-b' AND state = 'idle in transaction'`,
      );
      expect(Number(stillFrozen?.n)).toBe(0); // the server ended B's stalled session
      // Each was attempted again (by C: B is stopped) after its lease was reaped.
      expect(taken.every((r) => Number(r.attempts) >= 2)).toBe(true);

      // SIGCONT: B discards its dead session and works on; nothing acknowledged is lost.
      b.child.kill('SIGCONT');
      const beforeResume = receiver.requests.length;
      await new Promise((r) => setTimeout(r, 2000));
      // B survived the end of its session (the driver reports it as an 'error' event on the connection).
      expect(b.child.exitCode, b.output().slice(-3000)).toBeNull();
      await stream.stop();
      await eventually(async () => {
        const row = await db.one<{ n: number }>(
          `SELECT COUNT(*) AS n FROM deliveries WHERE status <> 'succeeded'`,
        );
        const total = await db.one<{ n: number }>('SELECT COUNT(*) AS n FROM deliveries');
        return Number(row?.n) === 0 && Number(total?.n) === accepted.length;
      }, 60_000);
      const counts = tally(accepted, receiver.requests);
      console.log(
        `frozen worker: ${counts.summary} leased-by-frozen-worker=${leased.length} ` +
          `take-over-ms=${takeOverMs}`,
      );
      expect(counts.lost).toBe(0);
      expect(counts.duplicated).toBe(0);
      expect(receiver.requests.length).toBeGreaterThan(beforeResume);
      expect((await fetch(`${b.address}/readyz`)).status).toBe(200);
    }, 150_000);
  },
);
