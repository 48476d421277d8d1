// Attempts through an egress proxy (HOOKLINE_EGRESS_PROXY_URL, docs/operators.md "A fixed egress
// address"): every connection to a subscriber is an HTTP CONNECT tunnel through the proxy. hookline
// resolves the subscriber's host itself, through the same guarded lookup as a direct connection, and
// asks the proxy for the checked address, never for a name the proxy would resolve: the SSRF rules
// and the DNS-rebinding check hold through the proxy. TLS runs inside the tunnel, end to end, with
// the endpoint's host name for SNI and the certificate check. The proxy's own address is the
// operator's choice and may be private.
import net, { type LookupFunction } from 'node:net';
import type { buildConnector } from 'undici';
import { assertHostAllowed } from './guarded-lookup.js';
import { PROXY_FAILURE_PREFIX } from './refusal-reasons.js';

export const EGRESS_PROXY_ERROR_CODE = 'ERR_HOOKLINE_EGRESS_PROXY';

/** The proxy refused or could not be reached: a failed attempt whose last_error starts "egress proxy: ". */
export class EgressProxyError extends Error {
  readonly code = EGRESS_PROXY_ERROR_CODE;

  constructor(reason: string) {
    super(`${PROXY_FAILURE_PREFIX}${reason}`);
    this.name = 'EgressProxyError';
  }
}

/** The most of the proxy's answer to CONNECT that is read before giving up on it. */
const MAX_ANSWER_HEAD_BYTES = 16 * 1024;

export interface EgressProxyOptions {
  /** HOOKLINE_EGRESS_PROXY_URL as config.ts checked it. */
  proxyUrl: string;
  /** The guarded lookup (net/guarded-lookup.ts), or the plain one with private networks allowed. */
  lookup: LookupFunction;
  allowPrivateNetworks: boolean;
  /** A tunnel not open within this long fails (the attempt's own deadline ends it anyway). */
  timeoutMs: number;
  /** Opens TLS over a tunnel (undici's connector, given `httpSocket`): certificate checks as direct. */
  tlsOverTunnel: buildConnector.connector;
}

const bare = (host: string) => (host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host);

/** The address to ask the proxy for: an IP literal checked here, or what the guarded lookup gives. */
function resolveChecked(
  host: string,
  options: EgressProxyOptions,
  callback: (err: Error | null, address?: string) => void,
): void {
  if (net.isIP(host) !== 0) {
    try {
      if (!options.allowPrivateNetworks) assertHostAllowed(host);
    } catch (err) {
      return callback(err as Error);
    }
    return callback(null, host);
  }
  options.lookup(host, {}, (err, address) => callback(err, address as string));
}

/** An undici connector that opens each connection as a CONNECT tunnel through the proxy. */
export function egressProxyConnector(options: EgressProxyOptions): buildConnector.connector {
  const proxy = new URL(options.proxyUrl);
  const proxyHost = bare(proxy.hostname);
  const proxyPort = Number(proxy.port);
  const authorization =
    proxy.username || proxy.password
      ? `proxy-authorization: Basic ${Buffer.from(
          `${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`,
        ).toString('base64')}\r\n`
      : '';

  return (opts, callback) => {
    const host = bare(opts.hostname);
    const secure = opts.protocol === 'https:';
    const port = Number(opts.port) || (secure ? 443 : 80);
    let socket: net.Socket | null = null;
    let done = false;
    const finish = (err: Error | null, result?: net.Socket) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (err) {
        socket?.destroy();
        callback(err, null);
      } else callback(null, result!);
    };
    const timer = setTimeout(
      () => finish(new EgressProxyError(`no tunnel within ${options.timeoutMs} ms`)),
      options.timeoutMs,
    );
    timer.unref();

    resolveChecked(host, options, (err, address) => {
      if (err) return finish(err);
      if (done) return;
      const target = net.isIPv6(address!) ? `[${address}]:${port}` : `${address}:${port}`;
      const tunnel = net.connect({ host: proxyHost, port: proxyPort });
      socket = tunnel;
      tunnel.setNoDelay(true);
      let head = Buffer.alloc(0);
      const onError = (e: NodeJS.ErrnoException) =>
        finish(new EgressProxyError(e.code ? `${e.code}: ${e.message}` : 'connection failed'));
      const onClose = () => finish(new EgressProxyError(`closed the connection before answering CONNECT`));
      const onReadable = () => {
        let chunk: Buffer | null;
        while ((chunk = tunnel.read() as Buffer | null) !== null) {
          head = Buffer.concat([head, chunk]);
          const end = head.indexOf('\r\n\r\n');
          if (end < 0) {
            if (head.length > MAX_ANSWER_HEAD_BYTES)
              finish(new EgressProxyError('answer to CONNECT too large'));
            continue;
          }
          tunnel.off('readable', onReadable).off('error', onError).off('close', onClose);
          // The proxy's words stay out of last_error: its status code is enough to act on.
          const status = /^HTTP\/1\.[01] (\d{3})/.exec(head.toString('latin1', 0, Math.min(end, 16)))?.[1];
          if (!status || status[0] !== '2') {
            return finish(
              new EgressProxyError(
                status
                  ? `answered ${status} to CONNECT ${target}`
                  : `answered CONNECT ${target} with no HTTP status`,
              ),
            );
          }
          // Anything past the answer is the subscriber's, for the connection's user to read.
          if (end + 4 < head.length) tunnel.unshift(head.subarray(end + 4));
          if (!secure) return finish(null, tunnel);
          // Errors from here on are the subscriber's (TLS), not the proxy's.
          options.tlsOverTunnel({ ...opts, httpSocket: tunnel }, (tlsErr, tlsSocket) =>
            tlsErr ? finish(tlsErr) : finish(null, tlsSocket!),
          );
          return;
        }
      };
      tunnel.on('error', onError).on('close', onClose).on('readable', onReadable);
      tunnel.once('connect', () =>
        tunnel.write(`CONNECT ${target} HTTP/1.1\r\nhost: ${target}\r\n${authorization}\r\n`),
      );
    });
  };
}
