// Operators are told of attempts that never reach the subscriber (docs/operators.md, "Refused
// connections"): an address that is private at connect time, a TLS failure, an egress proxy that
// refuses or is down. Each is a warning once per endpoint and reason per interval (not per attempt)
// naming the endpoint and the reason, a count by reason in /metrics, and a count in the console's
// endpoint health. Real servers on 127.0.0.1; the worker retries as usual.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RefusalWarnings } from '../../src/delivery/refusal-warnings.js';
import { refusalOf } from '../../src/net/index.js';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { closedPort, createEndpoint, deliveriesTo, emit } from './support.js';

/** A logger that keeps the lines it writes at warn and above. */
function capturingLogger() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'warn' },
    { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  return { logger, lines };
}

let certDir: string;
beforeAll(() => {
  certDir = mkdtempSync(path.join(tmpdir(), 'hookline-refusals-'));
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      'self.key',
      '-out',
      'self.pem',
      '-days',
      '2',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    { cwd: certDir, stdio: 'pipe' },
  );
});
afterAll(() => rmSync(certDir, { recursive: true, force: true }));

/** An HTTPS subscriber whose certificate nobody trusts: every attempt fails its TLS check. */
async function selfSignedSubscriber(): Promise<{ url: string; server: Server }> {
  const server = createServer(
    { key: readFileSync(path.join(certDir, 'self.key')), cert: readFileSync(path.join(certDir, 'self.pem')) },
    (_req, res) => res.writeHead(200).end(),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, server };
}

interface Case {
  reason: 'ssrf' | 'tls' | 'proxy';
  env: Record<string, string>;
  /** Makes the endpoint that will be refused; answers its id. */
  endpoint(t: TestService): Promise<string>;
}

const receivers: Receiver[] = [];
const servers: Server[] = [];

const CASES: Case[] = [
  {
    reason: 'ssrf',
    env: { HOOKLINE_ALLOW_PRIVATE_NETWORKS: 'false' },
    // Public when created; its address private by the time of the attempts, as after a DNS change.
    endpoint: async (t) => {
      const { id } = await createEndpoint(t, { url: 'https://93.184.216.34/hook', events: ['user.*'] });
      await t.service.ctx.db.run('UPDATE endpoints SET url = $1 WHERE id = $2', [
        `https://127.0.0.1:${await closedPort()}/hook`,
        id,
      ]);
      return id;
    },
  },
  {
    reason: 'tls',
    env: {},
    endpoint: async (t) => {
      const subscriber = await selfSignedSubscriber();
      servers.push(subscriber.server);
      return (await createEndpoint(t, { url: subscriber.url, events: ['user.*'] })).id;
    },
  },
  {
    reason: 'proxy',
    env: { HOOKLINE_EGRESS_PROXY_URL: 'http://127.0.0.1:1' },
    endpoint: async (t) => {
      const r = await startReceiver();
      receivers.push(r);
      return (await createEndpoint(t, { url: r.url, events: ['user.*'] })).id;
    },
  },
];

/** `hookline_delivery_refusals_total` by reason, as /metrics shows it. */
async function refusalMetrics(t: TestService): Promise<Record<string, number>> {
  const text = (await t.call('GET', '/metrics', null)).body;
  const counts: Record<string, number> = {};
  for (const m of text.matchAll(/^hookline_delivery_refusals_total\{reason="(\w+)"\} (\d+)$/gm)) {
    counts[m[1]!] = Number(m[2]);
  }
  return counts;
}

describe.each(STORE_KINDS)('refused connections on %s', (kind) => {
  let t: TestService | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
    for (const r of receivers.splice(0)) await r.close();
    for (const s of servers.splice(0)) s.close();
  });

  it.each(CASES)(
    'a $reason refusal: one warning per endpoint, a count per attempt in /metrics and in endpoint health',
    async ({ reason, env, endpoint }) => {
      const { logger, lines } = capturingLogger();
      // HOOKLINE_MAX_RETRIES=3: each delivery is attempted four times, all refused.
      t = await startTestService(kind, { worker: true, env, logger });
      const id = await endpoint(t);
      expect(await refusalMetrics(t)).toEqual({ ssrf: 0, tls: 0, proxy: 0 });
      await emit(t, 'user.updated', { userId: 'user_1', secret: 'payload-marker' });
      await emit(t, 'user.updated', { userId: 'user_2', secret: 'payload-marker' });
      const rows = await eventually(async () => {
        const all = await deliveriesTo(t!, id);
        return all.length === 2 && all.every((d) => d.status === 'dead') && all;
      });
      const attempts = rows.reduce((n, d) => n + d.attempts, 0);
      expect(attempts).toBe(8);
      expect(refusalOf(rows[0]!.last_error)).toBe(reason);

      const warnings = lines.filter((l) => l.endpoint_id === id && l.reason !== undefined);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({ level: 40, endpoint_id: id, reason });
      expect(JSON.stringify(warnings[0])).not.toContain('payload-marker');

      expect(await refusalMetrics(t)).toEqual({ ssrf: 0, tls: 0, proxy: 0, [reason]: attempts });

      const health = await t.call('GET', '/v1/admin/tenants/acme/endpoints', t.keys.instance_manager);
      const shown = health
        .json<{ data: { id: string; health: { refused: Record<string, number> } }[] }>()
        .data.find((e) => e.id === id)!;
      expect(shown.health.refused).toEqual({ ssrf: 0, tls: 0, proxy: 0, [reason]: attempts });
    },
  );
});

describe('refusal warnings', () => {
  it.each([
    ['ERR_HOOKLINE_BLOCKED_ADDRESS: refusing to connect to 127.0.0.1: it is loopback', 'ssrf'],
    ['TLS: self-signed certificate (DEPTH_ZERO_SELF_SIGNED_CERT)', 'tls'],
    ['egress proxy: answered 403 to CONNECT', 'proxy'],
    ['ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9', null],
    ['HTTP 500', null],
    [null, null],
  ])('%s is %s', (error, reason) => {
    expect(refusalOf(error)).toBe(reason);
  });

  it('warns once per endpoint and reason per interval', () => {
    let now = 0;
    const counted: string[] = [];
    const metrics = { refusals: { inc: ({ reason }: { reason: string }) => counted.push(reason) } };
    const warned: string[] = [];
    const warnings = new RefusalWarnings(
      { metrics, clock: () => now } as unknown as ConstructorParameters<typeof RefusalWarnings>[0],
      1000,
    );
    const attempt = (endpoint: string, error: string) =>
      warnings.observe(
        { ok: false, error },
        endpoint,
        () => ({ warn: () => warned.push(endpoint) }) as never,
      );
    const tls = 'TLS: self-signed certificate (DEPTH_ZERO_SELF_SIGNED_CERT)';
    const proxy = 'egress proxy: answered 403 to CONNECT';
    attempt('a', tls);
    attempt('a', tls);
    attempt('b', tls);
    attempt('a', proxy);
    now = 999;
    attempt('a', tls);
    now = 1000;
    attempt('a', tls);
    attempt('a', 'HTTP 500');
    expect(warned).toEqual(['a', 'b', 'a', 'a']);
    expect(counted).toEqual(['tls', 'tls', 'tls', 'proxy', 'tls', 'tls']);
  });
});
