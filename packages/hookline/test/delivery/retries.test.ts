// Failed attempts are retried with the same hook-id and a fresh signature; an exhausted delivery
// becomes `dead` with an encrypted dead letter, and no payload is ever stored in the clear.
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { openOriginal } from '../../src/engine/sealing.js';
import { PG_URL, STORE_KINDS } from '../helpers/stores.js';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import {
  createEndpoint,
  deadLettersOf,
  deliveriesOf,
  emit,
  hookHeaders,
  marker,
  shownError,
  sleep,
  untilNextSecond,
  verifyRequest,
} from './support.js';

describe.each(STORE_KINDS)('retries and dead letters on %s', (kind) => {
  let t: TestService | undefined;
  let r: Receiver | undefined;
  afterEach(async () => {
    await r?.close();
    await t?.close();
    r = t = undefined;
  });

  it('fails N times then succeeds: N+1 attempts, one hook-id, each signed over its own timestamp', async () => {
    const N = 2;
    t = await startTestService(kind, { worker: true });
    // The first failure is answered just after a second boundary, so the retries carry a later
    // hook-timestamp than attempt 1 and reusing attempt 1's headers would show.
    r = await startReceiver((_req, i) =>
      i < N ? { status: 500, body: `fail ${i}`, delayMs: i === 0 ? untilNextSecond() : 0 } : { status: 200 },
    );
    const endpoint = await createEndpoint(t, { url: r.url, events: ['user.*'] });
    const data = { userId: 'user_retry1' };
    const hookId = await emit(t, 'user.updated', data);

    await r.waitFor(N + 1, 10_000);
    const [row] = await eventually(async () => {
      const rows = await deliveriesOf(t!, hookId);
      return rows[0]?.status === 'succeeded' && rows;
    });
    await sleep(200);
    expect(r.requests).toHaveLength(N + 1);
    expect(row).toMatchObject({ status: 'succeeded', attempts: N + 1, last_status: 200, last_error: null });

    const body = JSON.stringify({ type: 'user.updated', data });
    for (const req of r.requests) {
      expect(req.headers['hook-id']).toBe(hookId);
      expect(req.body).toBe(body);
      const event = verifyRequest(req, endpoint.signing_secret);
      expect(event.timestamp).toBe(Number(req.headers['hook-timestamp']));
      expect(event.id).toBe(hookId);
    }
    const [first, second] = r.requests;
    expect(Number(second!.headers['hook-timestamp'])).toBeGreaterThan(
      Number(first!.headers['hook-timestamp']),
    );
    expect(second!.headers['hook-signature']).not.toBe(first!.headers['hook-signature']);
    // A retry's signature is over its own timestamp: with attempt 1's timestamp it no longer verifies.
    expect(() =>
      verifyRequest(
        { ...second!, headers: { ...second!.headers, 'hook-timestamp': first!.headers['hook-timestamp'] } },
        endpoint.signing_secret,
      ),
    ).toThrow(/No signature matches/);
  });

  it('always failing: dead after exactly 1 + HOOKLINE_MAX_RETRIES attempts, with an encrypted dead letter', async () => {
    t = await startTestService(kind, { worker: true });
    expect(t.config.maxRetries).toBe(3);
    // The subscriber echoes what it received, as many do: its answers carry the payload back.
    r = await startReceiver((req, i) => ({
      status: 503,
      body: `unavailable #${i} ${JSON.stringify({ error: 'bad input', received: req.body })}`,
      delayMs: i === 0 ? untilNextSecond() : 0,
    }));
    const endpoint = await createEndpoint(t, { url: r.url, events: ['organization.*'] });
    const secret = marker();
    const data = { organizationId: 'org_1', secret, nested: { again: secret } };
    const hookId = await emit(t, 'organization.social_providers.updated', data);

    const row = await eventually(async () =>
      (await deliveriesOf(t!, hookId)).find((d) => d.status === 'dead'),
    );
    // Beyond the largest retry wait (100 ms + 25 %): nothing more arrives.
    await sleep(400);
    expect(r.requests).toHaveLength(4);
    expect(row).toMatchObject({ status: 'dead', attempts: 4, last_status: 503, endpoint_id: endpoint.id });
    // In clear only hookline's own words; the answer is sealed, and operators read both together.
    expect(row.last_error).toBe('HTTP 503');
    const echo = `unavailable #3 ${JSON.stringify({ error: 'bad input', received: r.requests[3]!.body })}`;
    expect(shownError(t, row)).toBe(`HTTP 503: ${echo}`);
    expect(r.requests[3]!.body).toContain(secret);
    expect(row.completed_at).not.toBeNull();
    for (const req of r.requests) {
      expect(req.headers['hook-id']).toBe(hookId);
      verifyRequest(req, endpoint.signing_secret);
    }

    const letters = await deadLettersOf(t, hookId);
    expect(letters).toHaveLength(1);
    const letter = letters[0]!;
    expect(letter).toMatchObject({
      delivery_id: row.id,
      tenant_id: 'acme',
      endpoint_id: endpoint.id,
      message_id: hookId,
      event_type: 'organization.social_providers.updated',
      last_error: 'HTTP 503',
      replayed_at: null,
      replay_delivery_id: null,
    });
    expect(Number(letter.attempts)).toBe(4);
    expect(letter.id).toMatch(/^dl_/);

    const original = openOriginal(t.service.ctx.envelope, letter.id, Buffer.from(letter.original));
    const first = r.requests[0]!;
    const last = r.requests[3]!;
    expect(original.body).toBe(first.body);
    expect(original.body).toBe(JSON.stringify({ type: 'organization.social_providers.updated', data }));
    expect(original.headers).toEqual(hookHeaders(first));
    expect(original.headers['hook-timestamp']).not.toBe(last.headers['hook-timestamp']);
    // The stored original still verifies as what attempt 1 was.
    verifyRequest({ ...first, headers: original.headers, body: original.body }, endpoint.signing_secret);
    // The operator view decrypts the same thing; the list never carries the payload.
    const shown = await t.call('GET', `/v1/admin/dead-letters/${letter.id}`, t.keys.instance_manager);
    expect(shown.statusCode).toBe(200);
    expect(shown.json()).toMatchObject({ body: original.body, headers: original.headers, hook_id: hookId });
    const list = await t.call('GET', '/v1/admin/dead-letters', t.keys.instance_manager);
    expect(list.body).toContain(letter.id);
    // Operators read the subscriber's answer (opened for them); nothing else in the list carries the payload.
    const listed = list.json<{ data: { id: string; last_error: string }[] }>().data;
    const item = listed.find((d) => d.id === letter.id)!;
    expect(item.last_error).toBe(`HTTP 503: ${echo}`);
    expect(JSON.stringify({ ...item, last_error: null })).not.toContain(secret);

    // At rest, nowhere in the database is the payload readable: neither as sent nor as the subscriber
    // echoed it back in its answers (`secret` is in both), nor the answers themselves ('bad input').
    const answered = 'bad input';
    if (kind === 'sqlite') {
      const files = () =>
        readdirSync(t!.database.dir)
          .filter((f) => f.startsWith('hookline.db'))
          .map((f) => readFileSync(path.join(t!.database.dir, f)));
      const rawWhileOpen = files();
      expect(rawWhileOpen.length).toBeGreaterThanOrEqual(1);
      // Positive control: ids that are stored in the clear are found by the same search.
      expect(rawWhileOpen.some((b) => b.includes(Buffer.from(hookId)))).toBe(true);
      for (const b of rawWhileOpen) {
        expect(b.includes(Buffer.from(secret))).toBe(false);
        expect(b.includes(Buffer.from(answered))).toBe(false);
        expect(b.includes(Buffer.from(endpoint.signing_secret.slice(6)))).toBe(false);
      }
      await t.service.close(); // checkpoints the WAL into the main file
      const rawAfterClose = files();
      expect(rawAfterClose.some((b) => b.includes(Buffer.from(hookId)))).toBe(true);
      for (const b of rawAfterClose) {
        expect(b.includes(Buffer.from(secret))).toBe(false);
        expect(b.includes(Buffer.from(answered))).toBe(false);
        expect(b.includes(Buffer.from('org_1'))).toBe(false);
        expect(b.includes(Buffer.from(endpoint.signing_secret.slice(6)))).toBe(false);
      }
    } else {
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      try {
        const { rows: tables } = await client.query<{ table_name: string }>(
          `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE'`,
          [t.database.schema],
        );
        expect(tables.map((x) => x.table_name)).toEqual(
          expect.arrayContaining(['messages', 'deliveries', 'dead_letters', 'endpoints', 'audit_log']),
        );
        const found = async (needle: string) => {
          const hits: string[] = [];
          const hex = Buffer.from(needle).toString('hex');
          for (const { table_name } of tables) {
            // A row cast to text shows text columns as they are and bytea columns as hex.
            const { rows } = await client.query<{ n: string }>(
              `SELECT COUNT(*) AS n FROM ${t!.database.schema}.${table_name} x
               WHERE x::text LIKE '%' || $1 || '%' OR x::text LIKE '%' || $2 || '%'`,
              [needle, hex],
            );
            if (Number(rows[0]!.n) > 0) hits.push(table_name);
          }
          return hits;
        };
        expect(await found(hookId)).toEqual(
          expect.arrayContaining(['messages', 'deliveries', 'dead_letters']),
        );
        expect(await found(secret)).toEqual([]);
        expect(await found(answered)).toEqual([]);
        // Positive control for the answers: the reason beside them is in clear, found by the same search.
        expect(await found('HTTP 503')).toEqual(expect.arrayContaining(['deliveries', 'dead_letters']));
        expect(await found('org_1')).toEqual([]);
        // Nor is the signing secret.
        expect(await found(endpoint.signing_secret.slice(6))).toEqual([]);
      } finally {
        await client.end();
      }
    }
  });

  it('a 429 with a longer Retry-After postpones the retry accordingly', async () => {
    t = await startTestService(kind, { worker: true });
    r = await startReceiver(() => ({ status: 429, headers: { 'retry-after': '60' }, body: 'slow down' }));
    await createEndpoint(t, { url: r.url, events: ['user.*'] });
    const hookId = await emit(t, 'user.updated', { userId: 'user_ra' });
    const [req] = await r.waitFor(1);
    const row = await eventually(async () =>
      (await deliveriesOf(t!, hookId)).find((d) => d.status === 'pending'),
    );
    expect(row).toMatchObject({ attempts: 1, last_status: 429, last_error: 'HTTP 429' });
    expect(shownError(t, row)).toBe('HTTP 429: slow down');
    const wait = Number(row.next_attempt_at) - req!.at;
    expect(wait).toBeGreaterThanOrEqual(59_000);
    expect(wait).toBeLessThanOrEqual(61_000);
    await sleep(300); // the configured backoff (20-100 ms) alone would have retried by now
    expect(r.requests).toHaveLength(1);
  });

  it('a subscriber that never answers fails each attempt at HOOKLINE_DELIVERY_TIMEOUT_MS', async () => {
    t = await startTestService(kind, {
      worker: true,
      env: { HOOKLINE_DELIVERY_TIMEOUT_MS: '300', HOOKLINE_MAX_RETRIES: '1' },
    });
    r = await startReceiver(() => ({ hang: true }));
    await createEndpoint(t, { url: r.url, events: ['user.*'] });
    const hookId = await emit(t, 'user.updated', { userId: 'user_to' });
    const row = await eventually(async () =>
      (await deliveriesOf(t!, hookId)).find((d) => d.status === 'dead'),
    );
    expect(row).toMatchObject({ attempts: 2, last_status: null, last_error: 'timed out after 300 ms' });
    expect(r.requests).toHaveLength(2);
    const gap = r.requests[1]!.at - r.requests[0]!.at;
    expect(gap).toBeGreaterThanOrEqual(300);
    expect(gap).toBeLessThan(3000);
  });

  it('counts the backoff from the end of a failed attempt, not its start', async () => {
    // A 1 s time-out and a 1 s base: counted from the start, the retry would be due 0.75–1.25 s after
    // the request, before or just as the attempt is recorded; from the end it is at least 1.75 s.
    t = await startTestService(kind, {
      worker: true,
      env: {
        HOOKLINE_DELIVERY_TIMEOUT_MS: '1000',
        HOOKLINE_RETRY_BASE_MS: '1000',
        HOOKLINE_RETRY_MAX_MS: '1000',
        HOOKLINE_MAX_RETRIES: '1',
      },
    });
    r = await startReceiver(() => ({ hang: true }));
    await createEndpoint(t, { url: r.url, events: ['user.*'] });
    const hookId = await emit(t, 'user.updated', { userId: 'user_end' });
    const [req] = await r.waitFor(1);
    const row = await eventually(async () =>
      (await deliveriesOf(t!, hookId)).find((d) => d.status === 'pending' && d.attempts === 1),
    );
    expect(row.last_error).toBe('timed out after 1000 ms');
    expect(Number(row.next_attempt_at) - req!.at).toBeGreaterThanOrEqual(1000 + 750);
  });

  it('with HOOKLINE_MAX_RETRIES=0 the first failure is final and keeps its own headers', async () => {
    t = await startTestService(kind, { worker: true, env: { HOOKLINE_MAX_RETRIES: '0' } });
    r = await startReceiver(() => ({ status: 400, body: 'bad' }));
    await createEndpoint(t, { url: r.url, events: ['*'] });
    const hookId = await emit(t, 'connection.saml_certificate_renewed', { connectionId: 'c1' });
    const row = await eventually(async () =>
      (await deliveriesOf(t!, hookId)).find((d) => d.status === 'dead'),
    );
    await sleep(200);
    expect(r.requests).toHaveLength(1);
    expect(row.attempts).toBe(1);
    const [letter] = await deadLettersOf(t, hookId);
    const original = openOriginal(t.service.ctx.envelope, letter!.id, Buffer.from(letter!.original));
    expect(original).toEqual({ body: r.requests[0]!.body, headers: hookHeaders(r.requests[0]!) });
  });
});
