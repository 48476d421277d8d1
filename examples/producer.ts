/**
 * The identity product's side: emit an event to hookline.
 *
 *   HOOKLINE_URL=http://127.0.0.1:8080 HOOKLINE_PRODUCER_KEY=hk_p_… npx tsx examples/producer.ts acme user_29w
 *
 * The call returns as soon as the event is durable; hookline delivers it to the tenant's endpoints
 * afterwards. The Idempotency-Key makes a retried call (after a time-out, say) safe: within 24 hours
 * the same key answers the same message id and delivers nothing twice.
 */
const base = process.env.HOOKLINE_URL ?? 'http://127.0.0.1:8080';
const key = process.env.HOOKLINE_PRODUCER_KEY;
const [tenantId = 'acme', userId = 'user_example'] = process.argv.slice(2);
if (!key) {
  console.error('Set HOOKLINE_PRODUCER_KEY (create one with: npx hookline keys create --role producer)');
  process.exit(1);
}

async function emit(type: string, data: Record<string, unknown>, idempotencyKey: string): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    try {
      const res = await fetch(`${base}/v1/events`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          'idempotency-key': idempotencyKey,
        },
        body: JSON.stringify({ tenant_id: tenantId, type, data }),
        signal: AbortSignal.timeout(5000),
      });
      const body = (await res.json()) as { id?: string; error?: { code: string; message: string } };
      if (res.status === 202 && body.id) return body.id;
      // 4xx: our request is wrong; retrying will not help.
      if (res.status < 500) throw new Error(`${res.status} ${body.error?.code}: ${body.error?.message}`);
    } catch (err) {
      if (attempt >= 3 || (err instanceof Error && /^\d{3} /.test(err.message))) throw err;
    }
    await new Promise((r) => setTimeout(r, 200 * attempt));
  }
}

const id = await emit('user.created', { userId }, `user.created:${userId}`);
console.log(`emitted user.created for ${userId} as ${id}`);
