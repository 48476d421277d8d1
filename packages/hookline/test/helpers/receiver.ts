// A real subscriber on 127.0.0.1 whose answers a test can script.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
  /** The sender's port: tells apart the connections of several senders. */
  remotePort: number;
}

export interface Reply {
  status?: number;
  body?: string;
  headers?: Record<string, string>;
  /** Never answer (the connection stays open until the sender gives up). */
  hang?: boolean;
  delayMs?: number;
}

export type Responder = (request: ReceivedRequest, index: number) => Reply;

export interface Receiver {
  url: string;
  requests: ReceivedRequest[];
  respond(responder: Responder): void;
  /** Resolves once `count` requests have arrived (rejects after `timeoutMs`). */
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

export async function startReceiver(responder: Responder = () => ({ status: 200 })): Promise<Receiver> {
  const requests: ReceivedRequest[] = [];
  let current = responder;
  const waiters: { count: number; resolve: () => void }[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const received: ReceivedRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: Date.now(),
        remotePort: req.socket.remotePort ?? 0,
      };
      const index = requests.push(received) - 1;
      for (const w of waiters.filter((w) => requests.length >= w.count)) w.resolve();
      const reply = current(received, index);
      if (reply.hang) return;
      const send = () => {
        res.writeHead(reply.status ?? 200, reply.headers ?? {});
        res.end(reply.body ?? '');
      };
      if (reply.delayMs) setTimeout(send, reply.delayMs);
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    requests,
    respond: (r) => (current = r),
    waitFor: (count, timeoutMs = 15_000) =>
      new Promise((resolve, reject) => {
        if (requests.length >= count) return resolve(requests);
        const timer = setTimeout(
          () =>
            reject(new Error(`expected ${count} requests, got ${requests.length} within ${timeoutMs} ms`)),
          timeoutMs,
        );
        waiters.push({
          count,
          resolve: () => {
            clearTimeout(timer);
            resolve(requests);
          },
        });
      }),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Polls `check` until it returns a value other than undefined/false, or fails after `timeoutMs`. */
export async function eventually<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 15_000,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < until) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value as T;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`condition not met within ${timeoutMs} ms${last ? `: ${String(last)}` : ''}`);
}
