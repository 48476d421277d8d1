// The HTTP/1.1 client attempts go out through (docs/architecture.md, "Sending"). A webhook attempt is
// always the same exchange: one POST with a body known in full, and an answer of which hookline needs
// the status, Retry-After and at most a few KiB of body. This client does that and nothing else, with
// keep-alive connections per origin: the request goes out in one write, and the answer is parsed in
// place from the socket's chunks. With a general-purpose client (undici: streams, a parser in
// WebAssembly, its dispatch layers) a worker's sender thread was busy ~3.5 × as long in a drain, most
// of it while that code ran cold, on cores it shares with the database work and the subscriber
// (docs/architecture.md, "Sending").
//
// What it does not do, by design: redirects (an attempt never follows one), pipelining, request
// streaming, HTTP/2, proxies. What it guards against: a head larger than MAX_HEAD_BYTES, a malformed
// status line, chunk or length, and anything after the answer on a connection (the connection is
// then closed, never reused).
import net from 'node:net';
import tls from 'node:tls';
import type { LookupFunction } from 'node:net';

/** The largest answer head (status line and headers) accepted. */
export const MAX_HEAD_BYTES = 16 * 1024;

export interface Http1ClientOptions {
  /** Connections kept open per origin at most; attempts beyond them wait for one. */
  connectionsPerOrigin: number;
  /** An idle connection is closed after this long. */
  idleTimeoutMs: number;
  lookup?: LookupFunction;
  /** TLS trust: PEM certificates replacing Node's roots (pass the roots along to add to them). */
  ca?: string[];
}

export interface Http1Answer {
  status: number;
  /** The first Retry-After header, if any. */
  retryAfter: string | undefined;
  /** The start of the body: at most `bodyCap` bytes. */
  body: Buffer;
}

export type Http1Callback = (err: Error | null, answer?: Http1Answer) => void;

/** One exchange: what to write, where to report. `abort` ends it from outside (time-out, shutdown). */
export class Http1Exchange {
  /** The connection serving it, once it has one. */
  conn: Connection | null = null;
  done = false;
  /** Sent once more on a fresh connection (see Connection.lost). */
  resent = false;

  constructor(
    readonly request: Buffer,
    readonly bodyCap: number,
    private readonly callback: Http1Callback,
  ) {}

  finish(err: Error | null, answer?: Http1Answer): void {
    if (this.done) return;
    this.done = true;
    this.conn = null;
    this.callback(err, answer);
  }

  /** Ends the exchange with `err`; its connection, if any, is closed (the answer may be half read). */
  abort(err: Error): void {
    if (this.done) return;
    const conn = this.conn;
    this.finish(err);
    conn?.destroy();
  }
}

/** An error with a Node-style code, as connection errors have. */
export class Http1Error extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

interface Target {
  tls: boolean;
  /** For net.connect: an IPv6 literal without its brackets. */
  host: string;
  port: number;
  /** For SNI: absent for IP literals, which SNI does not carry. */
  servername: string | undefined;
}

/** The parts of an answer's head this client reads. */
interface Head {
  status: number;
  keepAlive: boolean;
  /** The server's `Keep-Alive: timeout=` in milliseconds, if it gave one. */
  keepAliveMs: number | null;
  chunked: boolean;
  length: number | null;
  retryAfter: string | undefined;
}

/** A connection is dropped this long before the server's announced keep-alive time-out. */
const KEEP_ALIVE_MARGIN_MS = 1000;

const CRLF = Buffer.from('\r\n');
const HEAD_END = Buffer.from('\r\n\r\n');
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const HEADER_VALUE = /^[\t\x20-\x7e]*$/;
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: |$)/;

/** Parses an answer's head (the bytes before its blank line); a malformed one throws. */
function parseHead(text: string): Head {
  const lines = text.split('\r\n');
  const m = STATUS_LINE.exec(lines[0]!);
  if (!m)
    throw new Http1Error(
      'HPE_INVALID_STATUS',
      `not an HTTP/1.x status line: ${JSON.stringify(lines[0]!.slice(0, 64))}`,
    );
  const http10 = m[1] === '0';
  const head: Head = {
    status: Number(m[2]),
    keepAlive: !http10,
    keepAliveMs: null,
    chunked: false,
    length: null,
    retryAfter: undefined,
  };
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(':');
    if (colon <= 0) throw new Http1Error('HPE_INVALID_HEADER_TOKEN', 'malformed header line in the answer');
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    switch (name) {
      case 'content-length': {
        if (!/^\d+$/.test(value))
          throw new Http1Error('HPE_INVALID_CONTENT_LENGTH', 'invalid Content-Length in the answer');
        const n = Number(value);
        if (head.length !== null && head.length !== n)
          throw new Http1Error(
            'HPE_INVALID_CONTENT_LENGTH',
            'conflicting Content-Length headers in the answer',
          );
        head.length = n;
        break;
      }
      case 'transfer-encoding':
        // Only the last coding frames the body; anything but chunked there means "until close".
        head.chunked = /(?:^|,)\s*chunked\s*$/i.test(value);
        if (!head.chunked) head.keepAlive = false;
        break;
      case 'connection': {
        const tokens = value.toLowerCase();
        if (/(?:^|,)\s*close\s*(?:,|$)/.test(tokens)) head.keepAlive = false;
        else if (http10 && /(?:^|,)\s*keep-alive\s*(?:,|$)/.test(tokens)) head.keepAlive = true;
        break;
      }
      case 'keep-alive': {
        const timeout = /(?:^|,)\s*timeout\s*=\s*(\d+)/i.exec(value);
        if (timeout) head.keepAliveMs = Number(timeout[1]) * 1000;
        break;
      }
      case 'retry-after':
        head.retryAfter ??= value;
        break;
    }
  }
  // Chunked framing wins over a length (RFC 9112 §6.3); a message with both is suspect: not reused.
  if (head.chunked && head.length !== null) {
    head.length = null;
    head.keepAlive = false;
  }
  return head;
}

/** Where the parser is in an answer. */
const enum Stage {
  Head,
  Length,
  ChunkSize,
  ChunkData,
  ChunkDataEnd,
  Trailers,
  UntilClose,
}

/** One keep-alive connection to an origin, serving one exchange at a time. */
class Connection {
  private readonly socket: net.Socket;
  private exchange: Http1Exchange | null = null;
  /** Whether the exchange under way came to a connection that had served one before. */
  private reused = false;
  /** Bytes of the answer seen so far (any: a connection that answered anything is not retried on). */
  private answered = false;
  private stage = Stage.Head;
  private pending: Buffer | null = null;
  private head: Head | null = null;
  private remaining = 0;
  private body: Buffer[] = [];
  private bodySize = 0;
  private idleTimer: NodeJS.Timeout | null = null;
  private closed = false;
  /** The server's keep-alive time-out, as its last answer gave it. */
  private serverKeepAliveMs: number | null = null;

  constructor(
    private readonly origin: Origin,
    target: Target,
    options: Http1ClientOptions,
  ) {
    const socket = target.tls
      ? tls.connect({
          host: target.host,
          port: target.port,
          servername: target.servername,
          lookup: options.lookup,
          // Explicit, so NODE_TLS_REJECT_UNAUTHORIZED=0 cannot turn certificate checks off
          // (docs/security.md).
          rejectUnauthorized: true,
          ...(options.ca ? { ca: options.ca } : {}),
        })
      : net.connect({ host: target.host, port: target.port, lookup: options.lookup });
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('end', () => this.onEnd());
    socket.on('error', (err) => this.lost(err));
    socket.on('close', () => this.lost(null));
    this.socket = socket;
  }

  start(exchange: Http1Exchange, reused: boolean): void {
    if (this.idleTimer) {
      clearTimeout(this.idleTimer);
      this.idleTimer = null;
    }
    this.exchange = exchange;
    exchange.conn = this;
    this.reused = reused;
    this.answered = false;
    this.stage = Stage.Head;
    this.pending = null;
    this.head = null;
    this.body = [];
    this.bodySize = 0;
    this.socket.write(exchange.request);
  }

  /**
   * How long this connection may stay idle: `limitMs`, or less if the server said it keeps idle
   * connections for less (`Keep-Alive: timeout=`), with a margin, so a request is not sent just as the
   * server closes the connection (then it would be sent once more; see lost).
   */
  idleMsWithin(limitMs: number): number {
    return this.serverKeepAliveMs === null
      ? limitMs
      : Math.min(limitMs, this.serverKeepAliveMs - KEEP_ALIVE_MARGIN_MS);
  }

  idle(timeoutMs: number): void {
    this.idleTimer = setTimeout(() => this.destroy(), timeoutMs);
    this.idleTimer.unref();
  }

  destroy(): void {
    this.socket.destroy();
    this.lost(null);
  }

  private onData(chunk: Buffer): void {
    const exchange = this.exchange;
    if (!exchange) {
      // Bytes nobody asked for (a server talking out of turn): the connection cannot be trusted.
      this.destroy();
      return;
    }
    this.answered = true;
    try {
      this.parse(chunk);
    } catch (err) {
      exchange.finish(err as Error);
      this.exchange = null;
      this.destroy();
    }
  }

  /** Consumes `chunk`; ends the exchange when its answer is complete (or enough of it is read). */
  private parse(chunk: Buffer): void {
    let data = this.pending ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pending = null;
    let at = 0;
    while (this.exchange) {
      switch (this.stage) {
        case Stage.Head: {
          const end = data.indexOf(HEAD_END, at);
          // The head so far, whether or not its end has arrived.
          if ((end < 0 ? data.length : end) - at > MAX_HEAD_BYTES)
            throw new Http1Error('HPE_HEADER_OVERFLOW', `answer head larger than ${MAX_HEAD_BYTES} bytes`);
          if (end < 0) {
            this.pending = data.subarray(at);
            return;
          }
          const head = parseHead(data.toString('latin1', at, end));
          at = end + 4;
          if (head.status < 200) {
            // 100 Continue, 103 Early Hints: interim answers, the real one follows. 101 is not asked for.
            if (head.status === 101)
              throw new Http1Error('HPE_UNEXPECTED_UPGRADE', 'the subscriber switched protocols');
            continue;
          }
          this.head = head;
          if (head.status === 204 || head.status === 304) return this.complete(data, at);
          if (head.chunked) this.stage = Stage.ChunkSize;
          else if (head.length !== null) {
            this.remaining = head.length;
            this.stage = Stage.Length;
            if (head.length === 0) return this.complete(data, at);
          } else {
            head.keepAlive = false;
            this.stage = Stage.UntilClose;
          }
          break;
        }
        case Stage.Length: {
          at = this.takeRemaining(data, at);
          if (this.remaining === 0) return this.complete(data, at);
          if (this.bodySize >= this.exchange.bodyCap) return this.enough();
          return;
        }
        case Stage.ChunkSize:
        case Stage.Trailers: {
          const eol = data.indexOf(CRLF, at);
          if (eol < 0) {
            if (data.length - at > MAX_HEAD_BYTES)
              throw new Http1Error('HPE_HEADER_OVERFLOW', 'chunk size or trailer line too long');
            this.pending = data.subarray(at);
            return;
          }
          const line = data.toString('latin1', at, eol);
          at = eol + 2;
          if (this.stage === Stage.Trailers) {
            if (line === '') return this.complete(data, at);
            break;
          }
          const size = /^([0-9a-fA-F]{1,8})[ \t]*(?:;.*)?$/.exec(line);
          if (!size) throw new Http1Error('HPE_INVALID_CHUNK_SIZE', 'invalid chunk size in the answer');
          this.remaining = parseInt(size[1]!, 16);
          this.stage = this.remaining === 0 ? Stage.Trailers : Stage.ChunkData;
          break;
        }
        case Stage.ChunkData: {
          at = this.takeRemaining(data, at);
          if (this.bodySize >= this.exchange.bodyCap) return this.enough();
          if (this.remaining > 0) return;
          this.stage = Stage.ChunkDataEnd;
          break;
        }
        case Stage.ChunkDataEnd: {
          if (data.length - at < 2) {
            this.pending = data.subarray(at);
            return;
          }
          if (data[at] !== 13 || data[at + 1] !== 10)
            throw new Http1Error('HPE_INVALID_CHUNK_SIZE', 'chunk not followed by CRLF in the answer');
          at += 2;
          this.stage = Stage.ChunkSize;
          break;
        }
        case Stage.UntilClose: {
          this.take(data.subarray(at));
          if (this.bodySize >= this.exchange.bodyCap) return this.enough();
          return;
        }
      }
      if (at >= data.length) return;
      data = data.subarray(at);
      at = 0;
    }
  }

  /** Takes what `data` holds from `at` of the `remaining` bytes of a length or chunk; returns the new `at`. */
  private takeRemaining(data: Buffer, at: number): number {
    const n = Math.min(this.remaining, data.length - at);
    this.take(data.subarray(at, at + n));
    this.remaining -= n;
    return at + n;
  }

  private take(part: Buffer): void {
    const cap = this.exchange!.bodyCap;
    if (this.bodySize >= cap || part.length === 0) return;
    const kept = part.length > cap - this.bodySize ? part.subarray(0, cap - this.bodySize) : part;
    // A copy: `part` is a view of a socket chunk the body would otherwise keep whole.
    this.body.push(Buffer.from(kept));
    this.bodySize += kept.length;
  }

  /** The answer is complete at `at` in `data`. */
  private complete(data: Buffer, at: number): void {
    const reusable = this.head!.keepAlive && at === data.length;
    this.serverKeepAliveMs = this.head!.keepAliveMs ?? this.serverKeepAliveMs;
    this.answer();
    if (reusable) this.origin.release(this);
    else this.destroy();
  }

  /** As much of the body as is kept has arrived: the rest is never read, and the connection goes. */
  private enough(): void {
    this.answer();
    this.destroy();
  }

  private answer(): void {
    const exchange = this.exchange!;
    this.exchange = null;
    const head = this.head!;
    exchange.finish(null, {
      status: head.status,
      retryAfter: head.retryAfter,
      body: this.body.length === 1 ? this.body[0]! : Buffer.concat(this.body),
    });
  }

  private onEnd(): void {
    // The server finished sending: an answer read until close is complete now. (The socket, not
    // half-open, then ends and closes by itself.)
    if (this.exchange && this.stage === Stage.UntilClose) this.answer();
  }

  /**
   * The connection ended or failed. An exchange under way fails with it, except one on a reused
   * connection that got no byte of an answer: the server most likely closed the idle connection as
   * the request went out, so it is sent once more on a new one. A webhook may arrive twice anyway
   * (docs/contract.md §5: consumers deduplicate by hook-id).
   */
  private lost(err: Error | null): void {
    if (this.closed) return;
    this.closed = true;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.socket.destroy();
    const exchange = this.exchange;
    this.exchange = null;
    if (exchange && !exchange.done && this.reused && !this.answered && !exchange.resent) {
      exchange.resent = true;
      exchange.conn = null;
      // Queued first, so it takes the slot this connection frees (closed, next) if none is idle.
      this.origin.submit(exchange);
      this.origin.closed(this);
      return;
    }
    this.origin.closed(this);
    if (!exchange || exchange.done) return;
    exchange.finish(
      err ?? new Http1Error('ECONNRESET', 'the subscriber closed the connection before answering'),
    );
  }
}

/** The connections to one origin, and the exchanges waiting for one. */
class Origin {
  private readonly idle: Connection[] = [];
  private readonly waiting: Http1Exchange[] = [];
  private waitingHead = 0;
  private open = 0;

  constructor(
    private readonly target: Target,
    private readonly options: Http1ClientOptions,
    /** Called when the origin has no connection and nothing waiting: the client forgets it. */
    private readonly onEmpty: (origin: Origin) => void,
  ) {}

  submit(exchange: Http1Exchange): void {
    if (exchange.done) return;
    const conn = this.idle.pop();
    if (conn) return conn.start(exchange, true);
    if (this.open < this.options.connectionsPerOrigin) {
      this.open++;
      return new Connection(this, this.target, this.options).start(exchange, false);
    }
    this.waiting.push(exchange);
  }

  release(conn: Connection): void {
    const next = this.nextWaiting();
    if (next) return conn.start(next, true);
    const idleMs = conn.idleMsWithin(this.options.idleTimeoutMs);
    if (idleMs <= 0) return conn.destroy();
    this.idle.push(conn);
    conn.idle(idleMs);
  }

  closed(conn: Connection): void {
    this.open--;
    const i = this.idle.indexOf(conn);
    if (i >= 0) this.idle.splice(i, 1);
    const next = this.nextWaiting();
    if (next) this.submit(next);
    // A worker may attempt thousands of endpoints' origins over its life: one that is done with goes.
    else if (this.open === 0) this.onEmpty(this);
  }

  private nextWaiting(): Http1Exchange | undefined {
    while (this.waitingHead < this.waiting.length) {
      const next = this.waiting[this.waitingHead++]!;
      if (this.waitingHead > 1024 && this.waitingHead * 2 > this.waiting.length) {
        this.waiting.splice(0, this.waitingHead);
        this.waitingHead = 0;
      }
      if (!next.done) return next;
    }
    return undefined;
  }

  destroyAll(): void {
    for (const conn of this.idle.splice(0)) conn.destroy();
  }
}

export class Http1Client {
  private readonly origins = new Map<string, Origin>();

  constructor(private readonly options: Http1ClientOptions) {}

  /**
   * POSTs `body` to `url` with `headers` (lower-case names, values already valid header text), and
   * calls back with the answer, or with the connection's error. The exchange can be aborted.
   */
  post(
    url: URL,
    headers: Record<string, string>,
    body: string,
    bodyCap: number,
    callback: Http1Callback,
  ): Http1Exchange {
    const bodyBytes = Buffer.byteLength(body, 'utf8');
    let head = `POST ${url.pathname}${url.search} HTTP/1.1\r\nhost: ${url.host}\r\ncontent-length: ${bodyBytes}\r\n`;
    for (const name in headers) {
      const value = headers[name]!;
      // Visible ASCII only: no line breaks that would end the head early or smuggle a header.
      if (!HEADER_NAME.test(name) || !HEADER_VALUE.test(value))
        throw new Http1Error('ERR_INVALID_HEADER', `invalid request header ${JSON.stringify(name)}`);
      head += `${name}: ${value}\r\n`;
    }
    head += '\r\n';
    // Head and body encoded straight into the one buffer written, with no copy of the body between.
    const headBytes = Buffer.byteLength(head, 'latin1');
    const request = Buffer.allocUnsafe(headBytes + bodyBytes);
    request.write(head, 0, 'latin1');
    request.write(body, headBytes, 'utf8');
    const exchange = new Http1Exchange(request, bodyCap, callback);
    this.originOf(url).submit(exchange);
    return exchange;
  }

  private originOf(url: URL): Origin {
    const key = url.origin;
    let origin = this.origins.get(key);
    if (!origin) {
      const secure = url.protocol === 'https:';
      const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
      origin = new Origin(
        {
          tls: secure,
          host,
          port: url.port ? Number(url.port) : secure ? 443 : 80,
          servername: net.isIP(host) === 0 ? host : undefined,
        },
        this.options,
        (done) => {
          if (this.origins.get(key) === done) this.origins.delete(key);
        },
      );
      this.origins.set(key, origin);
    }
    return origin;
  }

  /** Origins with a connection open or an exchange waiting (the others are forgotten). */
  get originsInUse(): number {
    return this.origins.size;
  }

  /** Closes the idle connections; exchanges under way are the caller's to abort. */
  close(): void {
    for (const origin of this.origins.values()) origin.destroyAll();
    this.origins.clear();
  }
}
