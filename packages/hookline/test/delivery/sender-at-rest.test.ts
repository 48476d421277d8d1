// Nothing a subscriber writes is stored in clear (docs/security.md, "Encryption at rest"): not its answer's
// body (sealed, shown to operators opened) and not a malformed status line (nowhere). Two subscribers
// echo the payload back, one as a body after a valid status line, one as its status line; after their
// deliveries die, the marker in the payload is found nowhere in the database in clear.
import { readFileSync, readdirSync } from 'node:fs';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { PG_URL, STORE_KINDS } from '../helpers/stores.js';
import { eventually } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { createEndpoint, deadLettersOf, deliveriesOf, emit, marker, shownError } from './support.js';

/** A subscriber that answers each request with `answer(body)`, bytes as they are, then closes. */
async function echoing(answer: (body: string) => string): Promise<{ url: string; server: Server }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    let buf = '';
    socket.on('data', (chunk: Buffer) => {
      buf += chunk.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      const length = Number(/\r\ncontent-length: (\d+)/i.exec(buf)?.[1] ?? -1);
      if (end < 0 || length < 0 || buf.length < end + 4 + length) return;
      const body = Buffer.from(buf.slice(end + 4, end + 4 + length), 'latin1').toString('utf8');
      buf = '';
      socket.end(answer(body));
    });
  });
  server.on('close', () => sockets.forEach((s) => s.destroy()));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, server };
}

describe.each(STORE_KINDS)('subscriber answers at rest on %s', (kind) => {
  let t: TestService | undefined;
  const servers: Server[] = [];
  afterEach(async () => {
    await t?.close();
    t = undefined;
    for (const s of servers.splice(0)) s.close();
  });

  it('a payload echoed as the body is sealed, one echoed as the status line is stored nowhere', async () => {
    t = await startTestService(kind, { worker: true });
    const secret = marker();
    const inBody = await echoing((body) => {
      const echo = `{"error":"bad input","received":${body}}`;
      return `HTTP/1.1 500 ${secret}\r\ncontent-length: ${Buffer.byteLength(echo)}\r\nx-echo: ${secret}\r\n\r\n${echo}`;
    });
    const inStatusLine = await echoing((body) => `${secret} ${body}\r\n\r\n`);
    servers.push(inBody.server, inStatusLine.server);
    const bodyEndpoint = await createEndpoint(t, { url: inBody.url, events: ['user.*'] });
    const lineEndpoint = await createEndpoint(t, { url: inStatusLine.url, events: ['user.*'] });
    const hookId = await emit(t, 'user.created', { userId: 'user_at_rest', secret });

    const rows = await eventually(async () => {
      const all = await deliveriesOf(t!, hookId);
      return all.length === 2 && all.every((d) => d.status === 'dead') && all;
    });
    const row = (endpointId: string) => rows.find((d) => d.endpoint_id === endpointId)!;
    // hookline's own reason in clear; the operator reads the echoed body opened, as before.
    expect(row(bodyEndpoint.id).last_error).toBe('HTTP 500');
    expect(shownError(t, row(bodyEndpoint.id))).toContain(secret);
    expect(row(lineEndpoint.id).last_error).toMatch(/^invalid HTTP answer/);
    expect(row(lineEndpoint.id).last_response).toBeNull();
    const letters = await deadLettersOf(t, hookId);
    expect(letters.map((l) => l.last_error).sort()).toEqual(['HTTP 500', row(lineEndpoint.id).last_error]);

    if (kind === 'sqlite') {
      await t.service.close(); // checkpoints the WAL into the main file
      const files = readdirSync(t.database.dir)
        .filter((f) => f.startsWith('hookline.db'))
        .map((f) => readFileSync(path.join(t!.database.dir, f)));
      // Positive control: an id stored in clear is found by the same search.
      expect(files.some((b) => b.includes(Buffer.from(hookId)))).toBe(true);
      for (const b of files) expect(b.includes(Buffer.from(secret))).toBe(false);
    } else {
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      try {
        const schema = t.database.schema;
        const hits = async (needle: string) => {
          const { rows: found } = await client.query<{ n: string }>(
            `SELECT (SELECT COUNT(*) FROM ${schema}.deliveries x WHERE x::text LIKE '%' || $1 || '%')
                  + (SELECT COUNT(*) FROM ${schema}.dead_letters x WHERE x::text LIKE '%' || $1 || '%') AS n`,
            [needle],
          );
          return Number(found[0]!.n);
        };
        // Positive control: the reason in clear is found by the same search, in both tables.
        expect(await hits('HTTP 500')).toBe(2);
        expect(await hits(secret)).toBe(0);
        expect(await hits(Buffer.from(secret).toString('hex'))).toBe(0);
      } finally {
        await client.end();
      }
    }
  });
});
