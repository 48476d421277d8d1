// Child processes of the benchmark: forking the bench's own roles (with an IPC request/answer
// channel), spawning hookline's CLI, and making sure every child dies and every temporary thing is
// removed when the run ends — normally, on an error, or on Ctrl-C.
import { fork, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { sleep } from './stats.js';

const live = new Set();
const cleanups = [];

/** Registers an async clean-up (drop a schema, remove a directory); run in reverse order at the end. */
export function onCleanup(fn) {
  cleanups.push(fn);
  return () => {
    const i = cleanups.indexOf(fn);
    if (i >= 0) cleanups.splice(i, 1);
  };
}

export function killAll() {
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
  live.clear();
}

export async function cleanupAll() {
  killAll();
  while (cleanups.length) {
    const fn = cleanups.pop();
    try {
      await fn();
    } catch (err) {
      process.stderr.write(`clean-up failed: ${err.message}\n`);
    }
  }
}

/** Kills children and cleans up on signals and crashes; `exit` only gets the synchronous part. */
export function installExitHandlers() {
  let stopping = false;
  const stop = async (code, why) => {
    if (stopping) return;
    stopping = true;
    if (why) process.stderr.write(`\n${why}: stopping children and cleaning up\n`);
    await cleanupAll();
    process.exit(code);
  };
  process.on('SIGINT', () => void stop(130, 'SIGINT'));
  process.on('SIGTERM', () => void stop(143, 'SIGTERM'));
  process.on('uncaughtException', (err) => {
    process.stderr.write(`${err.stack ?? err}\n`);
    void stop(1);
  });
  process.on('unhandledRejection', (err) => {
    process.stderr.write(`${err?.stack ?? err}\n`);
    void stop(1);
  });
  process.on('exit', killAll);
}

function track(child, name) {
  live.add(child);
  let stderr = '';
  child.stderr?.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  child.exited = new Promise((resolve) =>
    child.on('exit', (code, signal) => {
      live.delete(child);
      resolve({ code, signal });
    }),
  );
  child.benchName = name;
  child.stderrTail = () => stderr.trim().split('\n').slice(-5).join('\n');
  return child;
}

/** Stops a child: SIGTERM, then SIGKILL if it has not exited after `graceMs`. */
export async function stop(child, graceMs = 3000) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await child.exited;
  clearTimeout(timer);
}

/**
 * Forks one of the bench's role modules (bench/lib/<role>.js) with `options` as its argument and an
 * IPC channel. `child.call(cmd, args)` sends a request and resolves with the child's answer;
 * `child.onEvent(fn)` receives the child's unsolicited messages (progress, ready).
 */
export function forkRole(moduleUrl, options, { execArgv = [] } = {}) {
  const file = fileURLToPath(moduleUrl);
  const child = track(
    fork(file, [JSON.stringify(options)], { stdio: ['ignore', 'inherit', 'pipe', 'ipc'], execArgv }),
    file.split('/').pop(),
  );
  const pending = new Map();
  const listeners = new Set();
  let nextId = 1;
  child.on('message', (msg) => {
    if (msg && msg.replyTo !== undefined) {
      const p = pending.get(msg.replyTo);
      pending.delete(msg.replyTo);
      if (!p) return;
      if (msg.error) p.reject(new Error(`${child.benchName}: ${msg.error}`));
      else p.resolve(msg.result);
    } else {
      for (const fn of listeners) fn(msg);
    }
  });
  child.exited.then(({ code, signal }) => {
    for (const p of pending.values())
      p.reject(new Error(`${child.benchName} exited (${signal ?? code}): ${child.stderrTail()}`));
    pending.clear();
  });
  child.call = (cmd, args = {}) =>
    new Promise((resolve, reject) => {
      if (!child.connected) return reject(new Error(`${child.benchName} is not running`));
      const id = nextId++;
      pending.set(id, { resolve, reject });
      child.send({ id, cmd, args });
    });
  child.onEvent = (fn) => {
    listeners.add(fn);
    return () => listeners.delete(fn);
  };
  /** Resolves with the first event for which `predicate` is true. */
  child.waitEvent = (predicate) =>
    new Promise((resolve, reject) => {
      const off = child.onEvent((msg) => {
        if (predicate(msg)) {
          off();
          resolve(msg);
        }
      });
      child.exited.then(({ code, signal }) =>
        reject(new Error(`${child.benchName} exited (${signal ?? code}): ${child.stderrTail()}`)),
      );
    });
  return child;
}

/**
 * Child side: the role's options (parsed), and a loop that answers the orchestrator's requests with
 * `handlers[cmd](args)`. The child exits when the orchestrator goes away.
 */
export function childOptions() {
  return JSON.parse(process.argv[2] ?? '{}');
}

export function serveRequests(handlers) {
  process.on('message', async ({ id, cmd, args }) => {
    try {
      const handler = handlers[cmd];
      if (!handler) throw new Error(`unknown command ${cmd}`);
      process.send({ replyTo: id, result: (await handler(args)) ?? null });
    } catch (err) {
      process.send({ replyTo: id, error: err?.stack ?? String(err) });
    }
  });
  process.on('disconnect', () => process.exit(0));
}

export const isMain = (moduleUrl) => process.argv[1] === fileURLToPath(moduleUrl);

const HOOKLINE_BIN = fileURLToPath(new URL('../../packages/hookline/bin/hookline.js', import.meta.url));

/** Starts a long-running hookline command (serve, worker); stderr is kept for error messages. */
export function spawnHookline(args, env) {
  // BENCH_CPU_PROF=<dir> profiles each hookline process (node --cpu-prof) for reading off what limits it.
  const profile = process.env.BENCH_CPU_PROF
    ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`]
    : [];
  // BENCH_NODE_ARGS adds Node or V8 flags to each hookline process, for trying them side by side.
  const nodeArgs = process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  const child = spawn(process.execPath, [...profile, ...nodeArgs, HOOKLINE_BIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  return track(child, `hookline ${args.join(' ')}`);
}

/** Runs a one-shot hookline command (migrate, keys create) and resolves with its stdout. */
export async function runHookline(args, env) {
  const child = spawn(process.execPath, [HOOKLINE_BIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  track(child, `hookline ${args.join(' ')}`);
  let stdout = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  const { code, signal } = await child.exited;
  if (code !== 0)
    throw new Error(`hookline ${args.join(' ')} failed (${signal ?? code}): ${child.stderrTail()}`);
  return stdout.trim();
}

/** A TCP port that was free a moment ago on 127.0.0.1. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Polls `url` until it answers 200; fails if `child` exits first or `timeoutMs` passes. */
export async function waitHttpOk(url, { child, timeoutMs = 30_000 } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child && (child.exitCode !== null || child.signalCode !== null))
      throw new Error(`${child.benchName} exited before ${url} was ready: ${child.stderrTail()}`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${url} not ready after ${timeoutMs} ms`);
    await sleep(50);
  }
}

/** Reads one field (kB) of /proc/<pid>/status, in MB; NaN when the process is gone. */
function procStatusMb(pid, field) {
  try {
    const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/**
 * Watches the memory of some processes: VmHWM (the kernel's high-water mark of resident memory) read
 * at the end, plus VmRSS sampled every `intervalMs` in case a process has exited by then.
 */
export function watchMemory(children, intervalMs = 250) {
  const peak = new Map(children.map((c) => [c.pid, 0]));
  const sample = () => {
    for (const c of children) {
      const mb = Math.max(procStatusMb(c.pid, 'VmHWM'), procStatusMb(c.pid, 'VmRSS'));
      if (mb > peak.get(c.pid)) peak.set(c.pid, mb);
    }
  };
  sample();
  const timer = setInterval(sample, intervalMs);
  return {
    /** Peak resident MB per process (in the order given) after a last sample. */
    stop() {
      sample();
      clearInterval(timer);
      return children.map((c) => peak.get(c.pid));
    },
    current: () => children.map((c) => procStatusMb(c.pid, 'VmRSS')),
  };
}
