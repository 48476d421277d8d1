// Runs the real `hookline` command (the built bin) as a child process.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../bin/hookline.js');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a one-shot command to completion. */
export async function runCli(args: string[], env: Record<string, string>, cwd?: string): Promise<CliResult> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [BIN, ...args], {
      env: { PATH: process.env.PATH ?? '', ...env },
      cwd,
      timeout: 30_000,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/** `hookline keys create`, once per role: a tenant key for `acme` and a producer key. */
export async function createApiKeys(
  env: Record<string, string>,
): Promise<{ tenantKey: string; producerKey: string }> {
  const tenantKey = (
    await runCli(['keys', 'create', '--role', 'tenant', '--tenant', 'acme'], env)
  ).stdout.trim();
  const producerKey = (await runCli(['keys', 'create', '--role', 'producer'], env)).stdout.trim();
  return { tenantKey, producerKey };
}

/** POST a JSON body with a bearer key to a running hookline process (`address` as it logged it). */
export function postJson(address: string, path: string, key: string, body: unknown): Promise<Response> {
  return fetch(`${address}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

export interface RunningProcess {
  child: ChildProcess;
  /** The HTTP address it logged once listening. */
  address: string;
  output(): string;
  kill(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts `serve` or `worker` and resolves once it logs its listening address. */
export async function startProcess(args: string[], env: Record<string, string>): Promise<RunningProcess> {
  const child = spawn(process.execPath, [BIN, ...args], {
    // Info level at least: the listening address is read from the log.
    env: { PATH: process.env.PATH ?? '', ...env, HOOKLINE_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const address = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line within 20 s:\n${output}`)), 20_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /"address":"(http:\/\/[^"]+)"/.exec(output);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${code} before listening:\n${output}`));
    });
  });
  return {
    child,
    address,
    output: () => output,
    kill: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
