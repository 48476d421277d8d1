// hookline benchmarks: `npm run bench [-- --quick] [--only a,b] [--repeat N] [--skip-memory] [--help]`.
//
// Every process — subscriber, emitters, baselines, each hookline process — is a separate child; hookline
// is driven only through its CLI, HOOKLINE_* variables and HTTP API. Tables on stdout (progress on
// stderr), every figure measured in this run with its ratio beside it; also written to
// bench/last-run.md with the machine it ran on. Cases (for --only, by name or prefix):
//   ceiling  bullmq  graphile  drain-sqlite  traced-drain  drain-pg  e2e-sqlite  e2e-pg  ingest
//   ingest-half  backlog  isolation  fanout  memory  ordering  keyed-lag-sqlite  keyed-lag-pg
//   rate-limit  producer
//
// THE STEADY TABLE (every drain and end-to-end case, and the ceiling; lib/window.js)
// A run is `deliveries` deliveries (40,000; 4,000 with --quick) at one subscriber, which counts each
// (path, hook-id) once. Figures are taken between the 20 % and 90 % marks of that count, so neither the
// start (cold code, connections opening, the first claims) nor the tail (workers running dry) is in them.
//   - drain: the backlog is queued first (hookline through `serve --no-worker`, then stopped; the
//     baselines through their bulk add), then the worker process(es) start. On PostgreSQL hookline's
//     workers also fan the events out, so that work is in the window.
//   - end to end: the workers run first, then an emitter (32 POST /v1/events in flight; for a baseline
//     its producer's add()/addJob()) runs until the 90 % mark; if emits outrun deliveries the backlog
//     grows meanwhile, as it would in production.
//   - ceiling: an undici Pool posting pre-signed requests, no queue: what the box allows at all.
// Columns:
//   deliveries/s    deliveries between the marks ÷ the time between them (the subscriber's own stamps).
//   × ceiling, × baseline   ratios of that rate to the ceiling's and to BullMQ's (SQLite cases) or
//                   graphile-worker's (PostgreSQL cases) same kind of run (drain or end to end).
//   first delivery  drains only: from the worker process's spawn to the first delivery — start-up, its
//                   own figure, in no rate.
//   queue µs        CPU (user + system, all threads; /proc/<pid>/stat, CLK_TCK ticks) per delivery in the
//                   window of the queue's processes: hookline's API and workers; a baseline's worker and,
//                   end to end, its producer (which does the inserts hookline's API does); the ceiling's
//                   sender.
//   db µs           PostgreSQL: the backends serving the case's connections (pg_stat_activity rows with
//                   the case's application_name); BullMQ: redis-server. SQLite is inside hookline.
//   subscriber µs, emitter µs   the same for the subscriber and the HTTP emitter (hookline end to end).
//   total µs        the sum of those four; total × baseline is its ratio to the baseline's total.
//   WAL B           pg_current_wal_lsn() advance per delivery over the window: the whole server's WAL,
//                   so it is only this case's on an otherwise idle database.
//   note            the window's size; "all postgres processes" = CPU of every postgres process per
//                   delivery (backends, WAL writer, checkpointer, autovacuum), again the whole server.
// Processes are read at both marks and every 250 ms between them, so one that ends in the window (a
// pooled connection closed) counts up to its last reading, one born in it from zero.
// With --repeat N every figure is the median of its N rounds and every ratio a ratio of medians; the
// note then shows the rate's range.
//
// THE OTHER TABLE: end-to-end emit rates and latencies (the same runs), ingest (closed-loop emitter,
// warm-up left out), emit latency at half ingest, backlog independence (a window of 800 deliveries
// after a rate limit is lifted), isolation and ordering (steady windows of smaller drains, rate only),
// fan-out (emit p99 at 50/s), memory (peak RSS with a large backlog; drain time from the subscriber's
// start), rate limit (rate between the 100th delivery and the last), emits inside the product's own
// transaction (emitWithin from 8 connections) beside HTTP emits (first 20 % of each left out).
//
// BENCH_CPU_PROF=<dir> writes a CPU profile of every hookline process into <dir> (node --cpu-prof).
// BENCH_NODE_ARGS="--flag …" starts every hookline process with those Node or V8 flags (A/B trials).
import { execSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { ensureBenchDeps } from './lib/bench-deps.js';
import { cleanupAll, installExitHandlers, killAll } from './lib/processes.js';
import { fmt, median, now } from './lib/stats.js';
import { CLK_TCK } from './lib/window.js';

// The baselines' packages are installed on first use (lib/bench-deps.js), before the cases load them.
ensureBenchDeps((m) => process.stderr.write(`${m}\n`));
const { CASES, scale } = await import('./lib/cases.js');
const { postgresServer } = await import('./lib/hookline.js');

function parseArgs(argv) {
  const args = { quick: false, only: null, repeat: 1, skipMemory: false, help: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--help' || a === '-h') args.help = true;
    else if (a === '--quick') args.quick = true;
    else if (a === '--skip-memory') args.skipMemory = true;
    else if (a === '--only') args.only = argv[++i].split(',').filter(Boolean);
    else if (a.startsWith('--only=')) args.only = a.slice(7).split(',').filter(Boolean);
    else if (a === '--repeat') args.repeat = Number(argv[++i]);
    else if (a.startsWith('--repeat=')) args.repeat = Number(a.slice(9));
    else
      throw new Error(`unknown argument ${a} (use --quick, --only a,b, --repeat N, --skip-memory; --help)`);
  }
  if (!Number.isInteger(args.repeat) || args.repeat < 1) throw new Error('--repeat needs a whole number ≥ 1');
  return args;
}

// ---- the table ------------------------------------------------------------------------------------

/** A ratio beside a figure: value ÷ results[of], with an optional target (min or max). */
const vs = (of, name, target = {}) => ({ of, name, ...target });

/** One table row: case name (for --only), label, metric key(s), unit, and ratios/targets/decimals. */
const row = (c, label, key, unit, more = {}) => ({ c, label, key, unit, ...more });
const plural = (n, word) => `${n} ${word}${n > 1 ? 's' : ''}`;

/**
 * The steady table's rows: case name (for --only), label, metric prefix (lib/cases.js steadyMetrics)
 * and the baseline it is compared with.
 */
function steadyRows() {
  const s = (c, label, p, base) => ({ c, label, p, base });
  const [bullDrain, bullE2e] = [
    { p: 'bullmq.drain', name: 'BullMQ' },
    { p: 'bullmq.e2e', name: 'BullMQ' },
  ];
  const [gwDrain, gwE2e] = [
    { p: 'graphile.drain', name: 'graphile' },
    { p: 'graphile.e2e', name: 'graphile' },
  ];
  const pg = 'PostgreSQL, 1 API + 2 workers';
  return [
    s('ceiling', 'ceiling: undici Pool, 64 connections, no queue', 'ceiling'),
    s('bullmq', 'BullMQ drain (Redis, concurrency 64)', 'bullmq.drain'),
    s('bullmq', 'BullMQ end to end (add(), 32 in flight)', 'bullmq.e2e'),
    s('graphile', 'graphile-worker drain (64 jobs, 10 connections)', 'graphile.drain'),
    s('graphile', 'graphile-worker end to end (addJob(), 32 in flight)', 'graphile.e2e'),
    s('drain-sqlite', 'hookline drain, SQLite, 1 worker, 1 endpoint', 'drain.sqlite.1', bullDrain),
    s('drain-sqlite', 'hookline drain, SQLite, 1 worker, 10 endpoints', 'drain.sqlite.10', bullDrain),
    s('drain-sqlite', 'hookline drain, SQLite, 1 worker, 1,000 endpoints', 'drain.sqlite.1000', bullDrain),
    s(
      'traced-drain',
      'hookline drain, SQLite, 1 worker, 1 endpoint, tracing on (default sampler)',
      'drain.traced.sqlite.1',
      { p: 'drain.sqlite.1', name: 'untraced' },
    ),
    s('drain-pg', 'hookline drain, PostgreSQL, 2 workers, 1 endpoint', 'drain.pg.1', gwDrain),
    s('drain-pg', 'hookline drain, PostgreSQL, 2 workers, 10 endpoints', 'drain.pg.10', gwDrain),
    s('drain-pg', 'hookline drain, PostgreSQL, 2 workers, 1,000 endpoints', 'drain.pg.1000', gwDrain),
    s('e2e-sqlite', 'hookline end to end, SQLite (serve), 1 endpoint', 'e2e.sqlite.1', bullE2e),
    s('e2e-sqlite', 'hookline end to end, SQLite (serve), 10 endpoints', 'e2e.sqlite.10', bullE2e),
    s('e2e-pg', `hookline end to end, ${pg}, 1 endpoint`, 'e2e.pg.1', gwE2e),
    s('e2e-pg', `hookline end to end, ${pg}, 10 endpoints`, 'e2e.pg.10', gwE2e),
  ];
}

/** Renders rows of cells as a Markdown table; columns in `right` are aligned right. */
function markdown(out, right) {
  const widths = out[0].map((_, i) => Math.max(...out.map((r) => r[i].length)));
  const line = (r) =>
    `| ${r.map((c, i) => (right.has(i) ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join(' | ')} |`;
  return [
    line(out[0]),
    `|${widths.map((w, i) => (right.has(i) ? '-'.repeat(w + 1) + ':' : '-'.repeat(w + 2))).join('|')}|`,
    ...out.slice(1).map(line),
  ].join('\n');
}

/** The steady table: one row per drain/end-to-end case, its figures side by side (see the top). */
function buildSteadyTable(results, notes, ran) {
  const out = [
    [
      'case',
      'deliveries/s',
      '× ceiling',
      '× baseline',
      'first delivery',
      'queue µs',
      'db µs',
      'subscriber µs',
      'emitter µs',
      'total µs',
      'total × baseline',
      'WAL B',
      'note',
    ],
  ];
  const ratio = (a, b, name) => {
    const r = a / b;
    return Number.isFinite(r) ? `${fmt(r, 2)}× ${name}` : '';
  };
  for (const r of steadyRows()) {
    if (!ran.has(r.c)) continue;
    const v = (k) => results[`${r.p}.${k}`];
    // A run the case leaves out (--quick: end to end with 10 endpoints) has neither figures nor note.
    if (!Number.isFinite(v('rate')) && !notes[`${r.p}.rate`]) continue;
    const us = (k) => fmt(v(`cpu.${k}`));
    const dbServer = v('cpu.dbServer');
    const note = [
      notes[`${r.p}.rate`],
      Number.isFinite(dbServer) ? `all postgres processes ${fmt(dbServer)} µs` : '',
    ]
      .filter(Boolean)
      .join('; ');
    out.push([
      r.label,
      fmt(v('rate')),
      r.p === 'ceiling' ? '' : ratio(v('rate'), results['ceiling.rate'], 'ceiling'),
      r.base ? ratio(v('rate'), results[`${r.base.p}.rate`], r.base.name) : '',
      Number.isFinite(v('first')) && r.p.includes('drain') ? `${fmt(v('first') / 1000, 2)} s` : '',
      us('queue'),
      us('db'),
      us('subscriber'),
      us('emitter'),
      us('total'),
      r.base ? ratio(v('cpu.total'), results[`${r.base.p}.cpu.total`], r.base.name) : '',
      fmt(v('wal')),
      note,
    ]);
  }
  return out.length > 1 ? markdown(out, new Set([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])) : '';
}

/** Keyed lag under a flaky subscriber (lib/cases.js, keyedLagCase), with issue 36's targets. */
function keyedRows(kind, what) {
  const [c, p] = [`keyed-lag-${kind === 'pg' ? 'pg' : 'sqlite'}`, `keyed.${kind}`];
  const label = (l) => `flaky subscriber (10 % 500s), ${what}: ${l}`;
  return [
    row(c, label('keyed lag p50 / p99 / max'), [`${p}.lagP50`, `${p}.lagP99`, `${p}.lagMax`], 'ms'),
    row(
      c,
      label('keyed lag not behind a failed attempt p99 / p50 / max'),
      [`${p}.cleanP99`, `${p}.cleanP50`, `${p}.cleanMax`],
      'ms',
      { max: 3000 },
    ),
    row(c, label('key handoff p99 / p50'), [`${p}.handoffP99`, `${p}.handoffP50`], 'ms', { max: 250 }),
    row(c, label('mean adaptive limit, % of the ceiling'), `${p}.limit`, '%', { min: 50 }),
    row(c, label('early attempts / order violations'), [`${p}.early`, `${p}.order`], '', { max: 0 }),
  ];
}

function rows(s) {
  const ceiling = vs('ceiling.rate', 'ceiling');
  const e2e = (kind, store, n) => {
    const [p, c, what] = [`e2e.${kind}.${n}`, `e2e-${kind}`, `${store}, ${plural(n, 'endpoint')}`];
    return [
      row(c, `${what}: emits/s (32 in flight)`, `${p}.ingest`, '/s'),
      row(c, `${what}: emit p50 / p99`, [`${p}.emitP50`, `${p}.emitP99`], 'ms', { decimals: 1 }),
      row(c, `${what}: emit→delivery p50 / p99 in the window`, [`${p}.latP50`, `${p}.latP99`], 'ms'),
      row(c, `${what}: peak RSS of hookline processes`, `${p}.rss`, 'MB'),
    ];
  };
  const baseline = (c, name, add) => [
    row(c, `${name}: ${add}/s, 32 in flight`, `${c}.ingest`, '/s'),
    row(c, `${name}: emit→delivery p50 / p99 in the window`, [`${c}.e2e.latP50`, `${c}.e2e.latP99`], 'ms'),
  ];
  const pgE2e = 'PostgreSQL 1 API + 2 workers';
  const memory = `worker peak RSS with ${fmt(s.memoryEvents * 10)} deliveries pending`;
  return [
    { section: 'End to end: the emitter and latency (the same runs as the steady table)' },
    ...baseline('bullmq', 'BullMQ', 'add()'),
    ...baseline('graphile', 'graphile-worker', 'addJob()'),
    ...e2e('sqlite', 'embedded SQLite', 1),
    ...e2e('sqlite', 'embedded SQLite', 10),
    ...e2e('pg', pgE2e, 1),
    ...e2e('pg', pgE2e, 10),
    { section: 'Ingest (POST /v1/events, 32 in flight, no endpoint)' },
    row('ingest', 'no-op Fastify route', 'ingest.fastify', '/s'),
    row('ingest', 'hookline SQLite (serve)', 'ingest.sqlite', '/s', {
      ratios: [vs('ingest.fastify', 'no-op', { min: 0.6 })],
    }),
    row('ingest', 'hookline PostgreSQL (serve --no-worker)', 'ingest.pg', '/s', {
      ratios: [vs('ingest.fastify', 'no-op', { min: 0.4 })],
    }),
    row(
      'ingest',
      'emit p99: no-op / SQLite / PostgreSQL',
      ['ingest.fastify.p99', 'ingest.sqlite.p99', 'ingest.pg.p99'],
      'ms',
      {
        decimals: 1,
      },
    ),
    row('ingest-half', 'emit p99 while delivering at half ingest (SQLite, 1 endpoint)', 'half.p99', 'ms', {
      decimals: 1,
      max: 10,
    }),
    row(
      'ingest-half',
      'emit p99 at the same rate: no-op Fastify route (the emitter floor)',
      'half.noop.p99',
      'ms',
      {
        decimals: 1,
      },
    ),
    { section: 'Independence' },
    row(
      'backlog',
      `backlog: drain rate with ${fmt(s.backlog)} queued (SQLite, 100th→900th delivery once released)`,
      'backlog.large',
      '/s',
      {
        ratios: [vs('backlog.small', '1,000 queued', { min: 0.9 })],
      },
    ),
    row('backlog', 'backlog: drain rate with 1,000 queued', 'backlog.small', '/s'),
    row(
      'isolation',
      'isolation: 9 healthy endpoints beside 1 hanging (SQLite drain)',
      'isolation.hang',
      '/s',
      {
        ratios: [vs('isolation.ok', 'all healthy', { min: 0.9 })],
      },
    ),
    row('isolation', 'isolation: the same 9 with all 10 healthy', 'isolation.ok', '/s'),
    row('fanout', 'fan-out: emit p99 at 50/s with 1,000 endpoints (serve, SQLite)', 'fanout.1000.p99', 'ms', {
      decimals: 1,
      ratios: [vs('fanout.1.p99', '1 endpoint', { max: 1.5 })],
    }),
    row('fanout', 'fan-out: emit p99 at 50/s with 1 endpoint', 'fanout.1.p99', 'ms', { decimals: 1 }),
    { section: 'Memory (SQLite, 1 worker, 10 endpoints, subscriber down)' },
    row('memory', memory + (s.memoryEvents < 100_000 ? ' (scaled down)' : ''), 'memory.rss', 'MB', {
      max: 250,
    }),
    row('memory', 'drain after the subscriber comes up: time', 'memory.drain', 's', { decimals: 1 }),
    row('memory', 'drain after the subscriber comes up: deliveries/s', 'memory.rate', '/s', {
      ratios: [ceiling],
    }),
    { section: `Ordering keys and rate limits (docs/delivery.md)` },
    row('ordering', 'SQLite drain, 1 endpoint, unkeyed', 'ordering.unkeyed', '/s', { ratios: [ceiling] }),
    row('ordering', 'SQLite drain, 1 endpoint, 1,000 ordering keys', 'ordering.keys1000', '/s', {
      ratios: [vs('ordering.unkeyed', 'unkeyed', { min: 0.8 })],
    }),
    row('ordering', 'SQLite drain, 1 endpoint, 1 ordering key', 'ordering.key1', '/s', {
      ratios: [vs('ordering.serial', 'serial POSTs')],
    }),
    row('ordering', 'serial POSTs: 1 connection, no queue (one per round trip)', 'ordering.serial', '/s'),
    ...keyedRows('sqlite', 'SQLite, serve'),
    ...keyedRows('pg', 'PostgreSQL, 1 API + 2 workers'),
    row('rate-limit', 'rate_limit 100: rate at the subscriber, 2 PostgreSQL workers', 'rate.limit100', '/s', {
      decimals: 1,
      ratios: [{ of: 'rate.target', name: 'the limit', min: 0.95, max: 1.05 }],
    }),
    { section: "Emitting inside the product's transaction (PostgreSQL, 1 API + 2 workers, 1 endpoint)" },
    row('producer', 'emitWithin, 8 product connections: committed transactions/s', 'producer.rate', '/s', {
      ratios: [vs('producer.http.rate', 'HTTP emits')],
    }),
    row(
      'producer',
      'emitWithin: added latency inside the transaction p50 / p99',
      ['producer.emitP50', 'producer.emitP99'],
      'ms',
      { decimals: 1 },
    ),
    row(
      'producer',
      'the transaction (BEGIN, INSERT user, emitWithin, COMMIT) p50 / p99',
      ['producer.txP50', 'producer.txP99'],
      'ms',
      { decimals: 1 },
    ),
    row('producer', 'HTTP emits, same installation: emits/s (32 in flight)', 'producer.http.rate', '/s'),
    row('producer', 'HTTP emit p50 / p99', ['producer.http.p50', 'producer.http.p99'], 'ms', { decimals: 1 }),
  ];
}

function buildTable(spec, results, notes, ran) {
  const out = [['measure', 'value', 'ratio', 'target', 'result', 'note']];
  for (const [i, row] of spec.entries()) {
    if (row.section) {
      const next = spec.slice(i + 1).findIndex((r) => r.section);
      const body = spec.slice(i + 1, next < 0 ? undefined : i + 1 + next);
      if (body.some((r) => ran.has(r.c))) out.push([`**${row.section}**`, '', '', '', '', '']);
      continue;
    }
    if (!ran.has(row.c)) continue;
    const keys = [row.key].flat();
    if (keys.every((k) => !Number.isFinite(results[k]) && !notes[k])) continue; // not run (see above)
    const d = row.decimals ?? 0;
    const value =
      keys.map((k) => fmt(results[k], d)).join(' / ') +
      (Number.isFinite(results[keys[0]]) ? ` ${row.unit}` : '');
    const note = keys
      .map((k) => notes[k])
      .filter(Boolean)
      .join('; ');
    const lines = [];
    if (row.max !== undefined) {
      const v = results[keys[0]];
      lines.push([
        '',
        `≤ ${row.max} ${row.unit}`,
        Number.isFinite(v) ? (v <= row.max ? 'PASS' : 'MISS') : '-',
      ]);
    }
    if (row.min !== undefined) {
      const v = results[keys[0]];
      lines.push([
        '',
        `≥ ${row.min} ${row.unit}`,
        Number.isFinite(v) ? (v >= row.min ? 'PASS' : 'MISS') : '-',
      ]);
    }
    for (const r of row.ratios ?? []) {
      const ratio = results[keys[0]] / results[r.of];
      const shown = Number.isFinite(ratio) ? `${fmt(ratio, 2)}× ${r.name}` : `- × ${r.name}`;
      const target =
        r.min !== undefined && r.max !== undefined
          ? `${r.min}–${r.max}`
          : r.min !== undefined
            ? `≥ ${r.min}`
            : r.max !== undefined
              ? `≤ ${r.max}`
              : '';
      const pass =
        r.min === undefined && r.max === undefined
          ? null
          : (r.min === undefined || ratio >= r.min) && (r.max === undefined || ratio <= r.max);
      lines.push([
        shown,
        target,
        pass === null ? '' : Number.isFinite(ratio) ? (pass ? 'PASS' : 'MISS') : '-',
      ]);
    }
    if (lines.length === 0) lines.push(['', '', '']);
    lines.forEach((l, i) => out.push(i === 0 ? [row.label, value, ...l, note] : ['', '', ...l, '']));
  }
  return out.length > 1 ? markdown(out, new Set([1])) : '';
}

// ---- running --------------------------------------------------------------------------------------

function machine(postgres) {
  const sh = (cmd) => {
    try {
      return execSync(cmd, { stdio: ['ignore', 'pipe', 'ignore'] })
        .toString()
        .trim();
    } catch {
      return '?';
    }
  };
  const dirty = sh('git status --porcelain -- packages') ? ' + uncommitted changes in packages/' : '';
  return [
    `- node ${process.version}, nproc ${os.availableParallelism()}, memory ${fmt(os.totalmem() / 2 ** 30, 1)} GiB, ${os.cpus()[0]?.model ?? 'cpu ?'}`,
    `- load average at start ${loadAtStart.map((l) => fmt(l, 1)).join(' ')}, at end ${os
      .loadavg()
      .map((l) => fmt(l, 1))
      .join(' ')}`,
    `- commit ${sh('git rev-parse --short HEAD')}${dirty}`,
    ...(postgres ? [`- ${postgres}`] : []),
  ].join('\n');
}

const loadAtStart = os.loadavg();

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args.help) {
    const width = Math.max(...CASES.map((c) => c.name.length)) + 2;
    process.stdout.write(
      [
        'npm run bench [-- --quick] [--only a,b] [--repeat N] [--skip-memory]',
        '  --quick        scaled-down cases, under two minutes',
        '  --only a,b     cases by name, or by a prefix of several (drain = drain-sqlite + drain-pg)',
        '  --repeat N     N rounds; each figure is the median of its N',
        '  --skip-memory  leaves out the memory case (1,000,000 pending deliveries)',
        'Drain and end-to-end figures are taken between the 20 % and 90 % marks of the deliveries;',
        'the top of bench/run.js says what every column means.',
        'cases:',
        ...CASES.map((c) => `  ${c.name.padEnd(width)}${c.about}`),
        '',
      ].join('\n'),
    );
    return;
  }
  installExitHandlers();
  if (loadAtStart[0] > os.availableParallelism())
    process.stderr.write(
      `note: load average ${fmt(loadAtStart[0], 1)} on ${os.availableParallelism()} cores: something else is running, figures will be low\n`,
    );
  const s = scale(args.quick);
  // --only: a case's exact name, or a prefix of several (drain = drain-sqlite + drain-pg).
  const wanted = (c, o) => c.name === o || (!CASES.some((x) => x.name === o) && c.name.startsWith(o));
  const selected = CASES.filter(
    (c) => (!args.only || args.only.some((o) => wanted(c, o))) && !(args.skipMemory && c.name === 'memory'),
  );
  if (selected.length === 0)
    throw new Error(`--only ${args.only} matches no case (${CASES.map((c) => c.name).join(', ')})`);
  const samples = {};
  const notes = {};
  const results = {};
  const ran = new Set();
  const caseLimitMs = args.quick ? 120_000 : 600_000;
  const started = now();
  const log = (msg) => process.stderr.write(`[${fmt((now() - started) / 1000, 1).padStart(6)} s] ${msg}\n`);
  const progress = (msg) => {
    if (process.stderr.isTTY) process.stderr.write(`\r\x1b[2K  ${msg}\r`);
  };
  for (let round = 1; round <= args.repeat; round++) {
    for (const c of selected) {
      log(`${c.name}${args.repeat > 1 ? ` (round ${round}/${args.repeat})` : ''}`);
      ran.add(c.name);
      let timer;
      try {
        const ctx = { quick: args.quick, scale: s, results, log: (m) => log(`  ${m}`), progress };
        const timeout = new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no result after ${caseLimitMs / 1000} s`)), caseLimitMs);
        });
        const r = await Promise.race([c.run(ctx), timeout]);
        for (const [k, v] of Object.entries(r.metrics)) (samples[k] ??= []).push(v);
        for (const [k, v] of Object.entries(r.notes ?? {})) if (v) (notes[k] ??= new Set()).add(v);
        for (const [k, v] of Object.entries(samples)) results[k] = median(v);
      } catch (err) {
        log(`  ${c.name} failed: ${err.stack ?? err}`);
        (notes[`case.${c.name}`] ??= new Set()).add(`failed: ${String(err.message).split('\n')[0]}`);
        killAll(); // whatever the case left running; its clean-ups follow from the rejections
      } finally {
        clearTimeout(timer);
      }
    }
  }
  // The runs' distinct notes, side by side ('|' would end the table cell).
  const noteText = Object.fromEntries(Object.entries(notes).map(([k, v]) => [k, [...v].join(' / ')]));
  const spec = rows(s);
  // With --repeat, the spread of each row's main figure goes beside its notes.
  for (const row of [...spec.filter((r) => r.key), ...steadyRows().map((r) => ({ key: `${r.p}.rate` }))]) {
    const k = [row.key].flat()[0];
    const v = (samples[k] ?? []).filter(Number.isFinite);
    if (v.length > 1) {
      const range = `${v.length} runs: ${fmt(Math.min(...v), row.decimals ?? 0)}–${fmt(Math.max(...v), row.decimals ?? 0)}`;
      noteText[k] = [range, noteText[k]].filter(Boolean).join('; ');
    }
  }
  // A failed case's note goes on its first row.
  for (const c of selected) {
    const first =
      steadyRows()
        .filter((r) => r.c === c.name)
        .map((r) => ({ key: `${r.p}.rate` }))[0] ?? spec.find((r) => r.c === c.name);
    const failure = noteText[`case.${c.name}`];
    if (first && failure) {
      const k = [first.key].flat()[0];
      noteText[k] = [noteText[k], failure].filter(Boolean).join('; ');
    }
  }
  const table = [buildSteadyTable(results, noteText, ran), buildTable(spec, results, noteText, ran)]
    .filter(Boolean)
    .join('\n\n');
  const repeat = args.repeat > 1 ? `, medians of ${args.repeat} runs` : '';
  const command = `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`;
  const header = `hookline bench${args.quick ? ' --quick' : ''}: steady window = deliveries ${fmt(Math.ceil(s.deliveries * 0.2))}–${fmt(Math.floor(s.deliveries * 0.9))} of ${fmt(s.deliveries)} per drain/e2e case${repeat}; CPU in µs per delivery (CLK_TCK ${CLK_TCK}); took ${fmt((now() - started) / 1000)} s`;
  process.stdout.write(`\n${header}\n\n${table}\n`);
  const md = [
    '# hookline bench: last run',
    '',
    `- command: \`${command}\``,
    `- date: ${new Date().toISOString()}`,
    machine(await postgresServer()),
    `- ${header}`,
    '',
    table,
    '',
    'Rates are deliveries (or emits) per second; ratios divide by the figure named beside them, measured in',
    'the same run (medians of the rounds). Drain and end-to-end rates, CPU and WAL are taken between the 20 %',
    'and 90 % marks of the deliveries; "first delivery" is from the spawn of the worker process(es). See the',
    'top of bench/run.js for what each column counts.',
    '',
  ].join('\n');
  writeFileSync(fileURLToPath(new URL('./last-run.md', import.meta.url)), md);
  log('wrote bench/last-run.md');
  await cleanupAll();
}

main().then(
  () => process.exit(0),
  async (err) => {
    process.stderr.write(`${err.stack ?? err}\n`);
    await cleanupAll();
    process.exit(1);
  },
);
