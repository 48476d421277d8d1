// An emit whose PostgreSQL connection is lost mid-way (events/emit.ts). A group of emits of known
// tenants without Idempotency-Keys is one insert, run without a transaction; any other group is a
// transaction. Either may have committed when the connection drops (before the server saw the
// statement, or after it committed it): each emit is written exactly once all the same, and the
// client gets its 202 as if nothing had happened.
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { PgDb } from '../../src/store/postgres/pg-db.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { PG_URL, STORE_KINDS } from '../helpers/stores.js';

/**
 * A TCP relay to PostgreSQL that can lose the next statement a connection sends with `marker` in it
 * (before the server sees it) or the server's answer to it (after the server has run it), closing
 * that connection as a network failure would. Everything else, and new connections, pass untouched.
 */
async function startRelay() {
  const target = new URL(PG_URL);
  let mode: 'pass' | 'lose-query' | 'lose-answer' = 'pass';
  let marker = '';
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    let doomed = false;
    const kill = () => {
      client.destroy();
      upstream.destroy();
    };
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => {
        sockets.delete(s);
        kill();
      });
    }
    client.on('data', (d: Buffer) => {
      const marked = mode !== 'pass' && d.includes(marker);
      if (marked && mode === 'lose-query') {
        mode = 'pass';
        return kill();
      }
      if (marked && mode === 'lose-answer') {
        mode = 'pass';
        doomed = true;
      }
      upstream.write(d);
    });
    upstream.on('data', (d) => (doomed ? kill() : client.write(d)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(PG_URL);
  url.host = `127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url: url.toString(),
    arm: (next: 'lose-query' | 'lose-answer', statement: string) => {
      mode = next;
      marker = statement;
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

describe.runIf(STORE_KINDS.includes('postgres'))('an emit whose connection is lost, on PostgreSQL', () => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn().catch(() => {});
  });

  async function setup() {
    const relay = await startRelay();
    cleanup.push(relay.close);
    const t: TestService = await startTestService('postgres', {
      // One connection: the pool cannot route around the one the relay breaks.
      openDb: (database) => new PgDb({ connectionString: relay.url, schema: database.schema!, max: 1 }),
    });
    cleanup.push(() => t.close());
    const emit = (n: number, tenant = 'acme') =>
      t.call('POST', '/v1/events', t.keys.producer, { tenant_id: tenant, type: 'user.updated', data: { n } });
    // The first emit of a tenant runs in a transaction (it creates the tenant); the next ones are
    // single inserts.
    expect((await emit(0)).statusCode).toBe(202);
    const messages = async () =>
      (await t.service.ctx.db.all<{ id: string }>('SELECT id FROM messages ORDER BY id')).map((r) => r.id);
    return { relay, emit, messages };
  }

  for (const [loss, marker, tenant, when] of [
    // A single insert: its message id is in it; other statements (a NOTIFY after an emit) pass.
    ['lose-query', 'msg_', 'acme', 'before the server saw the single insert'],
    ['lose-answer', 'msg_', 'acme', 'after the server committed the single insert'],
    // A transaction (the tenant's first emit creates it): the connection drops at COMMIT.
    ['lose-query', 'COMMIT', 'globex', 'before the server saw the COMMIT'],
    ['lose-answer', 'COMMIT', 'globex', 'after the server committed the transaction'],
  ] as const) {
    it(`answers 202 and writes the event once when the connection drops ${when}`, async () => {
      const { relay, emit, messages } = await setup();
      const before = await messages();
      relay.arm(loss, marker);
      const res = await emit(1, tenant);
      expect(res.statusCode, res.body).toBe(202);
      const after = await messages();
      expect(after).toHaveLength(before.length + 1);
      expect(after).toContain(res.json().id);
    });
  }
});
