// The steady-state window: every drain and end-to-end figure is taken between the 20 % and the 90 %
// marks of a run's deliveries, as counted by the subscriber, so that neither a process's start-up
// (cold code, connections opening) nor the tail (workers running out of work) weighs in it.
//
// At each mark the subscriber tells the orchestrator (an IPC event), which at once samples:
//   - utime + stime of every process involved, from /proc/<pid>/stat (clock ticks, threads included);
//   - on PostgreSQL, the backends serving the case (pg_stat_activity rows whose application_name is
//     the case's tag, set in its connection URL), every postgres process (the whole server), and
//     pg_current_wal_lsn() (WAL written by the whole server);
//   - for BullMQ, the redis-server process.
// Differences between the two samples, divided by the deliveries between the marks, give CPU µs and
// WAL bytes per delivery; the rate is those deliveries over the time between the subscriber's own
// arrival stamps of the two marks.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';
import { PG_URL } from './hookline.js';
import { now } from './stats.js';
import { awaitDeliveries } from './subscriber.js';

/** Clock ticks per second of /proc/<pid>/stat's utime and stime (`getconf CLK_TCK`, nearly always 100). */
export const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  } catch {
    return 100;
  }
})();

/** utime + stime of a process and all its threads, in clock ticks; NaN once it has gone. */
export function cpuTicks(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after "(comm) ": state is the 1st, utime the 12th, stime the 13th (proc(5)).
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(f[11]) + Number(f[12]);
  } catch {
    return NaN;
  }
}

/** Pids of every process whose command name is `comm` (postgres, redis-server). */
export function pidsOf(comm) {
  const pids = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === comm) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

const ticksOf = (pids) => new Map(pids.map((pid) => [pid, cpuTicks(pid)]));

/** How often the processes are read between the marks, to keep the CPU of those that end meanwhile. */
const POLL_MS = 250;

/**
 * Starts watching a run of `total` deliveries at `subscriber`. `groups` maps a column (queue,
 * emitter) to a function answering its pids at sample time; `db` is {kind: 'pg', app} (the
 * application_name of the case's connections), {kind: 'redis'} or null (SQLite: in-process).
 * `from`/`to` are the marks; `result()` waits for both samples and answers the figures.
 *
 * Between the marks every process is read again every POLL_MS: a process (a backend whose pooled
 * connection closed, an autovacuum worker) that ends in the window counts up to its last reading; one
 * born in the window counts from zero.
 */
export async function watchWindow(subscriber, total, { groups, db = null }) {
  const from = Math.ceil(total * 0.2);
  const to = Math.floor(total * 0.9);
  const client = db?.kind === 'pg' ? new pg.Client({ connectionString: PG_URL }) : null;
  if (client) await client.connect();
  const redisPids = db?.kind === 'redis' ? pidsOf('redis-server') : [];

  async function sample() {
    let wal = NaN;
    let backends = [];
    if (client) {
      const { rows } = await client.query(
        `SELECT (pg_current_wal_lsn() - '0/0')::text AS wal,
                array(SELECT pid FROM pg_stat_activity WHERE application_name = $1) AS pids`,
        [db.app],
      );
      wal = Number(rows[0].wal);
      backends = rows[0].pids;
    }
    // All /proc reads together, right after the database answered: one instant for every process.
    const cpu = Object.fromEntries(Object.entries(groups).map(([name, pids]) => [name, ticksOf(pids())]));
    if (client) {
      cpu.db = ticksOf(backends);
      cpu.dbServer = ticksOf(pidsOf('postgres'));
    } else if (redisPids.length) cpu.db = ticksOf(redisPids);
    return { at: now(), wal, cpu };
  }

  const last = {}; // column → pid → ticks at its latest reading in the window
  const remember = (s) => {
    for (const [name, ticks] of Object.entries(s.cpu)) {
      const m = (last[name] ??= new Map());
      for (const [pid, t] of ticks) if (Number.isFinite(t)) m.set(pid, t);
    }
    return s;
  };
  let poller = null;
  let polling = false;
  const poll = () => {
    if (polling) return;
    polling = true;
    sample()
      .then(remember, () => {})
      .finally(() => (polling = false));
  };
  const samples = new Map();
  const off = subscriber.onEvent((m) => {
    if (m.event !== 'mark') return;
    if (m.k === from) {
      samples.set(from, sample().then(remember));
      poller = setInterval(poll, POLL_MS);
    } else {
      clearInterval(poller);
      samples.set(m.k, sample().then(remember));
    }
  });
  await subscriber.call('marks', { marks: [from, to] });

  /** The figures from the first mark to the `end`-th delivery, whose sample is in `samples`. */
  async function figures(end) {
    const [a, b] = await Promise.all([samples.get(from), samples.get(end)]);
    const [tFrom, tTo] = await Promise.all([
      subscriber.call('timeOf', { k: from }),
      subscriber.call('timeOf', { k: end }),
    ]);
    const n = end - from;
    const cpu = {};
    for (const [name, m] of Object.entries(last)) {
      let ticks = 0;
      for (const [pid, t] of m) {
        const before = a.cpu[name]?.get(pid);
        ticks += t - (Number.isFinite(before) ? before : 0);
      }
      cpu[name] = (ticks * 1e6) / CLK_TCK / n;
    }
    const latency = await subscriber.call('latency', { from, to: end });
    return {
      n,
      rate: (n * 1000) / (tTo - tFrom),
      seconds: (tTo - tFrom) / 1000,
      cpu,
      wal: (b.wal - a.wal) / n,
      latency,
    };
  }

  return {
    from,
    to,
    /** The window's figures; call once the subscriber has counted `to` deliveries. */
    result: () => figures(to),
    /**
     * For a run that did not reach the last mark in its time budget: the figures from the first mark
     * to now (null if the first mark was not reached either).
     */
    async cut() {
      if (!samples.has(from)) return null;
      clearInterval(poller);
      const { count } = await subscriber.call('stats');
      if (count <= from) return null;
      samples.set(count, sample().then(remember));
      return figures(count);
    },
    async close() {
      off();
      clearInterval(poller);
      await client?.end().catch(() => {});
    },
  };
}

/**
 * One steady run: watches the window, calls `begin()` (which starts the work and answers the time
 * the clock starts, e.g. the worker's spawn, plus an optional `finish()` run once the 90 % mark is
 * passed, e.g. to stop an emitter), waits for the 90 % mark and answers the window's figures with
 * `firstMs` (start to first delivery) and the wait's outcome (`done`, `count`, `reason`).
 */
export async function measureSteady(subscriber, total, { groups, db, limits }, begin) {
  const all = { subscriber: () => [subscriber.pid], ...groups };
  const w = await watchWindow(subscriber, total, { groups: all, db });
  try {
    const { start, finish } = await begin();
    const r = await awaitDeliveries(subscriber, w.to, start, limits);
    // A run cut short by its time budget is measured from the first mark to now (before `finish`).
    const cut = r.reason === 'deadline' ? await w.cut() : null;
    const extra = finish ? await finish() : {};
    const window = r.done ? await w.result() : (cut ?? { rate: NaN, cpu: {}, wal: NaN });
    return { ...r, ...window, firstMs: r.firstAfterMs, extra, total, to: w.to };
  } finally {
    await w.close();
  }
}
