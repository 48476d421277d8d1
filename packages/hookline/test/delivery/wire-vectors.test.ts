// The server signs with the consumer's code (docs/contract.md §7: one implementation, shared test
// vectors): the headers an attempt is sent with reproduce @hookline/consumer's vectors for v1, v1a and
// a rotation grace, from the keys the server stores (whsec_ secrets, whsk_ private keys).
import { describe, expect, it } from 'vitest';
import vectors from '../../../consumer/test/vectors.json' with { type: 'json' };
import { deliveryHeaders, requestHeaders } from '../../src/delivery/wire.js';

const headersFor = (keys: string[], v: { id: string; timestamp: number; body: string }) =>
  deliveryHeaders({
    hookId: v.id,
    eventType: 'user.created',
    body: v.body,
    secrets: keys,
    nowMs: v.timestamp * 1000,
  });

describe('the wire reproduces the shared signature vectors', () => {
  it.each(vectors.v1)('v1: "$name"', (v) => {
    expect(headersFor([v.secret], v)['hook-signature']).toBe(v.signature);
  });
  it.each(vectors.v1a)('v1a: "$name"', (v) => {
    expect(headersFor([v.privateKey], v)['hook-signature']).toBe(v.signature);
  });
  it.each(vectors.headers)('several keys: "$name"', (v) => {
    expect(headersFor(v.keys, v)['hook-signature']).toBe(v.header);
  });

  it("puts custom headers on the request without ever replacing hookline's own", () => {
    const own = headersFor([vectors.v1[0]!.secret], vectors.v1[0]!);
    const sent = requestHeaders(own, { 'x-token': 't', 'hook-id': 'forged' });
    expect(sent['x-token']).toBe('t');
    expect(sent['hook-id']).toBe(own['hook-id']);
  });
});
