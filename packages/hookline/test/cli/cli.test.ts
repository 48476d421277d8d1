// The hookline command as a user runs it: real process, real database, stdout/stderr/exit codes.
import { chmodSync, mkdtempSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { Envelope, encryptionKeyFromBase64 } from '../../src/crypto/envelope.js';
import { runCli, startProcess } from '../helpers/process.js';

const modeOf = (file: string) => statSync(file).mode & 0o777;

/** The JSON log lines among a command's stderr. */
function logLines(stderr: string): Record<string, unknown>[] {
  return stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('hookline CLI on the embedded default', () => {
  const cwd = mkdtempSync(path.join(tmpdir(), 'hookline-cli-'));
  // No HOOKLINE_* variables: exactly what a new user gets.
  const env = { HOOKLINE_LOG_LEVEL: 'warn' };
  afterAll(() => {});

  it('migrate creates ./data (0700) with the database and the key file (0600), and says once where the key is', async () => {
    const result = await runCli(['migrate'], env, cwd);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/schema (at|already at) version \d+/);
    const keyFile = path.join(cwd, 'data', 'encryption.key');
    expect(modeOf(path.join(cwd, 'data'))).toBe(0o700);
    expect(modeOf(path.join(cwd, 'data', 'hookline.db'))).toBe(0o600);
    expect(modeOf(keyFile)).toBe(0o600);
    const told = logLines(result.stderr).filter((l) => l.key_file);
    expect(told).toEqual([expect.objectContaining({ level: 40, key_file: realpathSync(keyFile) })]);
    expect(told[0]?.msg).toMatch(/back it up/);
    const again = await runCli(['migrate'], env, cwd);
    expect(again.code).toBe(0);
    expect(again.stderr).toMatch(/already at version/);
    expect(again.stderr).not.toMatch(/encryption key/);
  });

  it('a database left readable by others by an earlier version is narrowed to 0600', async () => {
    const db = path.join(cwd, 'data', 'hookline.db');
    chmodSync(db, 0o644);
    expect((await runCli(['migrate'], env, cwd)).code).toBe(0);
    expect(modeOf(db)).toBe(0o600);
  });

  it('serve keeps the database, its WAL and its shared memory owner-only while it runs', async () => {
    const dir = path.join(mkdtempSync(path.join(tmpdir(), 'hookline-modes-')), 'state', 'data');
    const db = path.join(dir, 'hookline.db');
    const server = await startProcess(['serve'], {
      HOOKLINE_DATABASE_URL: `sqlite:${db}`,
      HOOKLINE_PORT: '0',
    });
    try {
      expect(modeOf(dir)).toBe(0o700);
      for (const file of [db, `${db}-wal`, `${db}-shm`, path.join(dir, 'encryption.key')]) {
        expect([file, modeOf(file)]).toEqual([file, 0o600]);
      }
    } finally {
      await server.kill();
    }
  });

  it("warns once about unknown HOOKLINE_ variables, naming the likely one, but not about the test suite's", async () => {
    const result = await runCli(
      ['migrate'],
      {
        ...env,
        HOOKLINE_RETRY_BASE: '5',
        HOOKLINE_NOTHING_LIKE_IT: '1',
        HOOKLINE_TEST_POSTGRES_URL: 'postgres://postgres@127.0.0.1:5432/test',
        HOOKLINE_TEST_POSTGRES: 'required',
      },
      cwd,
    );
    expect(result.code).toBe(0);
    const warnings = logLines(result.stderr).filter((l) => l.unknown_variables);
    expect(warnings).toEqual([
      expect.objectContaining({
        level: 40,
        unknown_variables: ['HOOKLINE_NOTHING_LIKE_IT', 'HOOKLINE_RETRY_BASE'],
        did_you_mean: { HOOKLINE_RETRY_BASE: 'HOOKLINE_RETRY_BASE_MS' },
      }),
    ]);
    expect(warnings[0]?.msg).toContain('HOOKLINE_RETRY_BASE (did you mean HOOKLINE_RETRY_BASE_MS?)');
    expect(logLines((await runCli(['migrate'], env, cwd)).stderr).filter((l) => l.unknown_variables)).toEqual(
      [],
    );
  });

  it('keys create prints exactly one key line on stdout', async () => {
    for (const [role, letter, extra] of [
      ['tenant', 't', ['--tenant', 'acme']],
      ['producer', 'p', []],
      ['instance_manager', 'i', []],
    ] as const) {
      const result = await runCli(['keys', 'create', '--role', role, ...extra], env, cwd);
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(new RegExp(`^hk_${letter}_[A-Za-z0-9_-]{43}\\n$`));
    }
  });

  it.each([
    [['keys', 'create', '--role', 'admin'], /--role must be one of/],
    [['keys', 'create', '--role', 'tenant'], /tenant key needs a tenant/],
    [['keys', 'create', '--role', 'tenant', '--tenant', 'bad tenant!'], /tenant_id must be/],
    [['emit', 'acme', 'user.created', '{not json'], /not valid JSON/],
    [['emit', 'acme', 'user.exploded', '{}'], /unknown event type/],
    [['emit', 'acme', 'user.created', '{"userId":"nope"}'], /userId/],
    [
      ['emit', 'acme', 'user.updated', '{}', '--ordering-key', 'a\tb'],
      /ordering_key must not contain control/,
    ],
    [['keys', 'revoke', 'key_doesnotexist'], /no API key/],
  ])('%j fails with a one-line message', async (args, message) => {
    const result = await runCli([...args], env, cwd);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(message);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('emit prints the message id', async () => {
    const result = await runCli(['emit', 'acme', 'user.created', '{"userId":"user_1"}'], env, cwd);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^msg_[0-9A-Z]{26}\n$/);
  });

  it('emit --ordering-key stores the key with the message, as its keyed hash', async () => {
    const result = await runCli(['emit', 'acme', 'user.updated', '{}', '--ordering-key', 'user_7'], env, cwd);
    expect(result.code, result.stderr).toBe(0);
    const id = result.stdout.trim();
    const db = new Database(path.join(cwd, 'data', 'hookline.db'), { readonly: true });
    const row = db.prepare('SELECT ordering_key, ordering_seq FROM messages WHERE id = ?').get(id) as {
      ordering_key: string;
      ordering_seq: number;
    };
    db.close();
    const key = readFileSync(path.join(cwd, 'data', 'encryption.key'), 'utf8').trim();
    const envelope = new Envelope(encryptionKeyFromBase64(key));
    expect(row.ordering_key).toBe(envelope.keyHash('ordering', 'acme', 'user_7'));
    expect(row.ordering_seq).toBeGreaterThan(0);
  });

  it('keys list shows keys without their secret; revoke revokes', async () => {
    const key = (
      await runCli(['keys', 'create', '--role', 'producer', '--label', 'ci'], env, cwd)
    ).stdout.trim();
    const listed = await runCli(['keys', 'list', '--json'], env, cwd);
    expect(listed.code).toBe(0);
    expect(listed.stdout).not.toContain(key);
    type KeyRow = { id: string; label: string; revoked_at: string | null };
    const page = JSON.parse(listed.stdout) as { data: KeyRow[]; next_cursor: string | null };
    const mine = page.data.find((r) => r.label === 'ci');
    expect(mine?.revoked_at).toBeNull();
    expect((await runCli(['keys', 'revoke', mine?.id ?? ''], env, cwd)).code).toBe(0);
    const after = JSON.parse((await runCli(['keys', 'list', '--json'], env, cwd)).stdout) as typeof page;
    expect(after.data.find((r) => r.id === mine?.id)?.revoked_at).not.toBeNull();
  });

  it('every list answers --json with one shape, {data, next_cursor}, and pages with --cursor', async () => {
    for (const list of [
      ['keys', 'list'],
      ['dead-letters', 'list'],
    ]) {
      const result = await runCli([...list, '--json'], env, cwd);
      expect(result.code).toBe(0);
      expect(Object.keys(JSON.parse(result.stdout)).sort()).toEqual(['data', 'next_cursor']);
    }
    const all = JSON.parse((await runCli(['keys', 'list', '--json'], env, cwd)).stdout) as {
      data: { id: string }[];
    };
    expect(all.data.length).toBeGreaterThan(2);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const args: string[] = [
        'keys',
        'list',
        '--json',
        '--limit',
        '2',
        ...(cursor ? ['--cursor', cursor] : []),
      ];
      const page = JSON.parse((await runCli(args, env, cwd)).stdout) as {
        data: { id: string }[];
        next_cursor: string | null;
      };
      seen.push(...page.data.map((k) => k.id));
      cursor = page.next_cursor;
    } while (cursor);
    expect(seen).toEqual(all.data.map((k) => k.id));
    const table = await runCli(['keys', 'list', '--limit', '1'], env, cwd);
    expect(table.stderr).toMatch(/^more: --cursor key_/m);
    expect((await runCli(['keys', 'list', '--limit', '0'], env, cwd)).stderr).toMatch(/--limit/);
    expect((await runCli(['keys', 'list', '--cursor', 'nope'], env, cwd)).stderr).toMatch(/cursor/);
  });

  it('invalid configuration stops with a message naming the variable', async () => {
    const result = await runCli(['migrate'], { ...env, HOOKLINE_RETRY_BASE_MS: 'soon' }, cwd);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/^hookline: HOOKLINE_RETRY_BASE_MS/);
  });
});
