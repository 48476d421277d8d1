// An endpoint's custom headers (docs/contract.md §4.1, §5): validated strictly on create and PATCH
// (400 invalid_headers naming the header), answered on the endpoint object, replaced whole by PATCH,
// sent on every attempt, and sealed at rest.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RESERVED_HEADERS } from '../../src/endpoints/custom-headers.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { atRest } from '../helpers/at-rest.js';
import { emit, marker } from '../delivery/support.js';
import { createEndpoint, expectEndpoint, expectError } from './support.js';

/** Every reserved name, as listed and in other cases; each prefix with something after it. */
const RESERVED_NAMES = RESERVED_HEADERS.flatMap((r) => {
  const name = r.endsWith('*') ? `${r.slice(0, -1)}anything` : r;
  const upper = name.replace(/(^|-)([a-z])/g, (_, dash: string, c: string) => dash + c.toUpperCase());
  return [name, upper, name.toUpperCase()];
});

describe.each(STORE_KINDS)('custom headers of endpoints on %s', (kind) => {
  describe('validation', () => {
    let t: TestService;
    let id: string;
    beforeAll(async () => {
      t = await startTestService(kind);
      id = (await createEndpoint(t)).id;
    });
    afterAll(async () => t.close());

    const create = (headers: unknown) =>
      t.call('POST', '/v1/webhooks', t.keys.tenant, {
        url: 'https://hooks.example.com/in',
        events: ['*'],
        headers,
      });
    const answered = (res: Awaited<ReturnType<typeof create>>) => {
      expect(res.statusCode, res.body).toBe(201);
      return res.json().headers as Record<string, string>;
    };
    const patch = (headers: unknown) => t.call('PATCH', `/v1/webhooks/${id}`, t.keys.tenant, { headers });

    it.each(RESERVED_NAMES)('refuses the reserved name %s on create and on PATCH', async (name) => {
      for (const res of [await create({ [name]: 'x' }), await patch({ 'x-ok': 'y', [name]: 'x' })]) {
        expectError(res, 400, 'invalid_headers');
        expect(res.json().error.message).toContain(JSON.stringify(name));
        expect(res.json().error.message).toMatch(/^headers /);
      }
    });

    it('takes names that only look like reserved ones', async () => {
      const headers = { 'x-hook-id': 'a', hooks: 'b', 'x-user-agent': 'c', tea: 'd', hostname: 'e' };
      expect(answered(await create(headers))).toEqual(headers);
    });

    it.each<[string, unknown, RegExp]>([
      ['a name that is not an HTTP token', { 'x bad': 'v' }, /^headers has invalid name "x bad"/],
      ['an empty name', { '': 'v' }, /^headers has invalid name ""/],
      ['a non-ASCII name', { 'x-é': 'v' }, /^headers has invalid name "x-é"/],
      ['the same name twice in two cases', { 'X-A': '1', 'x-a': '2' }, /^headers names "x-a" twice/],
      [
        '21 entries',
        Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`x-${i}`, 'v'])),
        /^headers must be an object of at most 20/,
      ],
      [
        'a value of 1025 characters',
        { 'x-a': 'v'.repeat(1025) },
        /^headers\.x-a must be a string of at most 1024/,
      ],
      ['a value with a line break', { 'x-a': 'a\r\nx-injected: 1' }, /^headers\.x-a must be a string/],
      ['a value with a control character', { 'x-a': 'a\u0007b' }, /^headers\.x-a must be a string/],
      ['a value with NUL', { 'x-a': 'a\u0000b' }, /^body\/headers\/x-a contains a NUL/],
      ['a non-ASCII value', { 'x-a': 'é' }, /^headers\.x-a must be a string/],
      ['a value with a trailing space', { 'x-a': 'a ' }, /^headers\.x-a must be a string/],
      ['a number as value', { 'x-a': 1 }, /^headers\.x-a must be a string/],
      ['a list', ['x-a'], /^headers must be an object/],
      ['null', null, /^headers must be an object/],
    ])('refuses %s with invalid_headers, on create and on PATCH', async (_, headers, message) => {
      for (const res of [await create(headers), await patch(headers)]) {
        expectError(res, 400, 'invalid_headers');
        expect(res.json().error.message).toMatch(message);
      }
    });

    it('takes 20 entries and values of 1024 printable characters', async () => {
      const headers = Object.fromEntries(
        Array.from({ length: 20 }, (_, i) => [`x-${i}`, `~ ${'v'.repeat(1021)}!`]),
      );
      expect(answered(await create(headers))).toEqual(headers);
    });

    it('answers headers on every endpoint object, names in lower case; PATCH replaces the whole map', async () => {
      const created = await createEndpoint(t, { headers: { 'X-Api-Token': 'one', 'x-route': 'blue' } });
      expect(created.headers).toEqual({ 'x-api-token': 'one', 'x-route': 'blue' });
      expect(
        expectEndpoint(await t.call('GET', `/v1/webhooks/${created.id}`, t.keys.tenant)).headers,
      ).toEqual(created.headers);
      const replaced = await t.call('PATCH', `/v1/webhooks/${created.id}`, t.keys.tenant, {
        headers: { 'x-other': 'two' },
      });
      expect(expectEndpoint(replaced).headers).toEqual({ 'x-other': 'two' });
      // A PATCH of something else leaves them alone; {} removes them all.
      const described = await t.call('PATCH', `/v1/webhooks/${created.id}`, t.keys.tenant, {
        description: 'd',
      });
      expect(expectEndpoint(described).headers).toEqual({ 'x-other': 'two' });
      const cleared = await t.call('PATCH', `/v1/webhooks/${created.id}`, t.keys.tenant, { headers: {} });
      expect(expectEndpoint(cleared).headers).toEqual({});
      expect(answered(await create(undefined))).toEqual({});
    });
  });

  describe('on the wire and at rest', () => {
    let t: TestService | undefined;
    let r: Receiver | undefined;
    afterEach(async () => {
      await r?.close();
      await t?.close();
      r = t = undefined;
    });

    it('sends the headers on every attempt and keeps their values sealed in the database', async () => {
      t = await startTestService(kind, { worker: true });
      r = await startReceiver((_, i) => ({ status: i === 0 ? 500 : 200 }));
      const token = marker();
      const endpoint = await createEndpoint(t, {
        url: r.url,
        events: ['user.*'],
        headers: { Authorization: `Bearer ${token}`, 'x-route': 'blue' },
      });
      const hookId = await emit(t, 'user.deactivated', { userId: 'user_1' });
      // The first attempt fails, so the retry shows the headers go on every attempt, not just the first.
      const [first, second] = await r.waitFor(2);
      for (const req of [first!, second!]) {
        expect(req.headers['authorization']).toBe(`Bearer ${token}`);
        expect(req.headers['x-route']).toBe('blue');
        expect(req.headers['hook-id']).toBe(hookId);
      }
      expect(endpoint.headers).toEqual({ authorization: `Bearer ${token}`, 'x-route': 'blue' });

      const copy = await atRest(t);
      try {
        // Positive control: the endpoint id, stored in clear, is found by the same search.
        expect(await copy.hits(endpoint.id)).toBeGreaterThan(0);
        expect(await copy.hits(token)).toBe(0);
      } finally {
        await copy.close();
      }
    });
  });
});
