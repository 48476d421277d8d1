// GET /v1/webhooks: newest first, limit, cursor pagination and the status filter (docs/contract.md §4.1).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disableEndpoint } from '../../src/store/endpoints.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import {
  createEndpoint,
  expectEndpointShape,
  expectError,
  manualClock,
  type EndpointJson,
} from './support.js';

interface Page {
  data: EndpointJson[];
  next_cursor: string | null;
}

describe.each(STORE_KINDS)('listing webhook endpoints on %s', (kind) => {
  let t: TestService;
  beforeAll(async () => {
    t = await startTestService(kind);
    // Every clock reading is 1 ms after the previous one, so creation order is strict.
    manualClock(t, { tick: true });
  });
  afterAll(async () => t.close());

  async function list(key: string, query = ''): Promise<Page> {
    const res = await t.call('GET', `/v1/webhooks${query}`, key);
    expect(res.statusCode, res.body).toBe(200);
    const page = res.json() as Page;
    expect(Object.keys(page).sort()).toEqual(['data', 'next_cursor']);
    page.data.forEach(expectEndpointShape);
    expect(res.body).not.toContain('whsec_');
    return page;
  }

  /** Follows next_cursor to the end; answers the pages. */
  async function allPages(key: string, query: string): Promise<Page[]> {
    const pages: Page[] = [];
    let cursor: string | null = null;
    do {
      const sep = query === '' ? '?' : '&';
      const page = await list(key, cursor === null ? query : `${query}${sep}cursor=${cursor}`);
      pages.push(page);
      cursor = page.next_cursor;
      expect(pages.length).toBeLessThan(50);
    } while (cursor !== null);
    return pages;
  }

  async function makeTenant(name: string, count: number): Promise<{ key: string; ids: string[] }> {
    const key = await t.keyFor('tenant', name);
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      ids.push((await createEndpoint(t, { key, description: `#${i}` })).id);
    }
    return { key, ids };
  }

  it('answers an empty first page for a tenant with no endpoints', async () => {
    const key = await t.keyFor('tenant', 'empty-co');
    expect(await list(key)).toEqual({ data: [], next_cursor: null });
  });

  it('lists newest first with a default limit of 20', async () => {
    const { key, ids } = await makeTenant('default-limit', 23);
    const first = await list(key);
    expect(first.data.map((e) => e.id)).toEqual(ids.slice().reverse().slice(0, 20));
    expect(first.data.map((e) => e.description)).toEqual(Array.from({ length: 20 }, (_, i) => `#${22 - i}`));
    const created = first.data.map((e) => Date.parse(e.created_at));
    expect(created).toEqual(created.slice().sort((a, b) => b - a));
    expect(first.next_cursor).toEqual(expect.any(String));
    const second = await list(key, `?cursor=${first.next_cursor}`);
    expect(second).toMatchObject({ next_cursor: null });
    expect(second.data.map((e) => e.id)).toEqual(ids.slice(0, 3).reverse());
  });

  it.each([
    [1, 7],
    [3, 7],
    [7, 7],
    [6, 12],
    [100, 7],
  ])('pages of limit=%i through %i endpoints without duplicates or gaps', async (limit, count) => {
    const { key, ids } = await makeTenant(`pages-${limit}-${count}`, count);
    const pages = await allPages(key, `?limit=${limit}`);
    expect(pages).toHaveLength(Math.max(1, Math.ceil(count / limit)));
    for (const page of pages.slice(0, -1)) {
      expect(page.data).toHaveLength(limit);
      expect(page.next_cursor).toBe(page.data[page.data.length - 1]!.id);
    }
    expect(pages[pages.length - 1]!.next_cursor).toBeNull();
    expect(pages.flatMap((p) => p.data.map((e) => e.id))).toEqual(ids.slice().reverse());
  });

  it('keeps paging stable when endpoints are created between pages', async () => {
    const { key, ids } = await makeTenant('moving', 6);
    const first = await list(key, '?limit=4');
    const newer = await createEndpoint(t, { key });
    const second = await list(key, `?limit=4&cursor=${first.next_cursor}`);
    expect([...first.data, ...second.data].map((e) => e.id)).toEqual(ids.slice().reverse());
    expect(second.next_cursor).toBeNull();
    expect((await list(key, '?limit=1')).data[0]!.id).toBe(newer.id);
  });

  it('accepts limit 1 and 100, and answers 400 for limits outside 1-100 or not integers', async () => {
    const { key } = await makeTenant('limits', 2);
    expect((await list(key, '?limit=1')).data).toHaveLength(1);
    expect((await list(key, '?limit=100')).data).toHaveLength(2);
    for (const limit of ['0', '101', 'abc', '-1', '1.5', '', '1e9', '20abc', 'null', 'true']) {
      const res = await t.call('GET', `/v1/webhooks?limit=${limit}`, key);
      expectError(res, 400, 'validation_failed');
      expect((res.json() as { error: { message: string } }).error.message).toContain('limit');
    }
    expectError(await t.call('GET', '/v1/webhooks?limit=1&limit=2', key), 400, 'validation_failed');
  });

  it.each([
    ['garbage', 'abc'],
    ['another kind of id', 'msg_01ARZ3NDEKTSV4RRFFQ69G5FAV'],
    ['a lower-case id', 'webhook_01arz3ndektsv4rrffq69g5fav'],
    ['a NUL byte', '%00'],
    ['a quote', "webhook_'--"],
  ])('answers 400 invalid_cursor for a cursor that is %s', async (_what, cursor) => {
    expectError(await t.call('GET', `/v1/webhooks?cursor=${cursor}`, t.keys.tenant), 400, 'invalid_cursor');
  });

  it('answers 400 validation_failed for an empty or over-long cursor', async () => {
    expectError(await t.call('GET', '/v1/webhooks?cursor=', t.keys.tenant), 400, 'validation_failed');
    expectError(
      await t.call('GET', `/v1/webhooks?cursor=webhook_${'A'.repeat(300)}`, t.keys.tenant),
      400,
      'validation_failed',
    );
  });

  it('hides deleted endpoints unless status=deleted, and filters by each status', async () => {
    const { key, ids } = await makeTenant('statuses', 6);
    const [a, b, c, d, e, f] = ids as [string, string, string, string, string, string];
    for (const id of [b, e]) expect((await t.call('DELETE', `/v1/webhooks/${id}`, key)).statusCode).toBe(200);
    expect(await disableEndpoint(t.service.ctx.db, c, 'gone', Date.now())).toBe(true);

    const ids_ = (page: Page) => page.data.map((x) => x.id);
    expect(ids_(await list(key))).toEqual([f, d, c, a]);
    expect(ids_(await list(key, '?status=active'))).toEqual([f, d, a]);
    expect(ids_(await list(key, '?status=disabled'))).toEqual([c]);
    const deleted = await list(key, '?status=deleted');
    expect(ids_(deleted)).toEqual([e, b]);
    expect(deleted.data.every((x) => x.status === 'deleted')).toBe(true);

    // The filter holds across pages too.
    const pages = await allPages(key, '?status=active&limit=1');
    expect(pages.flatMap(ids_)).toEqual([f, d, a]);
    const deletedPages = await allPages(key, '?status=deleted&limit=1');
    expect(deletedPages.flatMap(ids_)).toEqual([e, b]);

    // A restored endpoint is listed again.
    expect((await t.call('POST', `/v1/webhooks/${b}/restore`, key)).statusCode).toBe(200);
    expect(ids_(await list(key))).toEqual([f, d, c, b, a]);
    expect(ids_(await list(key, '?status=deleted'))).toEqual([e]);
  });

  it.each([['DELETED'], ['all'], [''], ['active,deleted']])('answers 400 for status=%s', async (status) => {
    expectError(
      await t.call('GET', `/v1/webhooks?status=${status}`, t.keys.tenant),
      400,
      'validation_failed',
    );
  });

  it('answers 400 for an unknown query parameter', async () => {
    expectError(await t.call('GET', '/v1/webhooks?colour=blue', t.keys.tenant), 400, 'validation_failed');
  });
});
