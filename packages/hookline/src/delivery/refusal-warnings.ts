// Telling operators of refused connections (docs/operators.md, "Refused connections"): a warning per
// endpoint and reason per interval, never per attempt, with the endpoint and the reason's class and
// hookline's own words for it; never the payload or anything the subscriber sent.
import type { Logger } from 'pino';
import type { Context } from '../context.js';
import { refusalOf, type RefusalReason } from '../net/index.js';

/** What the warning says, per reason. */
export const REFUSAL_WARNINGS: Readonly<Record<RefusalReason, string>> = {
  ssrf: "delivery refused: the endpoint's address is not public (HOOKLINE_ALLOW_PRIVATE_NETWORKS is false)",
  tls: 'delivery failed: TLS handshake or certificate check with the endpoint failed',
  proxy: 'delivery failed: the egress proxy refused the connection or could not be reached',
};

/** A refused endpoint is warned about at most once per reason in this interval. */
export const REFUSAL_WARNING_INTERVAL_MS = 5 * 60_000;

/**
 * Counts refused attempts in /metrics (hookline_delivery_refusals_total, by reason) and warns of them:
 * once per endpoint and reason per interval, so an endpoint refused on every attempt gives one line
 * per interval, not one per attempt. Per process (each worker warns on its own).
 */
export class RefusalWarnings {
  private readonly lastWarned = new Map<string, number>();

  constructor(
    private readonly ctx: Pick<Context, 'metrics' | 'clock'>,
    private readonly intervalMs = REFUSAL_WARNING_INTERVAL_MS,
  ) {}

  /** An attempt's result: counted and perhaps warned of when it was refused. `log` carries the endpoint id. */
  observe(result: { ok: boolean; error: string | null }, endpointId: string, log: () => Logger): void {
    if (result.ok) return;
    const reason = refusalOf(result.error);
    if (reason === null) return;
    this.ctx.metrics.refusals.inc({ reason });
    if (this.due(endpointId, reason, this.ctx.clock())) {
      // last_error: the same words stored in clear with the delivery (docs/security.md, "What is stored").
      log().warn({ reason, last_error: result.error }, REFUSAL_WARNINGS[reason]);
    }
  }

  private due(endpointId: string, reason: RefusalReason, now: number): boolean {
    const key = `${endpointId} ${reason}`;
    const last = this.lastWarned.get(key);
    if (last !== undefined && now - last < this.intervalMs) return false;
    // Entries whose interval is over are forgotten, so the map holds only recently refused endpoints.
    if (this.lastWarned.size >= 1024) {
      for (const [k, at] of this.lastWarned) if (now - at >= this.intervalMs) this.lastWarned.delete(k);
    }
    this.lastWarned.set(key, now);
    return true;
  }
}
