// An OTLP/HTTP receiver that only counts spans: what a traced hookline exports to, so that the traced
// drain pays for exporting as it would in production (the default http/protobuf protocol), while the
// receiver does as little as a collector's front door. It runs in the bench's own process: its CPU is
// in no column of the table.
import { createServer } from 'node:http';

/** Reads a protobuf varint at `at`: [value, next offset]. Lengths here stay far below 2^31. */
function varint(buf, at) {
  let value = 0;
  let shift = 0;
  for (;;) {
    const byte = buf[at++];
    value += (byte & 0x7f) * 2 ** shift;
    if (byte < 0x80) return [value, at];
    shift += 7;
  }
}

/** The length-delimited fields `field` of a protobuf message: [start, end) of each. */
function fields(buf, start, end, field) {
  const found = [];
  let at = start;
  while (at < end) {
    let key;
    [key, at] = varint(buf, at);
    const wire = key & 7;
    if (wire === 0) [, at] = varint(buf, at);
    else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else if (wire === 2) {
      let length;
      [length, at] = varint(buf, at);
      if (key >>> 3 === field) found.push([at, at + length]);
      at += length;
    } else throw new Error(`unexpected protobuf wire type ${wire}`);
  }
  return found;
}

/**
 * Spans in an ExportTraceServiceRequest: resource_spans = 1 → scope_spans = 2 → spans = 2
 * (opentelemetry/proto/collector/trace/v1, trace/v1/trace.proto).
 */
export function countSpans(buf) {
  let n = 0;
  for (const [rs, rsEnd] of fields(buf, 0, buf.length, 1))
    for (const [ss, ssEnd] of fields(buf, rs, rsEnd, 2)) n += fields(buf, ss, ssEnd, 2).length;
  return n;
}

/** Starts the receiver on 127.0.0.1; `url` is what OTEL_EXPORTER_OTLP_ENDPOINT takes. */
export async function startOtlpCounter() {
  const state = { spans: 0, exports: 0, url: '' };
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      state.exports++;
      const body = Buffer.concat(chunks);
      if (req.headers['content-type'] === 'application/json') {
        const json = JSON.parse(body.toString('utf8'));
        for (const rs of json.resourceSpans ?? [])
          for (const ss of rs.scopeSpans ?? []) state.spans += (ss.spans ?? []).length;
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        return;
      }
      state.spans += countSpans(body);
      // An empty ExportTraceServiceResponse is zero bytes.
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${server.address().port}`;
  state.close = () => new Promise((resolve) => server.close(() => resolve()));
  return state;
}
