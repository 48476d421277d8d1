// Graceful stop: close() lets an attempt in flight finish and records its outcome; an attempt that
// outlives the grace is interrupted and handed back (pending), never lost and never judged.
import { afterEach, describe, expect, it } from 'vitest';
import type { Db } from '../../src/store/db.js';
import type { DeliveryRow } from '../../src/store/deliveries.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { createEndpoint, emit, shownError, startRawServer, type RawServer } from './support.js';

async function rowsAfterClose(t: TestService, endpointId: string): Promise<DeliveryRow[]> {
  // close() also closed the service's database: read back through a fresh connection.
  const db: Db = t.database.open();
  try {
    return await db.all<DeliveryRow>('SELECT * FROM deliveries WHERE endpoint_id = $1', [endpointId]);
  } finally {
    await db.close();
  }
}

describe.each(STORE_KINDS)('graceful stop on %s', (kind) => {
  let t: TestService | undefined;
  let r: Receiver | undefined;
  let raw: RawServer | undefined;
  afterEach(async () => {
    await r?.close();
    await raw?.close();
    await t?.close();
    r = raw = t = undefined;
  });

  it('close() waits for a slow attempt in flight and records its success', async () => {
    t = await startTestService(kind, { worker: true });
    r = await startReceiver(() => ({ status: 200, delayMs: 600 }));
    const endpoint = await createEndpoint(t, { url: r.url, events: ['*'] });
    await emit(t, 'organization.deleted', { organizationId: 'org_1' });
    await r.waitFor(1);
    expect(t.service.worker?.inFlightCount).toBe(1);

    await t.service.close();
    // close() returned only after the subscriber answered: the attempt is judged a success below,
    // where an attempt cut short would be pending and marked interrupted.

    const rows = await rowsAfterClose(t, endpoint.id);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: 'succeeded', last_status: 200, lease_expires_at: null });
    expect(Number(rows[0]!.attempts)).toBe(1);
    expect(r.requests).toHaveLength(1);
  });

  it('close() records a failure of the attempt in flight as a retry', async () => {
    t = await startTestService(kind, { worker: true });
    r = await startReceiver(() => ({ status: 502, body: 'bad gateway', delayMs: 400 }));
    const endpoint = await createEndpoint(t, { url: r.url, events: ['*'] });
    await emit(t, 'organization.created', { organizationId: 'org_2' });
    await r.waitFor(1);
    await t.service.close();
    const [row] = await rowsAfterClose(t, endpoint.id);
    expect(row).toMatchObject({ status: 'pending', last_status: 502, last_error: 'HTTP 502' });
    expect(shownError(t, row!)).toBe('HTTP 502: bad gateway');
    expect(Number(row!.attempts)).toBe(1);
    expect(row!.first_headers).not.toBeNull();
  });

  it('an attempt that outlives the grace is interrupted and released, not judged', async () => {
    t = await startTestService(kind, { worker: true, env: { HOOKLINE_DELIVERY_TIMEOUT_MS: '300000' } });
    // A subscriber that never answers, and says when the sender drops the connection.
    const events: string[] = [];
    let arrived!: () => void;
    const arrival = new Promise<void>((resolve) => (arrived = resolve));
    let dropped!: () => void;
    const drop = new Promise<void>((resolve) => (dropped = resolve));
    raw = await startRawServer((req) => {
      req.socket.once('close', () => {
        events.push('connection dropped');
        dropped();
      });
      arrived();
    });
    const endpoint = await createEndpoint(t, { url: raw.url, events: ['*'] });
    await emit(t, 'user.created', { userId: 'user_hang' });
    await arrival;
    events.push('close called');
    // close() returns: it did not wait for the 5 min delivery time-out (far past this test's own
    // time-out), and it dropped the attempt's connection (at the end of its grace).
    await t.service.close();
    await drop;
    expect(events).toEqual(['close called', 'connection dropped']);
    const [row] = await rowsAfterClose(t, endpoint.id);
    expect(row).toMatchObject({
      status: 'pending',
      lease_expires_at: null,
      last_status: null,
      last_error: 'attempt interrupted by worker shutdown',
    });
    expect(Number(row!.attempts)).toBe(1);
  });
});
