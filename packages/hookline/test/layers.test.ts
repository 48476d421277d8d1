// The layers of docs/architecture.md ("Layers", "Two stores"), read from the sources' own imports:
// every import goes down a floor (or stays in its folder), no files import each other round a loop,
// and no file outside src/store/ decides anything by the database's dialect.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../src');

/** Floors from the ground up: a file may import from a lower floor, or from its own folder. */
const FLOORS: string[][] = [
  ['errors.ts', 'ids.ts', 'database-url.ts', 'catalogue', 'net'],
  ['config.ts', 'pagination.ts', 'tenants.ts', 'console'],
  ['store'],
  ['crypto', 'metrics.ts', 'telemetry'],
  ['context.ts'],
  ['engine'],
  ['events', 'endpoints', 'keys', 'delivery'],
  ['admin', 'producer'],
  ['api'],
  ['service.ts'],
  ['cli', 'index.ts'],
];

/** The folder (or top-level file) a source file belongs to: its first path segment under src/. */
const placeOf = (file: string) => file.split('/')[0]!;

function floorOf(file: string): number {
  const floor = FLOORS.findIndex((f) => f.includes(placeOf(file)));
  if (floor < 0) throw new Error(`${file} is on no floor: place ${placeOf(file)} in FLOORS`);
  return floor;
}

function sources(dir = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return sources(full);
    return e.name.endsWith('.ts') ? [path.relative(SRC, full).split(path.sep).join('/')] : [];
  });
}

/** The files of src/ that `file` imports (static imports, re-exports and import()). */
function importsOf(file: string): string[] {
  const text = readFileSync(path.join(SRC, file), 'utf8');
  const specifiers = [...text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)].map((m) => m[1]!);
  return specifiers.map((s) => path.posix.join(path.posix.dirname(file), s).replace(/\.js$/, '.ts'));
}

const files = sources();
const graph = new Map(files.map((f) => [f, importsOf(f).filter((i) => files.includes(i))]));

describe('layers', () => {
  it('every import goes down a floor or stays in its folder', () => {
    const upward = [...graph].flatMap(([file, imports]) =>
      imports
        .filter((i) => placeOf(i) !== placeOf(file) && floorOf(i) >= floorOf(file))
        .map((i) => `${file} -> ${i}`),
    );
    expect(upward).toEqual([]);
  });

  it('no files import each other round a loop', () => {
    const loops: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (file: string, trail: string[]) => {
      if (state.get(file) === 'done') return;
      if (state.get(file) === 'open') {
        loops.push([...trail.slice(trail.indexOf(file)), file].join(' -> '));
        return;
      }
      state.set(file, 'open');
      for (const next of graph.get(file) ?? []) visit(next, [...trail, file]);
      state.set(file, 'done');
    };
    for (const file of files) visit(file, []);
    expect(loops).toEqual([]);
  });

  it('no file outside store/ tests the dialect or reaches into a store adapter', () => {
    const leaks = files
      .filter((f) => placeOf(f) !== 'store')
      .flatMap((f) => {
        const text = readFileSync(path.join(SRC, f), 'utf8');
        const found = [
          /\.dialect\b/.test(text) && 'tests .dialect',
          /instanceof (SqliteDb|PgDb)\b/.test(text) && 'tests instanceof an adapter',
          importsOf(f).some((i) => /^store\/(sqlite|postgres)\//.test(i)) && 'imports an adapter',
        ];
        return found.filter(Boolean).map((what) => `${f}: ${what}`);
      });
    expect(leaks).toEqual([]);
  });
});
