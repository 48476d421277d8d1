// A steady stream of emits against a running API process, for the fault tests: it records which events
// were acknowledged (202) and when, and carries on through refusals and connection errors, which is
// what a producer does while the service is in trouble.
import { postJson } from './process.js';

export interface Accepted {
  id: string;
  at: number;
}

export interface EventStream {
  /** Events answered 202, in the order of their answers. */
  accepted: Accepted[];
  /** Requests answered otherwise, or not answered at all. */
  failed: () => number;
  /** Stops sending and waits for the requests under way. */
  stop(): Promise<void>;
}

export function startEventStream(
  address: () => string,
  producerKey: string,
  options: { concurrency?: number; pauseMs?: number; tenantId?: string } = {},
): EventStream {
  const accepted: Accepted[] = [];
  let failed = 0;
  let running = true;
  let n = 0;
  const loop = async () => {
    let seen = 0;
    while (running) {
      try {
        const res = await postJson(address(), '/v1/events', producerKey, {
          tenant_id: options.tenantId ?? 'acme',
          type: 'user.updated',
          data: { n: n++ },
        });
        const body = (await res.json().catch(() => null)) as { id?: string } | null;
        if (res.status === 202 && body?.id) accepted.push({ id: body.id, at: Date.now() });
        else failed++;
      } catch {
        failed++;
      }
      // After a failure, a pause that does not spin on a service that is down.
      const pause = options.pauseMs ?? 5;
      await new Promise((r) => setTimeout(r, failed > seen ? Math.max(pause, 20) : pause));
      seen = failed;
    }
  };
  const loops = Promise.all(Array.from({ length: options.concurrency ?? 1 }, loop));
  return {
    accepted,
    failed: () => failed,
    stop: async () => {
      running = false;
      await loops;
    },
  };
}

export interface Tally {
  accepted: number;
  /** Acknowledged events that arrived at least once. */
  delivered: number;
  /** Acknowledged events that never arrived. */
  lost: number;
  /** Arrivals beyond the first of the same hook-id (at-least-once redeliveries). */
  redelivered: number;
  /** Events (by their `data.n`) that arrived under more than one hook-id: duplicates a retry cannot fix. */
  duplicated: number;
}

/** Compares what was acknowledged with what a receiver got; `summary` is one line for the test output. */
export function tally(
  accepted: readonly Accepted[],
  received: readonly { headers: Record<string, unknown>; body: string }[],
): Tally & { summary: string } {
  const hookIds = new Set<string>();
  const idsByEvent = new Map<number, Set<string>>();
  for (const r of received) {
    const id = String(r.headers['hook-id']);
    hookIds.add(id);
    const n = (JSON.parse(r.body) as { data: { n: number } }).data.n;
    idsByEvent.set(n, (idsByEvent.get(n) ?? new Set()).add(id));
  }
  const t: Tally = {
    accepted: accepted.length,
    delivered: accepted.filter((a) => hookIds.has(a.id)).length,
    lost: accepted.filter((a) => !hookIds.has(a.id)).length,
    redelivered: received.length - hookIds.size,
    duplicated: [...idsByEvent.values()].filter((ids) => ids.size > 1).length,
  };
  const summary = Object.entries(t)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
  return { ...t, summary };
}
