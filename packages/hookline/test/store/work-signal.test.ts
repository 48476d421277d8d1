// Wake-ups through PostgreSQL's NOTIFY (store/work-signal.ts), between signals on their own
// connections as separate processes would have: the other one hears what was sent and what kind of
// work it is; the sender's listeners are woken once, when it sends, not again by its own
// notification; an installation in another schema hears nothing; and a signal closed before its
// debounce ran out still sends.
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { WorkSignal, type WakeKind } from '../../src/store/work-signal.js';
import { eventually } from '../helpers/receiver.js';
import {
  STORE_KINDS,
  createTestDatabase,
  listenForWakeUps,
  type TestDatabase,
  type WakeUpListener,
} from '../helpers/stores.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.runIf(STORE_KINDS.includes('postgres'))('WorkSignal on PostgreSQL', () => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn().catch(() => {});
  });

  async function installation(): Promise<TestDatabase> {
    const database = await createTestDatabase('postgres');
    cleanup.push(() => database.drop());
    return database;
  }

  /** A signal on a connection (a pool) of its own, and the kinds of work its listeners were woken for. */
  async function signalOn(database: TestDatabase): Promise<{ signal: WorkSignal; woken: WakeKind[] }> {
    const db = database.open();
    cleanup.push(() => db.close());
    const signal = await WorkSignal.create(db, pino({ level: 'silent' }));
    cleanup.push(() => signal.close());
    const woken: WakeKind[] = [];
    await signal.onWake((kind) => woken.push(kind));
    return { signal, woken };
  }

  /** Every payload sent on an installation's channel. */
  async function hearAll(database: TestDatabase): Promise<WakeUpListener> {
    const listener = await listenForWakeUps(database);
    cleanup.push(() => listener.close());
    return listener;
  }

  it('wakes the other process with the kind of work, and its own listeners only once', async () => {
    const database = await installation();
    const a = await signalOn(database);
    const b = await signalOn(database);
    const { client, channel, payloads } = await hearAll(database);

    a.signal.notify('replay');
    // Its own listeners at once, without a round trip.
    expect(a.woken).toEqual(['replay']);
    await eventually(() => b.woken.includes('replay'));
    expect(payloads).toEqual([`${a.signal.origin} replay`]);
    await sleep(300);
    // Its own notification came back to it and woke nobody there again.
    expect(a.woken).toEqual(['replay']);
    expect(b.woken).toEqual(['replay']);

    // Notifications without a payload (a process of an earlier version) still wake, for work.
    await client.query('SELECT pg_notify($1, $2)', [channel, '']);
    await eventually(() => a.woken.length === 2 && b.woken.length === 2);
    expect([a.woken[1], b.woken[1]]).toEqual(['work', 'work']);
  });

  it('does not wake an installation in another schema of the same database', async () => {
    const here = await signalOn(await installation());
    const elsewhere = await signalOn(await installation());
    const neighbour = await signalOn(await installation());
    here.signal.notify();
    await eventually(() => here.woken.length === 1);
    neighbour.signal.notify('replay');
    await sleep(300);
    expect(elsewhere.woken).toEqual([]);
    expect(here.woken).toEqual(['work']);
  });

  it('sends what is still waiting for the debounce when it is closed, as a one-shot command is', async () => {
    const database = await installation();
    const { signal } = await signalOn(database);
    const { payloads } = await hearAll(database);
    signal.notify();
    await signal.close();
    await eventually(() => payloads.includes(`${signal.origin} work`));
  });
});
