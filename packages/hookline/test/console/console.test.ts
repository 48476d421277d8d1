// The console in a real browser (Debian's chromium driven by playwright-core) against a real server
// with a real worker: subscribers that fail make real dead letters, an operator signs in, inspects
// one, replays it and a selection once the subscriber answers 200, and looks at tenant health. A
// tenant key is refused. Screenshots go to test-artifacts/console/ for a person to look at.
import { mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUCKET_MS, addStats, emptyStats } from '../../src/store/delivery-stats.js';
import { recordQueueSample } from '../../src/store/queue-samples.js';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';

const ARTIFACTS = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '../../../../test-artifacts/console',
);
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];
const TIMEOUT = 60_000;

interface DeadLetterJson {
  id: string;
  tenant_id: string;
  endpoint_id: string;
  event_type: string;
  hook_id: string;
  replay_status: string | null;
}

describe('operator console in a browser', () => {
  let t: TestService;
  let base: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const problems: string[] = [];
  const receivers: Receiver[] = [];
  let flaky: Receiver; // answers 500 until the test "fixes" it
  let flakyEndpoint: string;
  let retiredEndpoint: string;
  let goneEndpoint: string;
  let tlsEndpoint: string; // an https:// URL whose server does not speak TLS: every attempt is refused
  const hookIds: Record<string, string> = {};
  const marker = `console-${Date.now().toString(36)}`;

  const receiver = async (status: number) => {
    const r = await startReceiver(() => ({ status, body: status >= 400 ? `answered ${status}` : 'ok' }));
    receivers.push(r);
    return r;
  };
  const createEndpoint = async (key: string, url: string, events: string[], description = '') => {
    const res = await t.call('POST', '/v1/webhooks', key, { url, events, description });
    expect(res.statusCode, res.body).toBe(201);
    return res.json<{ id: string }>().id;
  };
  const emit = async (
    tenantId: string,
    type: string,
    data: Record<string, unknown>,
    orderingKey?: string,
  ) => {
    const res = await t.call('POST', '/v1/events', t.keys.producer, {
      tenant_id: tenantId,
      type,
      data,
      ...(orderingKey ? { ordering_key: orderingKey } : {}),
    });
    expect(res.statusCode, res.body).toBe(202);
    return res.json<{ id: string }>().id;
  };
  const deadLetters = async () =>
    (await t.call('GET', '/v1/admin/dead-letters?tenant_id=acme&limit=100', t.keys.instance_manager)).json<{
      data: DeadLetterJson[];
    }>().data;
  const deadLetterOf = async (hookId: string) => {
    const found = (await deadLetters()).find((d) => d.hook_id === hookId);
    if (!found) throw new Error(`no dead letter for ${hookId}`);
    return found;
  };
  const shot = (name: string) =>
    page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });

  /**
   * A page that records what would be a bug: script errors and console errors (CSP violations show
   * there). The browser's own notes about the 4xx answers the tests provoke are expected.
   */
  async function newPage(ctx: BrowserContext): Promise<Page> {
    const p = await ctx.newPage();
    p.setDefaultTimeout(15_000);
    p.on('pageerror', (err) => problems.push(`pageerror: ${err.message}`));
    p.on('console', (msg) => {
      if (msg.type() !== 'error') return;
      if (/Failed to load resource: the server responded with a status of (401|403|409)/.test(msg.text()))
        return;
      problems.push(`console: ${msg.text()}`);
    });
    return p;
  }

  async function signIn(p: Page, key: string) {
    await p.goto(`${base}/console`);
    await p.getByLabel('API key').fill(key);
    await p.getByRole('button', { name: 'Sign in' }).click();
  }

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    t = await startTestService('sqlite', { worker: true, env: { HOOKLINE_MAX_RETRIES: '1' } });
    await t.service.app!.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.service.app!.server.address() as AddressInfo).port}`;

    // acme: an endpoint that fails until it is fixed (its dead letters are the subject), a healthy
    // one, one that fails and is then deleted (its dead letter cannot be replayed), and one that
    // answers 410 Gone and is disabled for it. globex: a healthy tenant, so there are two to add up.
    flaky = await receiver(500);
    flakyEndpoint = await createEndpoint(t.keys.tenant, flaky.url, ['user.*'], 'CRM sync');
    await createEndpoint(t.keys.tenant, (await receiver(200)).url, ['user.created'], 'Audit trail');
    retiredEndpoint = await createEndpoint(
      t.keys.tenant,
      (await receiver(500)).url,
      ['organization.*'],
      'Legacy billing',
    );
    goneEndpoint = await createEndpoint(
      t.keys.tenant,
      (await receiver(410)).url,
      ['organizationMembership.*'],
      'Old app',
    );
    const globex = await t.keyFor('tenant', 'globex');
    const globexEndpoint = await createEndpoint(globex, (await receiver(200)).url, ['*'], 'Data warehouse');
    tlsEndpoint = await createEndpoint(
      globex,
      (await receiver(200)).url.replace(/^http:/, 'https:'),
      ['organizationInvitation.accepted'],
      'Partner API',
    );
    // A test event: refused on both attempts, and never a dead letter (the overview's counts stay).
    const tested = await t.call('POST', `/v1/webhooks/${tlsEndpoint}/test`, globex, {});
    expect(tested.statusCode, tested.body).toBe(202);

    hookIds.created = await emit(
      'acme',
      'user.created',
      { userId: 'user_2x9KfQ', email: 'ada@example.com', marker },
      'user_2x9KfQ',
    );
    hookIds.updated = await emit('acme', 'user.updated', { userId: 'user_2x9KfQ', changes: ['email'] });
    hookIds.deleted = await emit('acme', 'user.deleted', { userId: 'user_7hTq' });
    hookIds.banned = await emit('acme', 'user.banned', { userId: 'user_k3Lm', reason: 'abuse' });
    hookIds.org = await emit('acme', 'organization.created', { organizationId: 'org_1', name: 'Acme Corp' });
    await emit('acme', 'organizationMembership.created', { organizationId: 'org_1', userId: 'user_2x9KfQ' });
    for (let i = 0; i < 5; i++) await emit('globex', 'user.created', { userId: `user_g${i}` });

    // Wait, through the admin API, until every acme message to a failing endpoint is a dead letter.
    await eventually(async () => {
      const letters = await deadLetters();
      const hooks = new Set(letters.map((d) => d.hook_id));
      return Object.values(hookIds).every((h) => hooks.has(h));
    }, 20_000);
    await eventually(async () => {
      const res = await t.call('GET', `/v1/webhooks/${goneEndpoint}`, t.keys.tenant);
      return res.json<{ status: string }>().status === 'disabled';
    });
    await eventually(async () => {
      const rows = await t.service.ctx.db.all<{ status: string }>(
        'SELECT status FROM deliveries WHERE endpoint_id = $1',
        [tlsEndpoint],
      );
      return rows.length === 1 && rows[0]!.status === 'dead';
    });
    const deleted = await t.call('DELETE', `/v1/webhooks/${retiredEndpoint}`, t.keys.tenant);
    expect(deleted.statusCode, deleted.body).toBe(200);
    // The subscriber is fixed: from now on it answers 200.
    flaky.respond(() => ({ status: 200, body: 'ok' }));

    // An hour of earlier traffic for globex's endpoint, written through the store's own functions,
    // so the charts in the screenshots have a shape; everything about acme above is live.
    const now = t.service.ctx.clock();
    const thisMinute = Math.floor(now / BUCKET_MS) * BUCKET_MS;
    // A retry storm 30–36 minutes ago: attempts fail, retries pile up, then drain once it is over.
    for (let m = 59; m >= 1; m--) {
      const bucket = thisMinute - m * BUCKET_MS;
      const traffic = Math.round(30 + 12 * Math.sin(m / 7) + ((m * 7) % 5));
      const incident = m >= 30 && m <= 36;
      await addStats(t.service.ctx.db, [
        {
          ...emptyStats(bucket, globexEndpoint, 'globex'),
          succeeded: incident ? Math.round(traffic / 5) : traffic + (m > 22 && m < 30 ? 12 : 0),
          failed: incident ? 14 + (m % 4) : m % 13 === 0 ? 1 : 0,
          dead: 0,
        },
      ]);
      await recordQueueSample(t.service.ctx.db, {
        bucket,
        due: incident ? 6 + (m % 3) : (m * 5) % 3,
        scheduled: incident ? (37 - m) * 12 : m >= 23 && m < 30 ? (m - 22) * 10 : 0,
        delivering: 1 + ((m * 3) % 4),
        dead_letters: 0,
      });
    }

    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
    context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    page = await newPage(context);
  }, TIMEOUT);

  afterAll(async () => {
    await browser?.close();
    await Promise.all(receivers.map((r) => r.close()));
    await t?.close();
  });

  it(
    'signs in with an instance-manager key kept in session storage only, and shows the overview',
    async () => {
      await page.goto(`${base}/console`);
      await page.getByRole('heading', { name: 'Operator console' }).waitFor();
      await shot('01-sign-in');

      await signIn(page, t.keys.instance_manager);
      await page.getByRole('heading', { name: 'Overview' }).waitFor();
      const deadCard = page.locator('.stat[data-stat="Dead letters"] .stat-value');
      await eventually(async () => (await deadCard.textContent()) === '5');
      await page.locator('#ov-throughput svg .bar').first().waitFor();
      await page.locator('#ov-queue svg .line').first().waitFor();
      expect(await page.locator('#nav-dead-count').textContent()).toBe('5');
      // Hover the throughput chart for its tooltip, as an operator would.
      const box = await page.locator('#ov-throughput svg').boundingBox();
      if (box) await page.mouse.move(box.x + box.width * 0.45, box.y + box.height / 2);
      await page.locator('#ov-throughput .chart-tip').waitFor();
      await shot('02-overview');
      await page.mouse.move(0, 0);

      const storage = await page.evaluate(() => ({
        session: Object.entries(sessionStorage),
        local: Object.entries(localStorage),
        cookie: document.cookie,
      }));
      expect(storage.session).toEqual([['hookline.console.key', t.keys.instance_manager]]);
      expect(storage.local).toEqual([]);
      expect(storage.cookie).toBe('');
      expect(await context.cookies()).toEqual([]);
    },
    TIMEOUT,
  );

  it(
    'finds a dead letter, inspects its decrypted message, replays it and sees it succeed',
    async () => {
      await page.locator('nav [data-nav="dead-letters"]').click();
      await page.getByRole('heading', { name: 'Dead letters', exact: true }).waitFor();
      const rows = page.locator('#dl-rows tr');
      await eventually(async () => (await rows.count()) === 5);
      await shot('03-dead-letters');

      const letter = await deadLetterOf(hookIds.created!);
      expect(letter.endpoint_id).toBe(flakyEndpoint);
      const row = page.locator(`#dl-rows tr[data-id="${letter.id}"]`);
      // Its ordering key, in the list and in the drawer.
      expect(await row.locator('.ordering-key').textContent()).toBe('key user_2x9KfQ');
      await row.getByRole('button', { name: 'user.created' }).click();
      const drawer = page.getByRole('dialog');
      await drawer.getByRole('heading', { name: letter.id }).waitFor();
      expect(await drawer.locator('.meta').textContent()).toContain('Ordering keyuser_2x9KfQ');
      // The decrypted body, exactly what the subscriber was sent, and the first attempt's headers.
      await drawer.locator('pre.code', { hasText: marker }).waitFor();
      await drawer.locator('.kv th', { hasText: 'hook-id' }).waitFor();
      expect(await drawer.locator('.kv').textContent()).toContain(hookIds.created);
      await drawer.getByRole('button', { name: 'Raw', exact: true }).click();
      expect(await drawer.locator('pre.code').textContent()).toContain(`"marker":"${marker}"`);
      await drawer.getByRole('button', { name: 'Pretty', exact: true }).click();
      await shot('04-inspect');
      await drawer.locator('pre.code').scrollIntoViewIfNeeded();
      await shot('04b-inspect-body');
      await drawer.locator('.drawer-body').evaluate((el) => el.scrollTo(0, 0));

      const before = flaky.requests.length;
      await drawer.getByRole('button', { name: 'Replay', exact: true }).click();
      await drawer.locator('.alert-success', { hasText: 'Replay queued' }).waitFor();
      // The panel and the row follow the replay from pending to succeeded.
      await drawer.locator('.pill[data-status="succeeded"]').waitFor();
      await row.locator('.replay-cell .pill[data-status="succeeded"]').waitFor();
      const replayed = flaky.requests.slice(before).filter((r) => r.headers['hook-id'] === hookIds.created);
      expect(replayed).toHaveLength(1);
      expect(replayed[0]!.body).toContain(marker);
      expect((await deadLetterOf(hookIds.created!)).replay_status).toBe('succeeded');
      await page.keyboard.press('Escape');
      await drawer.waitFor({ state: 'hidden' });
    },
    TIMEOUT,
  );

  it(
    'replays a selection one by one, reporting each answer, including a 409',
    async () => {
      const updated = await deadLetterOf(hookIds.updated!);
      const deleted = await deadLetterOf(hookIds.deleted!);
      const before = flaky.requests.length;
      for (const letter of [updated, deleted]) {
        await page.locator(`#dl-rows tr[data-id="${letter.id}"] input[type=checkbox]`).check();
      }
      await page.getByRole('button', { name: 'Replay selected (2)' }).click();
      await page.locator('#dl-result.alert-success', { hasText: '2 of 2 queued for replay.' }).waitFor();
      for (const letter of [updated, deleted]) {
        await page.locator(`#dl-rows tr[data-id="${letter.id}"] .pill[data-status="succeeded"]`).waitFor();
      }
      const hooks = flaky.requests.slice(before).map((r) => r.headers['hook-id']);
      expect(hooks.sort()).toEqual([hookIds.updated, hookIds.deleted].sort());

      // That dead letter's endpoint has been deleted since, so replaying it is refused with a 409.
      const org = await deadLetterOf(hookIds.org!);
      expect(org.endpoint_id).toBe(retiredEndpoint);
      await page.locator(`#dl-rows tr[data-id="${org.id}"] input[type=checkbox]`).check();
      await page.getByRole('button', { name: 'Replay selected (1)' }).click();
      await page.locator('#dl-result.alert-danger', { hasText: '0 of 1 queued' }).waitFor();
      expect(await page.locator(`#dl-result li[data-id="${org.id}"]`).textContent()).toContain(
        'endpoint_deleted',
      );

      // Replay everything matching a filter, as a job whose progress the page follows: of the two
      // not yet replayed, one goes; the deleted endpoint's cannot; the three replayed above are skipped.
      await page.locator('#dl-filter input[name=tenant_id]').fill('acme');
      await page.getByRole('button', { name: 'Filter' }).click();
      await page.waitForURL(/#\/dead-letters\?tenant_id=acme$/);
      // The job's first progress answer is held back until the running state has been seen.
      const polled: { url: string; body: { status: string } }[] = [];
      let release = () => {};
      const gate = new Promise<void>((resolve) => (release = resolve));
      await page.route('**/v1/admin/replays/*', async (route) => {
        await gate;
        await route.continue();
      });
      page.on('response', (res) => {
        if (new URL(res.url()).pathname.startsWith('/v1/admin/replays/')) {
          void res.json().then((body: { status: string }) => polled.push({ url: res.url(), body }));
        }
      });
      const started = page.waitForResponse((res) => res.url().endsWith('/v1/admin/dead-letters/replay'));
      await page.getByRole('button', { name: 'Replay all matching…' }).click();
      await page.getByRole('button', { name: 'Replay them' }).click();
      const job = (await (await started).json()) as { id: string; count: number };
      expect(job.count).toBe(5);
      const bar = page.locator('#dl-result progress.job-progress');
      await bar.waitFor();
      expect(await bar.getAttribute('max')).toBe('5');
      expect(await bar.getAttribute('data-job')).toBe(job.id);
      expect(await page.locator('#dl-result').textContent()).toContain('Replaying… 0 %');
      await shot('05a-bulk-replay-running');
      release();
      await page.locator('#dl-result', { hasText: '1 dead letter queued for replay.' }).waitFor();
      await page.unroute('**/v1/admin/replays/*');
      expect(await page.locator('#dl-result').textContent()).toContain(
        '3 skipped (already being replayed or delivered), 1 not replayable (endpoint deleted or disabled).',
      );
      expect(await page.locator('#dl-result progress').count()).toBe(0);
      // What the page showed came from the job's own route.
      expect(polled.length).toBeGreaterThan(0);
      expect(polled.every((p) => new URL(p.url).pathname === `/v1/admin/replays/${job.id}`)).toBe(true);
      expect(polled.at(-1)!.body.status).toBe('done');
      await eventually(
        async () => (await page.locator('#dl-rows .pill[data-status="succeeded"]').count()) === 4,
        15_000,
      );
      await shot('05-dead-letters-replayed');
    },
    TIMEOUT,
  );

  it(
    'counts on the overview and the badge only the dead letters still awaiting an operator, as /metrics does',
    async () => {
      // Of the five, four were replayed and delivered; the deleted endpoint's one still awaits.
      await page.locator('nav [data-nav="overview"]').click();
      await page.getByRole('heading', { name: 'Overview' }).waitFor();
      const deadCard = page.locator('.stat[data-stat="Dead letters"]');
      await eventually(async () => (await deadCard.locator('.stat-value').textContent()) === '1');
      expect(await deadCard.locator('.stat-hint').textContent()).toBe('awaiting an operator →');
      expect(await deadCard.getAttribute('class')).toContain('tone-danger');
      await eventually(async () => (await page.locator('#nav-dead-count').textContent()) === '1');
      const metrics = (await t.inject({ method: 'GET', url: '/metrics' })).body;
      expect(metrics).toMatch(/^hookline_dead_letters_awaiting 1$/m);
      expect(metrics).toMatch(/^hookline_dead_letters 5$/m);
      await shot('05b-overview-after-replay');
    },
    TIMEOUT,
  );

  it(
    'shows tenants and their endpoints with success rate, status, backlog, adaptive limit and rate',
    async () => {
      const limited = await t.call('PATCH', `/v1/webhooks/${flakyEndpoint}`, t.keys.tenant, {
        rate_limit: 50,
      });
      expect(limited.statusCode, limited.body).toBe(200);
      await page.locator('nav [data-nav="tenants"]').click();
      await page.locator('#tn-list a[data-tenant="globex"]').waitFor();
      await page.locator('#tn-list a[data-tenant="acme"]').click();
      await page.waitForURL(/#\/tenants\/acme$/);
      const flakyRow = page.locator(`#tn-rows tr[data-endpoint="${flakyEndpoint}"]`);
      await flakyRow.waitFor();
      expect(await page.locator('#tn-rows tr').count()).toBe(4);
      expect(await flakyRow.textContent()).toContain(flaky.url);
      expect(await flakyRow.locator('.rate strong').textContent()).toMatch(/^\d+(\.\d)? %$/);
      // The engine's view of it: in flight now, and its adaptive limit.
      expect(await flakyRow.locator('.limit').textContent()).toMatch(/^\d+ in flight · limit \d+$/);
      // Its current rate, beside the rate limit it was given.
      expect(await flakyRow.locator('.rate-limit').textContent()).toMatch(/^[\d.,]+\/s · rate limit 50\/s$/);
      // Its dead letters were all replayed and delivered: none awaits; the deleted endpoint's one does.
      expect(await flakyRow.locator('.awaiting').count()).toBe(0);
      const retired = page.locator(`#tn-rows tr[data-endpoint="${retiredEndpoint}"]`);
      expect(await retired.locator('.awaiting').textContent()).toBe('1 dead letter awaiting →');
      const gone = page.locator(`#tn-rows tr[data-endpoint="${goneEndpoint}"]`);
      await gone.locator('.pill[data-status="disabled"]').waitFor();
      expect(await gone.textContent()).toContain('410 Gone');
      await shot('06-tenants');
    },
    TIMEOUT,
  );

  it(
    "shows attempts refused before reaching the subscriber in the endpoint's health",
    async () => {
      await page.goto(`${base}/console#/tenants/globex`);
      const row = page.locator(`#tn-rows tr[data-endpoint="${tlsEndpoint}"]`);
      await row.waitFor();
      // Two attempts (HOOKLINE_MAX_RETRIES=1), both failed their TLS handshake.
      expect(await row.locator('.refused').textContent()).toBe('refused: 2 TLS');
      expect(await row.locator('.refused').getAttribute('title')).toBe(
        'the TLS handshake or certificate check failed',
      );
      await shot('08-refused');
    },
    TIMEOUT,
  );

  it(
    'shows a paused v1a endpoint with its custom header names, never their values',
    async () => {
      const key = await t.keyFor('tenant', 'initech');
      const created = await t.call('POST', '/v1/webhooks', key, {
        url: (await receiver(200)).url,
        events: ['user.*'],
        signature_scheme: 'v1a',
        headers: { 'x-api-token': `${marker}-token`, 'x-route': 'blue' },
      });
      expect(created.statusCode, created.body).toBe(201);
      const id = created.json<{ id: string }>().id;
      const paused = await t.call('PATCH', `/v1/webhooks/${id}`, key, { status: 'paused' });
      expect(paused.json()).toMatchObject({ status: 'paused' });
      await page.goto(`${base}/console#/tenants/initech`);
      const row = page.locator(`#tn-rows tr[data-endpoint="${id}"]`);
      await row.locator('.pill[data-status="paused"]').waitFor();
      expect(await row.locator('.signing').textContent()).toBe(
        'v1a (Ed25519) signatures · headers: x-api-token, x-route',
      );
      expect(await page.content()).not.toContain(`${marker}-token`);
      await page.locator('#tn-list a[data-tenant="initech"]').waitFor();
      expect(await page.locator('#tn-list a[data-tenant="initech"]').textContent()).toContain('1 paused');
      await shot('07-paused-v1a');
    },
    TIMEOUT,
  );

  it(
    'signs out, forgetting the key',
    async () => {
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByRole('heading', { name: 'Operator console' }).waitFor();
      expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    },
    TIMEOUT,
  );

  it(
    'shows a tenant key only that it is not an instance-manager key, and an unknown key that it is unknown',
    async () => {
      const other = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      const p = await newPage(other);
      const adminCalls: number[] = [];
      p.on('response', (r) => {
        if (new URL(r.url()).pathname.startsWith('/v1/admin/')) adminCalls.push(r.status());
      });
      await signIn(p, t.keys.tenant);
      await p.getByText('This is not an instance-manager key.').waitFor();
      expect(await p.locator('#shell').isHidden()).toBe(true);
      expect(await p.locator('main.content').isVisible()).toBe(false);
      expect(adminCalls).toEqual([403]);
      expect(await p.evaluate(() => [sessionStorage.length, localStorage.length, document.cookie])).toEqual([
        0,
        0,
        '',
      ]);
      await p.screenshot({ path: path.join(ARTIFACTS, '07-forbidden.png'), fullPage: true });

      await p.getByLabel('API key').fill('hk_i_thisisnotakey');
      await p.getByRole('button', { name: 'Sign in' }).click();
      await p.getByText('Unknown or revoked key.').waitFor();
      await other.close();
    },
    TIMEOUT,
  );

  it('raised no script or console errors (CSP violations included)', () => {
    expect(problems).toEqual([]);
  });
});
