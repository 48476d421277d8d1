// A hookline installation in a test schema with a worker and a subscriber, and the identity product's
// own connections beside it (a plain pg client, search_path the product's), for the producer tests.
import pg from 'pg';
import { createProducer, type Producer, type SqlClient } from '../../src/producer/producer.js';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, TEST_ENCRYPTION_KEY, type TestService } from '../helpers/service.js';
import { PG_URL } from '../helpers/stores.js';

export interface ProducerRig {
  t: TestService;
  receiver: Receiver;
  producer: Producer;
  schema: string;
  /** A new connection of the product's (closed with the rig). */
  connect(): Promise<pg.Client>;
  /** Row counts of every hookline table, and the counters. */
  footprint(): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

export interface RigOptions {
  /** The worker's longest idle sleep: long, so that only a notification wakes it. */
  pollIntervalMs?: number;
  /** Endpoint filter of the subscriber. */
  events?: string[];
  /** HOOKLINE_* settings beside the tests' own (helpers/service.ts, testEnv). */
  env?: Record<string, string>;
}

export async function startRig(options: RigOptions = {}): Promise<ProducerRig> {
  const t = await startTestService('postgres', {
    worker: true,
    workerOptions: { pollIntervalMs: options.pollIntervalMs ?? 50 },
    ...(options.env ? { env: options.env } : {}),
  });
  const receiver = await startReceiver(() => ({ status: 204 }));
  const created = await t.call('POST', '/v1/webhooks', t.keys.tenant, {
    url: receiver.url,
    events: options.events ?? ['*'],
  });
  if (created.statusCode !== 201) throw new Error(`endpoint not created: ${created.body}`);
  const schema = t.database.schema!;
  const clients: pg.Client[] = [];
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  clients.push(admin);
  return {
    t,
    receiver,
    schema,
    producer: createProducer({ encryptionKey: TEST_ENCRYPTION_KEY, schema }),
    connect: async () => {
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      // An idle client whose session the server ends would otherwise throw from an event.
      c.on('error', () => {});
      clients.push(c);
      return c;
    },
    footprint: async () => {
      // Once earlier deliveries have ended: their outcomes move the queue rows and the stats.
      await eventually(async () => {
        const open = await admin.query(
          `SELECT (SELECT count(*)::int FROM "${schema}".deliveries WHERE status IN ('pending', 'delivering', 'held'))
             + (SELECT coalesce(sum(in_flight), 0)::int FROM "${schema}".endpoint_queues) AS n`,
        );
        return open.rows[0].n === 0;
      });
      const tables = await admin.query<{ table_name: string }>(
        `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`,
        [schema],
      );
      const counts: Record<string, unknown> = {};
      // The worker's queue sampler adds rows on its own clock (delivery/queue-sampler.ts).
      for (const { table_name } of tables.rows.filter((t) => t.table_name !== 'queue_samples')) {
        const r = await admin.query(`SELECT count(*)::int AS n FROM "${schema}"."${table_name}"`);
        counts[table_name] = r.rows[0].n;
      }
      counts.counter_values = (await admin.query(`SELECT * FROM "${schema}".counters ORDER BY name`)).rows;
      counts.queue_rows = (
        await admin.query(`SELECT * FROM "${schema}".endpoint_queues ORDER BY endpoint_id`)
      ).rows;
      return counts;
    },
    close: async () => {
      for (const c of clients) await c.end().catch(() => {});
      await receiver.close();
      await t.close();
    },
  };
}

/** A client that counts the statements sent through it: round trips, and proof of none. */
export function counting(client: pg.Client): SqlClient & { statements: string[] } {
  const statements: string[] = [];
  return {
    statements,
    query: (text: string, values?: unknown[]) => {
      statements.push(text);
      return client.query(text, values);
    },
  };
}

/** The parsed bodies the subscriber received, in arrival order. */
export function received(receiver: Receiver): { id: string; type: string; data: Record<string, unknown> }[] {
  return receiver.requests.map((r) => ({
    id: String(r.headers['hook-id']),
    ...(JSON.parse(r.body) as { type: string; data: Record<string, unknown> }),
  }));
}

/**
 * Waits until each of `ids` has arrived at the subscriber, and answers their first arrivals in arrival
 * order. Other requests (late or repeated deliveries of earlier tests) are left out.
 */
export async function waitForIds(
  receiver: Receiver,
  ids: readonly string[],
  timeoutMs = 20_000,
): Promise<{ id: string; type: string; data: Record<string, unknown> }[]> {
  const wanted = new Set(ids);
  const firsts = () => {
    const seen = new Set<string>();
    return received(receiver).filter((r) => wanted.has(r.id) && !seen.has(r.id) && seen.add(r.id));
  };
  await eventually(() => firsts().length === wanted.size, timeoutMs);
  return firsts();
}
