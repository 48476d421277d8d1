// SQLite (3.46 on) plans a bound LIMIT for the value bound to it, so a statement written `LIMIT $n`
// is prepared again every time it runs with a new value: the claim's reads cost ~52 µs a run that
// way instead of ~11 (docs/architecture.md, "Prepared plans"). Shared SQL takes its limit through
// limitParam; only PostgreSQL's own files may bind one directly.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { limitParam } from '../../src/store/db.js';

const STORE = fileURLToPath(new URL('../../src/store/', import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'postgres' ? [] : sources(file);
    return entry.name.endsWith('.ts') ? [file] : [];
  });
}

describe('LIMIT in SQL that SQLite runs', () => {
  it('never binds its parameter directly', () => {
    const files = sources(STORE);
    expect(files.some((f) => f.endsWith(path.join('sqlite', 'claim.ts')))).toBe(true);
    const offending = files.flatMap((file) =>
      readFileSync(file, 'utf8')
        .split('\n')
        .map((line, i) => ({ at: `${path.relative(STORE, file)}:${i + 1}`, line }))
        .filter(({ line }) => /LIMIT\s+(\$\d|\$\$\{)/i.test(line)),
    );
    expect(offending).toEqual([]);
  });

  it('limitParam limits as a bound LIMIT would, whatever number type the driver binds', () => {
    const db = new Database(':memory:');
    try {
      db.exec('CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (1), (2), (3), (4)');
      const sql = `SELECT n FROM t ORDER BY n ${limitParam(1)}`.replace('$1', '?');
      expect(db.prepare(sql).all(2)).toEqual([{ n: 1 }, { n: 2 }]);
      expect(db.prepare(sql).all(2.0)).toEqual([{ n: 1 }, { n: 2 }]);
      expect(db.prepare(sql).all(0)).toEqual([]);
    } finally {
      db.close();
    }
  });
});
