// The limits of docs/contract.md §4.1 (url, description, events) and the URL policy of §3
// (HOOKLINE_ALLOW_PRIVATE_NETWORKS), on create and on patch.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { createEndpoint, expectEndpoint, expectError } from './support.js';
import { SPEC_EVENTS as ALL_EVENT_NAMES } from '../helpers/spec-catalogue.js';

const INVALID_FILTERS = [
  'organizationInvitation.*',
  'connection.*',
  'org*',
  'user.exploded',
  'User.created',
  'user.created ',
  ' *',
  '**',
  'user.**',
  'user.',
  'user',
  'organization.auth_policy.*',
  '',
];

/** A URL of exactly `length` characters. */
function urlOfLength(length: number): string {
  const base = 'https://hooks.example.com/';
  return base + 'a'.repeat(length - base.length);
}

describe.each(STORE_KINDS)('webhook endpoint limits on %s', (kind) => {
  let t: TestService;
  let id: string;
  beforeAll(async () => {
    t = await startTestService(kind);
    id = (await createEndpoint(t)).id;
  });
  afterAll(async () => t.close());

  const create = (body: unknown) => t.call('POST', '/v1/webhooks', t.keys.tenant, body);
  const patch = (body: unknown) => t.call('PATCH', `/v1/webhooks/${id}`, t.keys.tenant, body);

  async function expectUnchanged() {
    const got = expectEndpoint(await t.call('GET', `/v1/webhooks/${id}`, t.keys.tenant));
    expect(got).toMatchObject({ url: 'https://hooks.example.com/in', events: ['*'], description: '' });
  }

  it('takes rate_limit 1-10,000 or null on create and patch, and refuses anything else with 400', async () => {
    expect((await createEndpoint(t, { rate_limit: 1 })).rate_limit).toBe(1);
    expect((await createEndpoint(t, { rate_limit: 10_000 })).rate_limit).toBe(10_000);
    expect((await createEndpoint(t, { rate_limit: null })).rate_limit).toBeNull();
    expect((await createEndpoint(t)).rate_limit).toBeNull();
    for (const bad of [0, -1, 10_001, 1.5, '10', true, [], {}, 1e300]) {
      expectError(
        await create({ url: 'https://hooks.example.com/in', events: ['*'], rate_limit: bad }),
        400,
        'validation_failed',
      );
      expectError(await patch({ rate_limit: bad }), 400, 'validation_failed');
    }
    await expectUnchanged();
    const limited = expectEndpoint(await patch({ rate_limit: 20 }));
    expect(limited.rate_limit).toBe(20);
    expect(expectEndpoint(await t.call('GET', `/v1/webhooks/${id}`, t.keys.tenant)).rate_limit).toBe(20);
    expect(expectEndpoint(await patch({ rate_limit: null })).rate_limit).toBeNull();
    await expectUnchanged();
  });

  it('accepts a url of 2048 characters and refuses 2049 with 400', async () => {
    const longest = urlOfLength(2048);
    expect((await createEndpoint(t, { url: longest })).url).toBe(longest);
    expectError(await create({ url: urlOfLength(2049), events: ['*'] }), 400, 'validation_failed');
    expectError(await patch({ url: urlOfLength(2049) }), 400, 'validation_failed');
    await expectUnchanged();
  });

  it('refuses a url that only grows past 2048 characters once percent-encoded', async () => {
    // 1000 × "é" is 1000 characters as sent but 6000 once the URL is normalised and stored.
    const url = `https://hooks.example.com/${'é'.repeat(1000)}`;
    expect(url.length).toBeLessThanOrEqual(2048);
    expectError(await create({ url, events: ['*'] }), 400, 'invalid_url');
    expectError(await patch({ url }), 400, 'invalid_url');
    await expectUnchanged();
  });

  it('accepts a description of 1024 characters and refuses 1025 with 400', async () => {
    expect((await createEndpoint(t, { description: 'd'.repeat(1024) })).description).toBe('d'.repeat(1024));
    // 1024 astral characters are 2048 UTF-16 units: the limit counts characters.
    expect((await createEndpoint(t, { description: '😀'.repeat(1024) })).description).toBe('😀'.repeat(1024));
    expectError(
      await create({ url: 'https://a.example/', events: ['*'], description: 'd'.repeat(1025) }),
      400,
    );
    expectError(await patch({ description: 'd'.repeat(1025) }), 400, 'validation_failed');
    await expectUnchanged();
  });

  it('refuses an empty events list with 400 validation_failed', async () => {
    const res = await create({ url: 'https://a.example/', events: [] });
    expectError(res, 400, 'validation_failed');
    expect((res.json() as { error: { message: string } }).error.message).toContain('events');
    expectError(await patch({ events: [] }), 400, 'validation_failed');
    await expectUnchanged();
  });

  it('accepts 50 events and refuses 51 with 400', async () => {
    const fifty = [...ALL_EVENT_NAMES, ...ALL_EVENT_NAMES].slice(0, 50);
    const created = await createEndpoint(t, { events: fifty });
    // Repeats are stored once.
    expect(created.events).toEqual(ALL_EVENT_NAMES);
    const fiftyOne = [...fifty, 'user.*'];
    expectError(await create({ url: 'https://a.example/', events: fiftyOne }), 400, 'validation_failed');
    expectError(await patch({ events: fiftyOne }), 400, 'validation_failed');
    await expectUnchanged();
  });

  it('accepts every catalogue event name', async () => {
    expect((await createEndpoint(t, { events: ALL_EVENT_NAMES })).events).toEqual(ALL_EVENT_NAMES);
  });

  it.each(INVALID_FILTERS)('refuses the filter %j with 400 invalid_event_filter', async (filter) => {
    const res = await create({ url: 'https://a.example/', events: ['user.created', filter] });
    expectError(res, 400, 'invalid_event_filter');
    expect((res.json() as { error: { message: string } }).error.message).toContain(JSON.stringify(filter));
    expectError(await patch({ events: [filter] }), 400, 'invalid_event_filter');
    await expectUnchanged();
  });

  it.each([[[1]], [[null]], ['*'], [{}], [[['*']]]])('refuses events: %j with 400', async (events) => {
    expectError(await create({ url: 'https://a.example/', events }), 400, 'validation_failed');
  });

  it.each([
    ['not a url', 'invalid_url'],
    ['/relative/path', 'invalid_url'],
    ['ftp://files.example.com/', 'invalid_url'],
    ['javascript:alert(1)', 'invalid_url'],
    ['https://user:pass@hooks.example.com/', 'invalid_url'],
    [' https://hooks.example.com/', 'invalid_url'],
    ['https://hooks.example.com/\nx', 'invalid_url'],
    ['', 'validation_failed'],
  ])('refuses url %j with 400 %s', async (url, code) => {
    expectError(await create({ url, events: ['*'] }), 400, code);
    expectError(await patch({ url }), 400, code);
    await expectUnchanged();
  });

  it('accepts plain http:// and private addresses when private networks are allowed (the test default)', async () => {
    for (const url of [
      'http://127.0.0.1:9/x',
      'https://10.0.0.1/',
      'https://[::1]/',
      'http://localhost:8080/',
    ]) {
      expect((await createEndpoint(t, { url })).url).toBe(url);
    }
  });
});

describe.each(STORE_KINDS)('URL policy with HOOKLINE_ALLOW_PRIVATE_NETWORKS=false on %s', (kind) => {
  let t: TestService;
  let id: string;
  beforeAll(async () => {
    t = await startTestService(kind, { env: { HOOKLINE_ALLOW_PRIVATE_NETWORKS: 'false' } });
    id = (await createEndpoint(t, { url: 'https://93.184.216.34/hook' })).id;
  });
  afterAll(async () => t.close());

  it.each([
    'http://93.184.216.34/hook',
    'https://10.0.0.1/',
    'https://172.16.5.4/',
    'https://192.168.1.1/',
    'https://127.0.0.1/',
    'https://127.1.2.3:8443/x',
    'https://2130706433/',
    'https://0x7f.1/',
    'https://[::1]/',
    'https://[::ffff:127.0.0.1]/',
    'https://[::ffff:10.0.0.1]/',
    'https://[fe80::1]/',
    'https://[fd00::1]/',
    'https://169.254.169.254/latest/meta-data',
    'https://100.64.0.1/',
    'https://0.0.0.0/',
    'https://[::]/',
    'https://224.0.0.1/',
    'https://localhost/',
    'https://api.localhost/',
  ])('refuses %s with 400 url_not_allowed on create and patch', async (url) => {
    expectError(
      await t.call('POST', '/v1/webhooks', t.keys.tenant, { url, events: ['*'] }),
      400,
      'url_not_allowed',
    );
    expectError(await t.call('PATCH', `/v1/webhooks/${id}`, t.keys.tenant, { url }), 400, 'url_not_allowed');
    const got = expectEndpoint(await t.call('GET', `/v1/webhooks/${id}`, t.keys.tenant));
    expect(got.url).toBe('https://93.184.216.34/hook');
  });

  it('accepts a public https address', async () => {
    expect((await createEndpoint(t, { url: 'https://8.8.8.8:8443/in' })).url).toBe('https://8.8.8.8:8443/in');
    const res = await t.call('PATCH', `/v1/webhooks/${id}`, t.keys.tenant, {
      url: 'https://[2606:4700::1111]/h',
    });
    expect(expectEndpoint(res).url).toBe('https://[2606:4700::1111]/h');
  });

  it('refuses only the URL of a patch: the other fields of a refused patch are not applied', async () => {
    const res = await t.call('PATCH', `/v1/webhooks/${id}`, t.keys.tenant, {
      url: 'https://10.0.0.1/',
      description: 'must not stick',
    });
    expectError(res, 400, 'url_not_allowed');
    const got = expectEndpoint(await t.call('GET', `/v1/webhooks/${id}`, t.keys.tenant));
    expect(got.description).toBe('');
  });
});
