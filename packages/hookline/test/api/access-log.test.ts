// The API's access log (src/api/access-log.ts): one `request completed` line per request at `info`,
// naming the request and its answer; `incoming request` only at `debug`.
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../helpers/service.js';

interface Line {
  level: number;
  msg: string;
  reqId?: string;
  req?: { method: string; url: string; host: string; remoteAddress: string };
  res?: { statusCode: number };
  responseTime?: number;
}

const INFO = 30;
const DEBUG = 20;

describe('access log', () => {
  let t: TestService | null = null;
  afterEach(async () => {
    await t?.close();
    t = null;
  });

  async function start(level: 'info' | 'debug'): Promise<{ t: TestService; lines: Line[] }> {
    const lines: Line[] = [];
    const logger = pino({ level }, { write: (s: string) => void lines.push(JSON.parse(s) as Line) });
    t = await startTestService('sqlite', { logger });
    return { t, lines };
  }

  const requestLines = (lines: Line[]) => lines.filter((l) => l.reqId !== undefined);

  it('logs one line per request at info, with the request and its answer', async () => {
    const { t, lines } = await start('info');
    const emitted = await t.call('POST', '/v1/events', t.keys.producer, {
      tenant_id: 'acme',
      type: 'user.created',
      data: { userId: 'user_1' },
    });
    expect(emitted.statusCode, emitted.body).toBe(202);
    const refused = await t.call('GET', '/v1/webhooks', 'hk_t_not-a-key', undefined);
    expect(refused.statusCode).toBe(401);

    const logged = requestLines(lines);
    expect(logged.map((l) => [l.msg, l.level, l.req?.method, l.req?.url, l.res?.statusCode])).toEqual([
      ['request completed', INFO, 'POST', '/v1/events', 202],
      ['request completed', INFO, 'GET', '/v1/webhooks', 401],
    ]);
    for (const line of logged) expect(line.responseTime).toBeGreaterThanOrEqual(0);
    expect(new Set(logged.map((l) => l.reqId)).size).toBe(2);
    // Neither the key nor its header ever reaches the log.
    expect(JSON.stringify(lines)).not.toContain('hk_');
  });

  it('logs each request as it arrives too at debug', async () => {
    const { t, lines } = await start('debug');
    const res = await t.call('GET', '/v1/webhooks', t.keys.tenant);
    expect(res.statusCode).toBe(200);

    const logged = requestLines(lines);
    expect(logged.map((l) => [l.msg, l.level, l.req?.url])).toEqual([
      ['incoming request', DEBUG, '/v1/webhooks'],
      ['request completed', INFO, '/v1/webhooks'],
    ]);
    expect(logged[0]!.reqId).toBe(logged[1]!.reqId);
  });
});
