// Attempts through an egress proxy (HOOKLINE_EGRESS_PROXY_URL, src/net/egress-proxy.ts), against a real
// CONNECT proxy written here: it sees only IP-literal targets that hookline checked, TLS stays end to
// end with the endpoint's host name, tunnels are reused, a private endpoint is refused before the
// proxy is asked, and a proxy that refuses or is down gives failed, retried attempts saying so.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import net, { type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { Sender, type SenderOptions } from '../../src/delivery/sender.js';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { closedPort, createEndpoint, deadLettersOf, deliveriesOf, emit, verifyRequest } from './support.js';

interface Proxy {
  url: string;
  port: number;
  /** CONNECT targets asked for, in order. */
  targets: string[];
  /** Proxy-Authorization headers received (undefined when absent). */
  authorizations: (string | undefined)[];
  /** TCP connections accepted. */
  connections: number;
  close(): Promise<void>;
}

/** A CONNECT proxy on 127.0.0.1: tunnels to the target asked for, or answers `refuse` to every CONNECT. */
async function startProxy(refuse?: number): Promise<Proxy> {
  const sockets = new Set<Socket>();
  const state = { targets: [] as string[], authorizations: [] as (string | undefined)[], connections: 0 };
  const server: Server = net.createServer((client) => {
    state.connections++;
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => {});
    let head = '';
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      client.off('data', onData);
      const [requestLine, ...lines] = head.slice(0, end).split('\r\n');
      const target = /^CONNECT (\S+) HTTP\/1\.1$/.exec(requestLine!)?.[1] ?? '';
      state.targets.push(target);
      state.authorizations.push(
        lines.find((l) => /^proxy-authorization:/i.test(l))?.replace(/^[^:]+:\s*/, ''),
      );
      if (refuse)
        return void client.end(`HTTP/1.1 ${refuse} Forbidden by policy\r\ncontent-length: 0\r\n\r\n`);
      const at = target.lastIndexOf(':');
      const upstream = net.connect({
        host: target.slice(0, at).replace(/^\[|\]$/g, ''),
        port: Number(target.slice(at + 1)),
      });
      sockets.add(upstream);
      upstream.on('close', () => sockets.delete(upstream));
      upstream.on('error', () => client.destroy());
      upstream.once('connect', () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        client.pipe(upstream).pipe(client);
      });
      client.on('close', () => upstream.destroy());
    };
    client.on('data', onData);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return Object.assign(state, {
    url: `http://127.0.0.1:${port}`,
    port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  });
}

const IP_LITERAL_TARGET = /^(\d{1,3}(\.\d{1,3}){3}|\[[0-9a-f:.]+\]):\d+$/;
const request = (url: string) => ({
  url,
  headers: { 'content-type': 'application/json', 'hook-id': 'msg_proxy' },
  body: '{"type":"user.created","data":{"userId":"user_proxy"}}',
});

// A CA and two leaf certificates for the name `localhost` only (no IP in them), so a delivery that
// checked the certificate against the address the tunnel goes to would fail.
const dir = mkdtempSync(path.join(tmpdir(), 'hookline-proxy-tls-'));
const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
function leaf(name: string, san: string): { key: Buffer; cert: Buffer } {
  openssl('req', '-new', ...EC_KEY, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
  writeFileSync(path.join(dir, `${name}.ext`), `subjectAltName = ${san}\nextendedKeyUsage = serverAuth\n`);
  openssl(
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
    '-out',
    `${name}.pem`,
  );
  return {
    key: readFileSync(path.join(dir, `${name}.key`)),
    cert: readFileSync(path.join(dir, `${name}.pem`)),
  };
}

describe('attempts through an egress proxy', () => {
  let ca: string;
  const cleanups: (() => Promise<void> | void)[] = [];
  beforeAll(() => {
    openssl(
      'req',
      '-x509',
      ...EC_KEY,
      '-keyout',
      'ca.key',
      '-out',
      'ca.pem',
      '-days',
      '2',
      '-subj',
      '/CN=hookline proxy test CA',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign',
    );
    ca = readFileSync(path.join(dir, 'ca.pem'), 'utf8');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  const proxy = async (refuse?: number) => {
    const p = await startProxy(refuse);
    cleanups.push(p.close);
    return p;
  };
  const sender = (options: Partial<SenderOptions>) => {
    const s = new Sender({ timeoutMs: 10_000, allowPrivateNetworks: true, ...options });
    cleanups.push(() => s.close());
    return s;
  };
  /** An http or https subscriber on 127.0.0.1 answering 204; counts requests and the SNI names seen. */
  const subscriber = async (tls?: { key: Buffer; cert: Buffer }) => {
    const seen = { requests: 0, servernames: [] as (string | false | null)[] };
    const handler = (_req: unknown, res: { writeHead(s: number): { end(): void } }) => {
      seen.requests++;
      res.writeHead(204).end();
    };
    const server: HttpServer = tls ? createHttpsServer(tls, handler) : createHttpServer(handler);
    server.on('secureConnection', (s: TLSSocket) => seen.servernames.push(s.servername));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(() => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    });
    return Object.assign(seen, { port: (server.address() as AddressInfo).port });
  };

  it('asks the proxy for the checked address, never the name, with the credentials of the URL, and reuses tunnels', async () => {
    const p = await proxy();
    const sub = await subscriber();
    const s = sender({ egressProxyUrl: `http://hook%40line:p%3Ass@127.0.0.1:${p.port}/` });
    for (let i = 0; i < 6; i++)
      expect(await s.send(request(`http://localhost:${sub.port}/hook`))).toMatchObject({
        ok: true,
        status: 204,
      });
    expect(sub.requests).toBe(6);
    expect(p.targets.length).toBeGreaterThan(0);
    for (const target of p.targets) {
      expect(target).toMatch(IP_LITERAL_TARGET);
      expect(target).toBe(`127.0.0.1:${sub.port}`);
    }
    expect(p.authorizations[0]).toBe(`Basic ${Buffer.from('hook@line:p:ss').toString('base64')}`);
    // A tunnel carries attempt after attempt, as a direct connection does.
    expect(p.connections).toBeLessThanOrEqual(2);
  });

  it('keeps TLS end to end: SNI and the certificate check use the endpoint host name, trusting HOOKLINE_CA_FILE', async () => {
    const p = await proxy();
    const sub = await subscriber(leaf('named', 'DNS:localhost'));
    const s = sender({ egressProxyUrl: p.url, extraCaCertificates: ca });
    expect(await s.send(request(`https://localhost:${sub.port}/hook`))).toMatchObject({
      ok: true,
      status: 204,
    });
    expect(p.targets).toEqual([`127.0.0.1:${sub.port}`]);
    expect(sub.servernames).toEqual(['localhost']);
    // Without the test CA, the same subscriber is refused like any unknown issuer.
    const untrusting = sender({ egressProxyUrl: p.url });
    const refused = await untrusting.send(request(`https://localhost:${sub.port}/hook`));
    expect(refused).toMatchObject({ ok: false, status: null });
    expect(refused.error).toMatch(
      /^TLS: .*\((UNABLE_TO_GET_ISSUER_CERT_LOCALLY|UNABLE_TO_VERIFY_LEAF_SIGNATURE)\)$/,
    );
  });

  it('a certificate for another name fails through the proxy as it does directly', async () => {
    const p = await proxy();
    const sub = await subscriber(leaf('other', 'DNS:elsewhere.example'));
    const s = sender({ egressProxyUrl: p.url, extraCaCertificates: ca });
    const result = await s.send(request(`https://localhost:${sub.port}/hook`));
    expect(result).toMatchObject({ ok: false, status: null });
    expect(result.error).toBe('TLS: the certificate is not for localhost (ERR_TLS_CERT_ALTNAME_INVALID)');
    expect(sub.requests).toBe(0);
  });

  it('a private endpoint address is refused before the proxy is asked (the proxy itself may be private)', async () => {
    const p = await proxy();
    const sub = await subscriber();
    const s = sender({ egressProxyUrl: p.url, allowPrivateNetworks: false });
    for (const url of [
      `http://localhost:${sub.port}/hook`,
      `http://127.0.0.1:${sub.port}/hook`,
      `http://[::1]:${sub.port}/`,
    ]) {
      const result = await s.send(request(url));
      expect(result).toMatchObject({ ok: false, status: null });
      expect(result.error).toMatch(/^ERR_HOOKLINE_BLOCKED_ADDRESS: refusing to connect to /);
    }
    expect(p.connections).toBe(0);
    expect(sub.requests).toBe(0);
  });

  it('a proxy that refuses or is down is a failed attempt whose reason starts "egress proxy: "', async () => {
    const sub = await subscriber();
    const refusing = await proxy(403);
    const refused = await sender({ egressProxyUrl: refusing.url }).send(
      request(`http://localhost:${sub.port}/`),
    );
    expect(refused).toMatchObject({
      ok: false,
      status: null,
      error: `egress proxy: answered 403 to CONNECT 127.0.0.1:${sub.port}`,
    });
    const down = await sender({ egressProxyUrl: `http://127.0.0.1:${await closedPort()}` }).send(
      request(`http://localhost:${sub.port}/`),
    );
    expect(down).toMatchObject({ ok: false, status: null });
    expect(down.error).toMatch(/^egress proxy: ECONNREFUSED: connect ECONNREFUSED 127\.0\.0\.1:\d+$/);
    expect(sub.requests).toBe(0);
  });

  it('an invalid HOOKLINE_EGRESS_PROXY_URL stops start-up naming the variable, never repeating a password', () => {
    const base = { HOOKLINE_ENCRYPTION_KEY: Buffer.alloc(32, 1).toString('base64') };
    for (const value of [
      'not a url',
      'https://proxy.internal:3128',
      'socks5://proxy.internal:1080',
      'http://user:secretword@proxy.internal',
      'http://proxy.internal:3128/path',
      'http://proxy.internal:3128/?q=1',
    ]) {
      let error: unknown;
      try {
        loadConfig({ ...base, HOOKLINE_EGRESS_PROXY_URL: value });
      } catch (err) {
        error = err;
      }
      expect(error, value).toBeInstanceOf(ConfigError);
      expect(String((error as Error).message)).toContain('HOOKLINE_EGRESS_PROXY_URL');
      expect(String((error as Error).message)).not.toContain('secretword');
    }
    expect(
      loadConfig({ ...base, HOOKLINE_EGRESS_PROXY_URL: ' http://u:p@10.0.0.5:3128 ' }).egressProxyUrl,
    ).toBe('http://u:p@10.0.0.5:3128/');
    expect(loadConfig(base).egressProxyUrl).toBeNull();
  });
});

describe.each(STORE_KINDS)('deliveries through an egress proxy on %s', (kind) => {
  let t: TestService | undefined;
  let r: Receiver | undefined;
  const proxies: Proxy[] = [];
  afterEach(async () => {
    await t?.close();
    await r?.close();
    for (const p of proxies.splice(0)) await p.close();
    t = r = undefined;
  });

  it('a delivery goes through the proxy, signed as ever', async () => {
    const p = await startProxy();
    proxies.push(p);
    r = await startReceiver(() => ({ status: 200 }));
    t = await startTestService(kind, { worker: true, env: { HOOKLINE_EGRESS_PROXY_URL: p.url } });
    const endpoint = await createEndpoint(t, {
      url: r.url.replace('127.0.0.1', 'localhost'),
      events: ['user.*'],
    });
    const hookId = await emit(t, 'user.created', { userId: 'user_via_proxy' });
    await r.waitFor(1, 10_000);
    verifyRequest(r.requests[0]!, endpoint.signing_secret);
    const port = new URL(r.url).port;
    expect(p.targets.every((target) => target === `127.0.0.1:${port}`)).toBe(true);
    await eventually(async () => (await deliveriesOf(t!, hookId))[0]?.status === 'succeeded');
  });

  it.each([
    ['refuses', 403, /^egress proxy: answered 403 to CONNECT 127\.0\.0\.1:\d+$/],
    ['is down', 0, /^egress proxy: ECONNREFUSED: /],
  ])(
    'a proxy that %s gives retried attempts with the reason, then a dead letter',
    async (_name, refuse, reason) => {
      let proxyUrl: string;
      if (refuse) {
        const p = await startProxy(refuse);
        proxies.push(p);
        proxyUrl = p.url;
      } else proxyUrl = `http://127.0.0.1:${await closedPort()}`;
      r = await startReceiver(() => ({ status: 200 }));
      t = await startTestService(kind, {
        worker: true,
        env: { HOOKLINE_EGRESS_PROXY_URL: proxyUrl, HOOKLINE_MAX_RETRIES: '2' },
      });
      await createEndpoint(t, { url: r.url, events: ['user.*'] });
      const hookId = await emit(t, 'user.created', { userId: 'user_proxy_fails' });
      const row = await eventually(async () =>
        (await deliveriesOf(t!, hookId)).find((d) => d.status === 'dead'),
      );
      expect(row.attempts).toBe(3);
      expect(row.last_status).toBeNull();
      expect(row.last_error).toMatch(reason);
      const [letter] = await deadLettersOf(t, hookId);
      expect(letter!.last_error).toMatch(reason);
      if (refuse) expect(proxies[0]!.targets).toHaveLength(3);
      expect(r.requests).toHaveLength(0);
    },
  );
});
