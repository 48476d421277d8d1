// An OTLP receiver for tests: a plain node:http server taking the http/json protocol on /v1/traces
// (the OpenTelemetry protocol's JSON encoding: ids in hex, attributes as typed values).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, string | number | boolean>;
  service: string;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: number | string;
  boolValue?: boolean;
}
interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}

const valueOf = (v: OtlpValue) =>
  v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : v.boolValue!);
const attributesOf = (list: OtlpAttribute[] = []) =>
  Object.fromEntries(list.map((a) => [a.key, valueOf(a.value)]));

export interface OtlpReceiver {
  url: string;
  /** Every POST, whatever its path. */
  posts: number;
  /** The path and content type of each POST. */
  received: string[];
  spans: ReceivedSpan[];
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const received: OtlpReceiver = { url: '', posts: 0, received: [], spans: [], close: async () => {} };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.posts++;
      received.received.push(`${req.url} ${req.headers['content-type']}`);
      if (req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      // Protobuf is counted, not decoded: an empty ExportTraceServiceResponse is zero bytes.
      if (req.headers['content-type'] === 'application/x-protobuf') {
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans: {
          resource: { attributes: OtlpAttribute[] };
          scopeSpans: {
            spans: (Omit<ReceivedSpan, 'attributes' | 'service'> & { attributes: OtlpAttribute[] })[];
          }[];
        }[];
      };
      for (const rs of body.resourceSpans) {
        const service = String(attributesOf(rs.resource.attributes)['service.name']);
        for (const ss of rs.scopeSpans) {
          for (const s of ss.spans) {
            received.spans.push({
              ...s,
              parentSpanId: s.parentSpanId ?? '',
              attributes: attributesOf(s.attributes),
              service,
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  received.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  received.close = () => new Promise((resolve) => server.close(() => resolve()));
  return received;
}
