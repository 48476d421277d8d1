// The process's own figures on /metrics (metrics.ts): right from the first scrape, CPU time is the
// process's whole life, and no figure reads as a placeholder (an empty histogram's 2^63 ns).
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { Metrics } from '../../src/metrics.js';
import { SqliteDb } from '../../src/store/sqlite/sqlite-db.js';
import { startProcess, type RunningProcess } from '../helpers/process.js';
import { testEnv } from '../helpers/service.js';
import { createTestDatabase } from '../helpers/stores.js';

/** The samples of a Prometheus text: name{labels} → value. */
function samples(text: string): Map<string, number> {
  const found = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    found.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return found;
}

/** Figures no healthy process shows: not a number, or a duration of more than a day. */
function absurd(text: string): string[] {
  return [...samples(text)]
    .filter(([name, value]) => {
      if (!Number.isFinite(value)) return true;
      const seconds = /_seconds(_total)?(\{|$)/.test(name) && !name.includes('start_time');
      return seconds && (value < 0 || value > 86_400);
    })
    .map(([name, value]) => `${name} ${value}`);
}

const cpu = (text: string) => samples(text).get('hookline_process_cpu_seconds_total');

/** CPU seconds process `pid` has used, from /proc/<pid>/stat (utime + stime, in ticks of 10 ms). */
function procCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Keeps this thread busy until it has used `seconds` more of CPU. */
function burnCpu(seconds: number): void {
  const start = process.cpuUsage();
  let x = 0;
  for (;;) {
    for (let i = 0; i < 100_000; i++) x += Math.sqrt(i);
    const used = process.cpuUsage(start);
    if ((used.user + used.system) / 1e6 >= seconds && x > 0) return;
  }
}

describe('Metrics in this process', () => {
  it('counts the CPU the process used before the registry existed, and shows no empty-histogram figure', async () => {
    burnCpu(0.2);
    const before = process.cpuUsage();
    const db = new SqliteDb(':memory:');
    const metrics = new Metrics(db, Date.now, true, false);
    // Two scrapes with no event-loop turn between them: the second finds no new delay sample.
    const first = await metrics.text();
    const second = await metrics.text();
    await db.close();
    expect(cpu(first)).toBeGreaterThanOrEqual((before.user + before.system) / 1e6);
    expect(cpu(second)).toBeGreaterThanOrEqual(cpu(first)!);
    expect(absurd(first)).toEqual([]);
    expect(absurd(second)).toEqual([]);
    expect(first).toContain('hookline_process_start_time_seconds');
  });

  it('adds a source’s counters to its own, and keeps its process figures', async () => {
    const db = new SqliteDb(':memory:');
    const main = new Metrics(db, Date.now, true, false);
    const thread = new Metrics(db, Date.now, false, false);
    main.deliveries.inc({ outcome: 'succeeded' }, 2);
    thread.deliveries.inc({ outcome: 'succeeded' }, 3);
    main.addSource(async () => (await thread.registry.getMetricsAsJSON()) as never);
    const text = await main.text();
    await db.close();
    expect(samples(text).get('hookline_delivery_attempts_total{outcome="succeeded"}')).toBe(5);
    // prom-client's own aggregation would drop it ('omit'); only this registry has it.
    expect(samples(text).get('hookline_process_start_time_seconds')).toBeGreaterThan(0);
    expect(absurd(text)).toEqual([]);
  });
});

describe.runIf(process.platform === 'linux')('/metrics of a running process, first scrape', () => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn().catch(() => {});
  });

  // `serve` on SQLite adds its delivery thread's registry; `worker` has one registry.
  it.each([['serve'], ['worker']])('%s: CPU time since the process started', async (role) => {
    const database = await createTestDatabase('sqlite');
    cleanup.push(() => database.drop());
    const running: RunningProcess = await startProcess([role], testEnv(database));
    cleanup.push(() => running.kill('SIGKILL'));
    const pid = running.child.pid!;
    const before = procCpuSeconds(pid);
    const text = await (await fetch(`${running.address}/metrics`)).text();
    const after = procCpuSeconds(pid);
    // Starting a Node process and loading hookline costs far more than one clock tick of CPU: the
    // first scrape must show it, not only what was used since the registry was made.
    expect(before).toBeGreaterThan(0.05);
    expect(cpu(text)).toBeGreaterThanOrEqual(before - 0.02);
    expect(cpu(text)).toBeLessThanOrEqual(after + 0.02);
    expect(absurd(text)).toEqual([]);
  });
});
