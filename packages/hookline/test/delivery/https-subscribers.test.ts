// Deliveries to https:// subscribers on 127.0.0.1, with certificates from a CA this test creates with
// the openssl CLI: trusted through HOOKLINE_CA_FILE they succeed; self-signed, expired and wrong-host
// certificates are failed attempts with a TLS last_error; nothing switches the checks off, not even
// NODE_TLS_REJECT_UNAUTHORIZED=0 (docs/security.md, "Certificates of subscribers").
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import type { DeliveryRow } from '../../src/store/deliveries.js';
import { eventually, type ReceivedRequest } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { createEndpoint, deliveriesTo, emit, verifyRequest } from './support.js';

type Subscriber = 'trusted' | 'expired' | 'wrongHost' | 'selfSigned';

const dir = mkdtempSync(path.join(tmpdir(), 'hookline-tls-'));
const file = (name: string) => path.join(dir, name);
const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** A CA, and leaf certificates it signs; `openssl ca` because only it sets arbitrary validity dates. */
function makeCertificates(): void {
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
    '/CN=hookline test CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign',
  );
  writeFileSync(
    file('ca.cnf'),
    '[ca]\ndefault_ca = test\n[test]\ndatabase = index.txt\nnew_certs_dir = .\nserial = serial\n' +
      'default_md = sha256\npolicy = any\nunique_subject = no\n[any]\ncommonName = supplied\n',
  );
  writeFileSync(file('index.txt'), '');
  writeFileSync(file('serial'), '01\n');
  const leaf = (name: string, san: string, start: string, end: string) => {
    openssl(
      'req',
      '-new',
      ...EC_KEY,
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.csr`,
      '-subj',
      `/CN=${name}`,
    );
    writeFileSync(
      file(`${name}.ext`),
      `subjectAltName = ${san}\nbasicConstraints = CA:FALSE\nextendedKeyUsage = serverAuth\n`,
    );
    openssl(
      'ca',
      '-batch',
      '-notext',
      '-config',
      'ca.cnf',
      '-cert',
      'ca.pem',
      '-keyfile',
      'ca.key',
      '-in',
      `${name}.csr`,
      '-out',
      `${name}.pem`,
      '-extfile',
      `${name}.ext`,
      '-startdate',
      start,
      '-enddate',
      end,
    );
  };
  leaf('trusted', 'IP:127.0.0.1', '20200101000000Z', '20991231000000Z');
  leaf('expired', 'IP:127.0.0.1', '20200101000000Z', '20200102000000Z');
  leaf('wrongHost', 'DNS:elsewhere.example', '20200101000000Z', '20991231000000Z');
  openssl(
    'req',
    '-x509',
    ...EC_KEY,
    '-keyout',
    'selfSigned.key',
    '-out',
    'selfSigned.pem',
    '-days',
    '2',
    '-subj',
    '/CN=127.0.0.1',
    '-addext',
    'subjectAltName=IP:127.0.0.1',
  );
}

interface HttpsSubscriber {
  url: string;
  requests: ReceivedRequest[];
  server: Server;
}

async function startHttpsSubscriber(name: Subscriber): Promise<HttpsSubscriber> {
  const requests: ReceivedRequest[] = [];
  const server = createServer(
    { key: readFileSync(file(`${name}.key`)), cert: readFileSync(file(`${name}.pem`)) },
    (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        requests.push({
          method: req.method ?? '',
          path: req.url ?? '',
          headers: req.headers,
          body: Buffer.concat(chunks).toString('utf8'),
          at: Date.now(),
          remotePort: req.socket.remotePort ?? 0,
        });
        res.writeHead(200).end();
      });
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `https://127.0.0.1:${port}/hook`, requests, server };
}

const NAMES: Subscriber[] = ['trusted', 'expired', 'wrongHost', 'selfSigned'];
const subscribers = {} as Record<Subscriber, HttpsSubscriber>;

beforeAll(async () => {
  makeCertificates();
  for (const name of NAMES) subscribers[name] = await startHttpsSubscriber(name);
});

afterAll(async () => {
  for (const s of Object.values(subscribers)) await new Promise((r) => s.server.close(r));
  rmSync(dir, { recursive: true, force: true });
});

/** What a certificate a delivery must not trust leaves in last_error: the reason, said plainly. */
const REFUSED: Record<Exclude<Subscriber, 'trusted'>, RegExp> = {
  expired: /^TLS: certificate has expired \(CERT_HAS_EXPIRED\)$/,
  // Not the certificate's own names: those are the subscriber's words, never stored in clear.
  wrongHost: /^TLS: the certificate is not for 127\.0\.0\.1 \(ERR_TLS_CERT_ALTNAME_INVALID\)$/,
  selfSigned: /^TLS: self[- ]signed certificate \(DEPTH_ZERO_SELF_SIGNED_CERT\)$/,
};

describe.each(STORE_KINDS)('https subscribers on %s', (kind) => {
  let t: TestService | undefined;
  const savedReject = process.env.NODE_TLS_REJECT_UNAUTHORIZED;
  afterEach(async () => {
    await t?.close();
    t = undefined;
    if (savedReject === undefined) delete process.env.NODE_TLS_REJECT_UNAUTHORIZED;
    else process.env.NODE_TLS_REJECT_UNAUTHORIZED = savedReject;
    for (const s of Object.values(subscribers)) s.requests.length = 0;
  });

  /** One event to an endpoint at each subscriber; answers each endpoint's delivery once finished. */
  async function deliverToEach(service: TestService) {
    const endpoints = {} as Record<Subscriber, { id: string; signing_secret: string }>;
    for (const name of NAMES)
      endpoints[name] = await createEndpoint(service, { url: subscribers[name].url, events: ['user.*'] });
    await emit(service, 'user.deactivated', { userId: 'user_tls' });
    const rows = {} as Record<Subscriber, DeliveryRow>;
    for (const name of NAMES) {
      rows[name] = await eventually(async () => {
        const [row] = await deliveriesTo(service, endpoints[name].id);
        return row && ['succeeded', 'dead'].includes(row.status) && row;
      });
    }
    return { endpoints, rows };
  }

  /** last_error as operators read it (docs/contract.md §4.3), whatever the store keeps. */
  async function lastError(service: TestService, endpointId: string): Promise<string> {
    const res = await service.call(
      'GET',
      `/v1/admin/dead-letters?endpoint_id=${endpointId}`,
      service.keys.instance_manager,
    );
    expect(res.statusCode, res.body).toBe(200);
    const { data } = res.json<{ data: { last_error: string }[] }>();
    expect(data).toHaveLength(1);
    return data[0]!.last_error;
  }

  it.each([
    ['', undefined],
    // The variable Node reads to skip verification wherever a connection does not say otherwise.
    [' with NODE_TLS_REJECT_UNAUTHORIZED=0', '0'],
  ])(
    'the HOOKLINE_CA_FILE CA is trusted; expired, wrong-host and self-signed certificates are refused%s',
    async (_, reject) => {
      if (reject !== undefined) process.env.NODE_TLS_REJECT_UNAUTHORIZED = reject;
      t = await startTestService(kind, {
        worker: true,
        env: { HOOKLINE_CA_FILE: file('ca.pem'), HOOKLINE_MAX_RETRIES: '0' },
      });

      const { endpoints, rows } = await deliverToEach(t);

      expect(rows.trusted).toMatchObject({ status: 'succeeded', last_status: 200, last_error: null });
      expect(subscribers.trusted.requests).toHaveLength(1);
      verifyRequest(subscribers.trusted.requests[0]!, endpoints.trusted.signing_secret);
      for (const name of ['expired', 'wrongHost', 'selfSigned'] as const) {
        // A failed attempt like any other (here the only one allowed): no answer, and why.
        expect(rows[name], name).toMatchObject({ status: 'dead', attempts: 1, last_status: null });
        expect(await lastError(t, endpoints[name].id), name).toMatch(REFUSED[name]);
        expect(subscribers[name].requests, name).toHaveLength(0);
      }
    },
  );

  it('without HOOKLINE_CA_FILE a certificate of that CA is refused like any unknown issuer', async () => {
    t = await startTestService(kind, { worker: true, env: { HOOKLINE_MAX_RETRIES: '0' } });

    const { endpoints, rows } = await deliverToEach(t);

    expect(rows.trusted).toMatchObject({ status: 'dead', last_status: null });
    expect(await lastError(t, endpoints.trusted.id)).toBe(
      'TLS: unable to verify the first certificate (UNABLE_TO_VERIFY_LEAF_SIGNATURE)',
    );
    expect(subscribers.trusted.requests).toHaveLength(0);
  });

  it('no endpoint setting turns certificate checks off', async () => {
    t = await startTestService(kind);
    const { id } = await createEndpoint(t, { url: subscribers.selfSigned.url, events: ['*'] });
    for (const field of ['insecure', 'tls_verify', 'verify_tls', 'rejectUnauthorized', 'skip_tls_verify']) {
      const value = field.includes('verify') || field === 'rejectUnauthorized' ? false : true;
      const created = await t.call('POST', '/v1/webhooks', t.keys.tenant, {
        url: subscribers.selfSigned.url,
        events: ['*'],
        [field]: value,
      });
      expect(created.statusCode, `${field}: ${created.body}`).toBe(400);
      const patched = await t.call('PATCH', `/v1/webhooks/${id}`, t.keys.tenant, { [field]: value });
      expect(patched.statusCode, `${field}: ${patched.body}`).toBe(400);
    }
  });
});

describe('HOOKLINE_CA_FILE', () => {
  it('holds the PEM certificates of the file', () => {
    const config = loadConfig({ HOOKLINE_CA_FILE: file('ca.pem') });
    expect(config.extraCaCertificates).toBe(readFileSync(file('ca.pem'), 'utf8').trim());
    expect(loadConfig({}).extraCaCertificates).toBeNull();
  });

  it('a missing file, one without certificates, or a broken certificate stops start-up naming the variable', () => {
    writeFileSync(file('empty.pem'), 'nothing here\n');
    writeFileSync(file('broken.pem'), '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
    expect(() => loadConfig({ HOOKLINE_CA_FILE: file('missing.pem') })).toThrow(
      /^HOOKLINE_CA_FILE: cannot read/,
    );
    expect(() => loadConfig({ HOOKLINE_CA_FILE: file('empty.pem') })).toThrow(
      /^HOOKLINE_CA_FILE: .* holds no PEM certificate/,
    );
    expect(() => loadConfig({ HOOKLINE_CA_FILE: file('broken.pem') })).toThrow(
      /^HOOKLINE_CA_FILE: certificate 1 of .* is not valid/,
    );
  });
});
