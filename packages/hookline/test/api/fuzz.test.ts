// A seeded fuzz of every route the served /openapi.json lists, so a new route is fuzzed without
// touching this file: wrong types, nulls, NUL and other control characters, huge strings and
// numbers, duplicate keys, bad cursors and limits, odd path ids, with every role and none. Never a
// 5xx, always the error shape, and a refused request leaves every table as it was (docs/contract.md §4).
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../../src/delivery/worker.js';
import { eventually, startReceiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { SNAKE_CASE, createEndpoint, expectError } from './support.js';

const SEED = Number(process.env.HOOKLINE_FUZZ_SEED ?? 20_240_611);
const RANDOM_CASES_PER_ROUTE = 40;

/** mulberry32: small, seeded, good enough to pick cases. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4_294_967_296;
  };
}

interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  minItems?: number;
  anyOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
  pattern?: string;
  format?: string;
  minimum?: number;
}

interface Operation {
  method: string;
  path: string;
  params: { name: string; in: 'path' | 'query' | 'header'; schema: Schema }[];
  body: Schema | null;
}

function operations(doc: {
  paths: Record<string, Record<string, { parameters?: Operation['params']; requestBody?: unknown }>>;
}): Operation[] {
  const ops: Operation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const body = (op.requestBody as { content?: { 'application/json'?: { schema: Schema } } } | undefined)
        ?.content?.['application/json']?.schema;
      ops.push({ method: method.toUpperCase(), path, params: op.parameters ?? [], body: body ?? null });
    }
  }
  return ops;
}

/** Values that pass a field's schema where it is easy to tell, so other fields' faults are reached. */
const HINTS: Record<string, unknown> = {
  url: 'https://hooks.example.com/in',
  type: 'user.updated',
  events: ['*'],
  data: {},
  tenant_id: 'acme',
};

function sample(schema: Schema, name = ''): unknown {
  if (name in HINTS) return HINTS[name];
  if (schema.const !== undefined) return schema.const;
  if (schema.enum) return schema.enum[0];
  if (schema.anyOf) return sample(schema.anyOf[0]!, name);
  switch (schema.type) {
    case 'string':
      if (schema.format === 'date-time') return new Date(0).toISOString();
      if (schema.pattern && new RegExp(schema.pattern).test('acme')) return 'acme';
      return 'fuzz';
    case 'integer':
    case 'number':
      return schema.minimum ?? 1;
    case 'boolean':
      return true;
    case 'array':
      return Array.from({ length: Math.max(1, schema.minItems ?? 0) }, () => sample(schema.items ?? {}));
    default: {
      const out: Record<string, unknown> = {};
      for (const key of schema.required ?? []) out[key] = sample(schema.properties?.[key] ?? {}, key);
      return out;
    }
  }
}

/** JSON values put in place of one body field (or the whole body). */
const BODY_VALUES: unknown[] = [
  null,
  true,
  0,
  -1,
  1.5,
  1e308,
  -1e308,
  Number.MAX_SAFE_INTEGER + 2,
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udfffy',
  '\u0001\u0002\u001b[31m\u007f',
  '\u202e\u200b\ufeff',
  '../../etc/passwd',
  "' OR '1'='1' --",
  '%00',
  '😀'.repeat(2000),
  'x'.repeat(10 * 1024),
  'x'.repeat(200 * 1024),
  [],
  [null],
  ['\u0000'],
  Array(1000).fill('*'),
  {},
  { a: { b: { c: null } } },
  { __proto__: { admin: true } },
];

/** JSON texts that JSON.stringify cannot produce, or only with a deeper stack than a test has. */
const RAW_VALUES = [
  '1e400',
  '-1e400',
  '1e-400',
  '-0',
  '123456789012345678901234567890',
  `${'['.repeat(20_000)}${']'.repeat(20_000)}`,
  `${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}`,
];

/** Raw (already percent-encoded) values for query parameters. */
const QUERY_VALUES = [
  '',
  '%00',
  'a%00b',
  '%ED%A0%80',
  '%FF',
  '%',
  '%ZZ',
  '-1',
  '0',
  '1.5',
  '1e400',
  '99999999999999999999',
  'abc',
  'null',
  '%0A%0D',
  '%1B%5B31m',
  '..%2F..',
  'x'.repeat(10 * 1024),
  'webhook_01ARZ3NDEKTSV4RRFFQ69G5FAV',
  'eyJpZCI6IngifQ',
];

/** Raw path segments for ids. */
const PATH_VALUES = [
  '%00',
  'a%00b',
  '..',
  '%2e%2e',
  '..%2F..%2Fetc',
  'x'.repeat(10 * 1024),
  '%FF',
  '%ZZ',
  '%',
  '%0A',
  ' ',
  'null',
  '-1',
];

/** Values for header parameters (node:http itself refuses control characters in headers). */
const HEADER_VALUES = ['', ' ', 'k', 'é', 'x'.repeat(300), '\t', '\u00ff\u00fe'];

interface Case {
  role: string;
  path: Record<string, string>;
  query: string[];
  headers: Record<string, string>;
  payload?: string | undefined;
}

const pick = <T>(random: () => number, list: readonly T[]): T => list[Math.floor(random() * list.length)]!;

describe.each(STORE_KINDS)('fuzz of every route in /openapi.json on %s', (kind) => {
  let t: TestService;
  let ids: string[];
  const keys: Record<string, string | null> = {};
  beforeAll(async () => {
    t = await startTestService(kind);
    keys['tenant'] = t.keys.tenant;
    keys['producer'] = t.keys.producer;
    keys['instance_manager'] = t.keys.instance_manager;
    keys['none'] = null;
    keys['unknown key'] = `hk_i_${'A'.repeat(43)}`;

    // Real rows for the path ids to name: an endpoint, a dead letter, a spare API key, a tenant.
    const receiver = await startReceiver(() => ({ status: 500, body: 'no' }));
    const endpoint = await createEndpoint(t, { url: receiver.url });
    const worker = new DeliveryWorker(t.service.ctx, { pollIntervalMs: 50, reapIntervalMs: 200 });
    await worker.start();
    const emitted = await t.call('POST', '/v1/events', t.keys.producer, {
      tenant_id: 'acme',
      type: 'user.updated',
      data: { n: 1 },
    });
    expect(emitted.statusCode, emitted.body).toBe(202);
    const deadLetterId = await eventually(async () => {
      const rows = await t.service.ctx.db.all<{ id: string }>('SELECT id FROM dead_letters');
      return rows[0]?.id;
    });
    await worker.stop(1000);
    await receiver.close();
    const spare = await t.call('POST', '/v1/admin/api-keys', t.keys.instance_manager, { role: 'producer' });
    ids = [endpoint.id, deadLetterId, (spare.json() as { id: string }).id, 'acme'];
  });
  afterAll(async () => t?.close());

  async function tables(): Promise<string[]> {
    const sql =
      kind === 'sqlite'
        ? "SELECT name FROM sqlite_master WHERE type = 'table'"
        : 'SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema()';
    return (await t.service.ctx.db.all<{ name: string }>(sql)).map((r) => r.name).sort();
  }

  /**
   * Counts, in a table of its own, every row any statement inserts, updates or deletes in `names`:
   * triggers, so inside the writing transaction (a rolled-back write is not counted). While the
   * count stands still no table changed, and the full dump below is needed only when it moved.
   */
  async function countChanges(names: string[]): Promise<void> {
    const db = t.service.ctx.db;
    await db.run('CREATE TABLE fuzz_changes (n INTEGER NOT NULL)');
    await db.run('INSERT INTO fuzz_changes (n) VALUES (0)');
    if (kind === 'postgres') {
      await db.run(`CREATE FUNCTION fuzz_count() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN UPDATE fuzz_changes SET n = n + 1; RETURN NULL; END $$`);
    }
    for (const name of names) {
      if (kind === 'postgres') {
        await db.run(`CREATE TRIGGER fuzz_rows AFTER INSERT OR UPDATE OR DELETE ON ${name}
          FOR EACH ROW EXECUTE FUNCTION fuzz_count()`);
        await db.run(`CREATE TRIGGER fuzz_truncate AFTER TRUNCATE ON ${name}
          FOR EACH STATEMENT EXECUTE FUNCTION fuzz_count()`);
        continue;
      }
      for (const op of ['INSERT', 'UPDATE', 'DELETE']) {
        await db.run(`CREATE TRIGGER fuzz_${op.toLowerCase()}_${name} AFTER ${op} ON ${name}
          BEGIN UPDATE fuzz_changes SET n = n + 1; END`);
      }
    }
  }

  async function changes(): Promise<number> {
    return Number((await t.service.ctx.db.one<{ n: number }>('SELECT n FROM fuzz_changes'))?.n);
  }

  /** Every row of every table, in a stable order: one statement on PostgreSQL, to keep it fast. */
  async function dump(names: string[]): Promise<string> {
    const db = t.service.ctx.db;
    if (kind === 'postgres') {
      const columns = names.map((n) => `(SELECT json_agg(r ORDER BY r::text) FROM ${n} r) AS ${n}`);
      return JSON.stringify(await db.all(`SELECT ${columns.join(', ')}`));
    }
    const out: string[] = [];
    for (const name of names) {
      const rows = await db.all<Record<string, unknown>>(`SELECT * FROM ${name}`);
      const text = rows.map((r) =>
        JSON.stringify(r, (_k, v: unknown) => (Buffer.isBuffer(v) ? v.toString('base64') : v)),
      );
      out.push(`${name}: ${text.sort().join('\n')}`);
    }
    return out.join('\n');
  }

  /** The error shape, checked cheaply; expectError (with its messages) only when it is not. */
  function isErrorShape(res: LightMyRequestResponse): boolean {
    try {
      const body = res.json() as { error?: { code?: unknown; message?: unknown } };
      return (
        /^application\/json/.test(String(res.headers['content-type'])) &&
        Object.keys(body).join() === 'error' &&
        Object.keys(body.error ?? {})
          .sort()
          .join() === 'code,message' &&
        typeof body.error?.code === 'string' &&
        SNAKE_CASE.test(body.error.code) &&
        typeof body.error.message === 'string' &&
        body.error.message.length > 0
      );
    } catch {
      return false;
    }
  }

  it('answers every field fuzzed in turn, and seeded random cases, without a 5xx, in the error shape, changing nothing when refused', async () => {
    const random = prng(SEED);
    const doc = (await t.inject({ method: 'GET', url: '/openapi.json' })).json() as Parameters<
      typeof operations
    >[0];
    const ops = operations(doc);
    expect(ops.length).toBeGreaterThan(15);
    // The queue sampler's timer writes queue_samples; no request does.
    const names = (await tables()).filter((n) => n !== 'queue_samples');
    await countChanges(names);
    let before = await dump(names);
    let changedBefore = await changes();
    const statuses: Record<number, number> = {};

    async function send(op: Operation, c: Case): Promise<void> {
      let path = op.path;
      for (const p of op.params.filter((p) => p.in === 'path')) {
        path = path.replace(`{${p.name}}`, c.path[p.name] ?? pick(random, ids));
      }
      const url = c.query.length > 0 ? `${path}?${c.query.join('&')}` : path;
      const key = keys[c.role];
      const headers: Record<string, string> = {
        ...(key ? { authorization: `Bearer ${key}` } : {}),
        ...c.headers,
      };
      if (c.payload !== undefined) headers['content-type'] ??= 'application/json';
      const label = `${op.method} ${url.slice(0, 120)} as ${c.role} with ${c.payload?.slice(0, 120)}`;
      const res: LightMyRequestResponse = await t.inject({
        method: op.method as 'GET',
        url,
        headers,
        ...(c.payload !== undefined ? { payload: c.payload } : {}),
      });
      statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
      // Plain comparisons first: thousands of expect() calls would make up most of the run time.
      if (res.statusCode >= 500)
        expect(res.statusCode, `${label}: ${res.body.slice(0, 300)}`).toBeLessThan(500);
      if (res.statusCode >= 400 && !isErrorShape(res)) expectError(res, res.statusCode);
      const changedAfter = await changes();
      if (changedAfter === changedBefore) return;
      const after = await dump(names);
      if (res.statusCode >= 400 && after !== before) {
        expect(after, `${label} was refused with ${res.statusCode} but changed the database`).toBe(before);
      }
      before = after;
      changedBefore = changedAfter;
    }

    for (const op of ops) {
      // The roles the route admits, found by asking, so that most cases get past authentication.
      const admitted: string[] = [];
      for (const [role, key] of Object.entries(keys)) {
        const res = await t.inject({
          method: op.method as 'GET',
          url: op.path.replace(/\{[^}]+\}/g, ids[0]!),
          headers: key ? { authorization: `Bearer ${key}` } : {},
        });
        if (res.statusCode !== 401 && res.statusCode !== 403) admitted.push(role);
      }
      before = await dump(names);
      changedBefore = await changes();
      const role = () => (admitted.length > 0 ? pick(random, admitted) : 'none');
      const valid = (op.body ? sample(op.body) : undefined) as Record<string, unknown> | undefined;
      const validText = valid === undefined ? undefined : JSON.stringify(valid);

      // Each field in turn, with every bad value, everything else valid.
      for (const p of op.params) {
        const values = p.in === 'path' ? PATH_VALUES : p.in === 'query' ? QUERY_VALUES : HEADER_VALUES;
        for (const value of values) {
          const c: Case = { role: role(), path: {}, query: [], headers: {}, payload: validText };
          if (p.in === 'path') c.path[p.name] = value;
          else if (p.in === 'query') c.query.push(`${p.name}=${value}`);
          else c.headers[p.name] = value;
          await send(op, c);
        }
      }
      if (valid) {
        for (const field of Object.keys({ ...op.body?.properties, unknown: 1 })) {
          for (const value of BODY_VALUES) {
            const payload = JSON.stringify({ ...valid, [field]: value });
            await send(op, { role: role(), path: {}, query: [], headers: {}, payload });
          }
          for (const raw of RAW_VALUES) {
            const payload = `{${JSON.stringify(field)}:${raw}${validText!.length > 2 ? `,${validText!.slice(1)}` : '}'}`;
            await send(op, { role: role(), path: {}, query: [], headers: {}, payload });
          }
        }
      }

      // Seeded random mixes: any role or none, odd whole bodies, duplicate keys, repeated and
      // unknown parameters, other content types.
      for (let n = 0; n < RANDOM_CASES_PER_ROUTE; n++) {
        const c: Case = {
          role: random() < 0.6 ? role() : pick(random, Object.keys(keys)),
          path: {},
          query: [],
          headers: {},
        };
        for (const p of op.params) {
          if (random() < 0.5) continue;
          if (p.in === 'path') c.path[p.name] = pick(random, PATH_VALUES);
          if (p.in === 'query') c.query.push(`${p.name}=${pick(random, QUERY_VALUES)}`);
          if (p.in === 'header') c.headers[p.name] = pick(random, HEADER_VALUES);
        }
        if (random() < 0.2)
          c.query.push(
            `${pick(random, ['limit', 'cursor', 'x', '__proto__[a]', 'tenant_id[]'])}=${pick(random, QUERY_VALUES)}`,
          );
        if (random() < 0.1) c.query.push(...c.query);
        const fields = Object.keys({ ...op.body?.properties, unknown: 1 });
        const body = valid ?? {};
        const text = JSON.stringify(body);
        const shape = random();
        if (shape < 0.3) {
          c.payload = JSON.stringify(pick(random, BODY_VALUES));
        } else if (shape < 0.6) {
          // A duplicate key: the bad value first and a good one last, or the reverse.
          const bad = `${JSON.stringify(pick(random, fields))}:${JSON.stringify(pick(random, BODY_VALUES))}`;
          c.payload =
            random() < 0.5
              ? `{${bad}${text.length > 2 ? ',' : ''}${text.slice(1)}`
              : `${text.slice(0, -1)}${text.length > 2 ? ',' : ''}${bad}}`;
        } else if (shape < 0.75) {
          c.payload = pick(random, ['{', '[', 'nul', '{"a":}', '\u0000', '{"a":"\\ud800"}', '"\\u0000"', '']);
        } else if (shape < 0.9 || !op.body) {
          c.payload = op.body ? text : undefined;
        } else {
          c.payload = text;
          c.headers['content-type'] = pick(random, [
            'text/plain',
            'application/json; charset=latin1',
            'application/jsonx',
            '',
          ]);
        }
        await send(op, c);
      }
    }
    console.log(
      `fuzz on ${kind}, seed ${SEED}: ${ops.length} routes, answers by status ${JSON.stringify(statuses)}`,
    );
    expect(Object.keys(statuses).some((s) => Number(s) < 300)).toBe(true);
    // Thousands of requests, more with every field a route takes: minutes on a busy machine.
  }, 300_000);

  it('is healthy afterwards: health, readiness and a normal create and list', async () => {
    expect((await t.call('GET', '/healthz', null)).statusCode).toBe(200);
    expect((await t.call('GET', '/readyz', null)).statusCode).toBe(200);
    const key = await t.keyFor('tenant', 'after-fuzz');
    const created = await createEndpoint(t, { key, description: 'after the fuzz' });
    const list = await t.call('GET', '/v1/webhooks', key);
    expect((list.json() as { data: { id: string }[] }).data.map((e) => e.id)).toEqual([created.id]);
  });
});
