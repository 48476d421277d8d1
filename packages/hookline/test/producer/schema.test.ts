// hookline's tables in a schema of their own: `?schema=` in HOOKLINE_DATABASE_URL (docs/producers.md,
// "Schema"). The name is checked with the configuration; migrate creates the schema; the workers of
// that installation listen on its channel, which is where a producer of that schema notifies.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { splitSchema } from '../../src/database-url.js';
import { migrate } from '../../src/store/migrations/index.js';
import { openDb } from '../../src/store/open.js';
import { PG_URL, STORE_KINDS } from '../helpers/stores.js';

const KEY = randomBytes(32).toString('base64');

describe('?schema= in HOOKLINE_DATABASE_URL', () => {
  it('is split off the URL the driver gets, other parameters kept', () => {
    expect(splitSchema('postgres://u@h:5432/app?schema=hookline&sslmode=disable')).toEqual({
      connectionString: 'postgres://u@h:5432/app?sslmode=disable',
      schema: 'hookline',
    });
    expect(splitSchema('postgres://u@h/app')).toEqual({
      connectionString: 'postgres://u@h/app',
      schema: null,
    });
  });

  it('refuses a schema name that is not a plain lower-case identifier, naming the variable', () => {
    for (const bad of ['Hookline', '1st', 'a-b', 'x%3BDROP', 'a'.repeat(64), '']) {
      const env = { HOOKLINE_DATABASE_URL: `postgres://u@h/app?schema=${bad}`, HOOKLINE_ENCRYPTION_KEY: KEY };
      expect(() => loadConfig(env), bad).toThrowError(ConfigError);
      expect(() => loadConfig(env)).toThrow(/HOOKLINE_DATABASE_URL.*schema/);
    }
    const both = `postgres://u@h/app?schema=a&options=${encodeURIComponent('-c search_path=b')}`;
    expect(() => loadConfig({ HOOKLINE_DATABASE_URL: both, HOOKLINE_ENCRYPTION_KEY: KEY })).toThrow(
      /HOOKLINE_DATABASE_URL.*not both/,
    );
    expect(
      loadConfig({
        HOOKLINE_DATABASE_URL: 'postgres://u@h/app?schema=hook_line2',
        HOOKLINE_ENCRYPTION_KEY: KEY,
      }).databaseUrl,
    ).toContain('schema=hook_line2');
  });

  it.runIf(STORE_KINDS.includes('postgres'))(
    'migrate creates a missing schema; its workers listen on the channel producers of that schema notify',
    async () => {
      const schema = `hl_${randomBytes(6).toString('hex')}`;
      const db = await openDb(`${PG_URL}?schema=${schema}`);
      const admin = new pg.Client({ connectionString: PG_URL });
      await admin.connect();
      try {
        await migrate(db);
        const r = await admin.query(
          `SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'messages'`,
          [schema],
        );
        expect(r.rows[0].n).toBe(1);
        // Nothing of it in the connection's default schema.
        expect((await db.one<{ s: string }>('SELECT current_schema() AS s'))!.s).toBe(schema);
        const heard: string[] = [];
        const stop = await db.notifications!.listen('hookline_work', (p) => heard.push(p), {
          warn: () => {},
        });
        await admin.query(`SELECT pg_notify($1, 'test work')`, [`hookline_work:${schema}`]);
        await expect.poll(() => heard, { timeout: 10_000 }).toEqual(['test work']);
        await stop();
      } finally {
        await db.close();
        await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await admin.end();
      }
    },
  );
});
