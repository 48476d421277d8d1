// Wake-ups through PostgreSQL's NOTIFY (delivery/work-signal.ts), between two signals on their own
// connections as two processes would have: the other one hears what was sent and what kind of work
// it is, and the sender's listeners are woken once, when it sends, not again by its own notification.
// Other suites' processes notify on the same channel meanwhile; the assertions allow for them.
import pg from 'pg';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { WorkSignal, type WakeKind } from '../../src/delivery/work-signal.js';
import { eventually } from '../helpers/receiver.js';
import { PG_URL, STORE_KINDS, createTestDatabase } from '../helpers/stores.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.runIf(STORE_KINDS.includes('postgres'))('WorkSignal on PostgreSQL', () => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn().catch(() => {});
  });

  /** A plain connection listening on the channel: every payload sent on it, from any process. */
  async function hearAll(): Promise<{ raw: pg.Client; payloads: string[] }> {
    const raw = new pg.Client({ connectionString: PG_URL });
    await raw.connect();
    cleanup.push(() => raw.end());
    const payloads: string[] = [];
    raw.on('notification', (n) => payloads.push(n.payload ?? ''));
    await raw.query('LISTEN hookline_work');
    return { raw, payloads };
  }

  it('wakes the other process with the kind of work, and its own listeners only once', async () => {
    const database = await createTestDatabase('postgres');
    cleanup.push(() => database.drop());
    const logger = pino({ level: 'silent' });
    const signals = [];
    for (let i = 0; i < 2; i++) {
      const db = database.open();
      cleanup.push(() => db.close());
      const signal = await WorkSignal.create(db, logger);
      cleanup.push(() => signal.close());
      signals.push(signal);
    }
    const [a, b] = signals as [WorkSignal, WorkSignal];
    const wokenA: WakeKind[] = [];
    const wokenB: WakeKind[] = [];
    await a.onWake((kind) => wokenA.push(kind));
    await b.onWake((kind) => wokenB.push(kind));
    // Every notification on the channel, to tell a's own from other suites'.
    const { raw, payloads } = await hearAll();

    a.notify('replay');
    // Its own listeners at once, without a round trip.
    expect(wokenA).toEqual(['replay']);
    await eventually(() => wokenB.includes('replay'));
    expect(payloads).toContain(`${a.origin} replay`);
    await sleep(300);
    // Whatever else arrived came from other processes: a's own notification woke nobody here again.
    const foreignReplays = payloads.filter((p) => !p.startsWith(a.origin) && p.includes('replay')).length;
    expect(wokenA.filter((k) => k === 'replay')).toHaveLength(1 + foreignReplays);

    // Notifications without a payload (a process of an earlier version) still wake, for work.
    const before = wokenB.length;
    await raw.query(`SELECT pg_notify('hookline_work', '')`);
    await eventually(() => wokenB.length > before);
    expect(wokenB.slice(before)).toContain('work');
  });

  it('sends what is still waiting for the debounce when it is closed, as a one-shot command is', async () => {
    const database = await createTestDatabase('postgres');
    cleanup.push(() => database.drop());
    const db = database.open();
    cleanup.push(() => db.close());
    const signal = await WorkSignal.create(db, pino({ level: 'silent' }));
    const { payloads } = await hearAll();
    signal.notify();
    await signal.close();
    await eventually(() => payloads.includes(`${signal.origin} work`));
  });
});
