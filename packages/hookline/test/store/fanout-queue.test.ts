// The fan-out queue, on both stores: a message is written once and what fan-out still has to do is a
// row of its own (migration 16, store/messages.ts). Databases made before it keep their messages that
// await fan-out, and retention never deletes a message fan-out has not reached.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Db } from '../../src/store/db.js';
import { advanceFanout, claimForFanout, insertMessages, type MessageRow } from '../../src/store/messages.js';
import { LATEST_VERSION, MIGRATIONS, migrate } from '../../src/store/migrations/index.js';
import { pruneOrphanMessages } from '../../src/store/retention.js';
import { createTestDatabase, STORE_KINDS, type TestDatabase } from '../helpers/stores.js';
import { T0 } from './queue-fixtures.js';

const message = (id: string, awaits: boolean): MessageRow => ({
  id,
  tenant_id: 'acme',
  event_type: 'user.updated',
  payload: Buffer.from(`sealed ${id}`),
  idempotency_key: null,
  idempotency_fingerprint: null,
  created_at: T0,
  awaits_fanout: awaits,
  ordering_key: null,
  ordering_key_sealed: null,
  trace_context: null,
});

describe.each(STORE_KINDS)('fan-out queue on %s', (kind) => {
  let database: TestDatabase;
  let db: Db;
  beforeEach(async () => {
    database = await createTestDatabase(kind);
    db = database.open();
  });
  afterEach(async () => {
    await db.close();
    await database.drop();
  });

  it('migration 16 moves the messages awaiting fan-out into the queue, with how far each had come', async () => {
    // The schema as the build before it left it.
    await db.transaction(async (tx) => {
      await tx.run(
        'CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)',
      );
      for (const m of MIGRATIONS.filter((m) => m.version < 16)) {
        for (const sql of m.statements(kind)) await tx.run(sql);
        await tx.run('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [
          m.version,
          m.name,
          T0,
        ]);
      }
      await tx.run(
        `INSERT INTO messages (id, tenant_id, event_type, payload, created_at, fanned_out_at, fanout_cursor,
           ordering_key, ordering_seq, trace_context)
         VALUES ('m-partial', 'acme', 'user.updated', $1, ${T0}, NULL, 'ep-b', 'k', 7, 'trace'),
           ('m-waiting', 'acme', 'user.created', $1, ${T0 + 1}, NULL, NULL, NULL, NULL, NULL),
           ('m-done', 'acme', 'user.deleted', $1, ${T0 + 2}, ${T0 + 3}, NULL, NULL, NULL, NULL)`,
        [Buffer.from('sealed')],
      );
    });
    expect((await migrate(db)).applied).toEqual([16]);
    expect(LATEST_VERSION).toBe(16);

    const queued = await db.transaction((tx) => claimForFanout(tx, 10));
    expect(
      queued.map((m) => ({ ...m, ordering_seq: m.ordering_seq === null ? null : Number(m.ordering_seq) })),
    ).toEqual([
      {
        id: 'm-partial',
        tenant_id: 'acme',
        event_type: 'user.updated',
        cursor: 'ep-b',
        ordering_key: 'k',
        ordering_seq: 7,
        trace_context: 'trace',
      },
      {
        id: 'm-waiting',
        tenant_id: 'acme',
        event_type: 'user.created',
        cursor: null,
        ordering_key: null,
        ordering_seq: null,
        trace_context: null,
      },
    ]);
    // The messages themselves are as they were, less the two columns.
    const rows = await db.all<{ id: string }>('SELECT id FROM messages ORDER BY id');
    expect(rows.map((r) => r.id)).toEqual(['m-done', 'm-partial', 'm-waiting']);
    await expect(db.one('SELECT fanned_out_at FROM messages')).rejects.toThrow(/fanned_out_at/);
  });

  it('a message awaiting fan-out is kept by retention until fan-out has taken it off the queue', async () => {
    await migrate(db);
    await db.transaction((tx) => insertMessages(tx, [message('m-queued', true), message('m-fanned', false)]));
    const later = T0 + 30 * 86_400_000;
    // Neither has deliveries or dead letters: the one fanned out goes, the one still queued stays.
    expect(await pruneOrphanMessages(db, later)).toBe(1);
    expect((await db.all<{ id: string }>('SELECT id FROM messages')).map((r) => r.id)).toEqual(['m-queued']);
    await db.transaction((tx) => advanceFanout(tx, ['m-queued'], null));
    expect(await pruneOrphanMessages(db, later)).toBe(1);
    expect(await db.all('SELECT id FROM messages')).toEqual([]);
  });

  it('records how far a partial fan-out has come, and takes fanned-out messages off the queue', async () => {
    await migrate(db);
    await db.transaction((tx) =>
      insertMessages(tx, [message('m1', true), message('m2', true), message('m3', false)]),
    );
    await db.transaction((tx) => advanceFanout(tx, ['m1'], { id: 'm2', cursor: 'ep-c' }));
    const queued = await db.transaction((tx) => claimForFanout(tx, 10));
    expect(queued.map((m) => [m.id, m.cursor])).toEqual([['m2', 'ep-c']]);
  });
});
