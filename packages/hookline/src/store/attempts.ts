// What a claim hands a worker and what an outcome is fenced by: the shapes both the claims
// (store/sqlite/claim.ts, store/postgres/claim.ts) and the transitions of store/deliveries.ts speak.
// They stand apart so that neither side imports the other.

/** What an attempt needs, all read by the claim itself: the delivery, its payload and its endpoint. */
export interface ClaimedAttempt {
  id: string;
  message_id: string;
  endpoint_id: string;
  tenant_id: string;
  event_type: string;
  /** The number of this attempt, and its fencing token. */
  attempts: number;
  first_headers: string | null;
  replay_of: string | null;
  ordering_key: string | null;
  /** Envelope of the message's raw body. */
  payload: Buffer;
  /** The emit's W3C `traceparent` (messages.trace_context): the attempt's span joins its trace. */
  trace_context: string | null;
  url: string;
  secret: Buffer;
  previous_secret: Buffer | null;
  previous_secret_expires_at: number | null;
  /** The endpoint's sealed custom headers (engine/sealing.ts, openHeaders); null for none. */
  endpoint_headers: Buffer | null;
  /** 1 for a test event's delivery (POST /v1/webhooks/:id/test): not dead-lettered when it dies. */
  is_test: number | boolean;
  /**
   * The endpoint had no failing streak and no open circuit when claimed: a success then has no health
   * to restore, and the flush skips those writes (1/0 on SQLite, boolean on PostgreSQL).
   */
  endpoint_healthy: boolean | number;
  /**
   * At a rate-limited endpoint, when to send (epoch ms): the attempt's slot in the pace plus a short
   * delay. Slots are one interval apart whichever worker claimed them, so attempts sent at their slot
   * arrive evenly spaced however long each claim took (docs/architecture.md, "Rate limits"). Null
   * without a limit: send at once.
   */
  send_at: number | string | null;
}

export interface ClaimOptions {
  now: number;
  leaseUntil: number;
  /** At most this many deliveries in all. */
  limit: number;
  /** HOOKLINE_ENDPOINT_CONCURRENCY: no endpoint's adaptive limit goes above it. */
  ceiling: number;
}

/** One attempt's place in the queue: the fence of every outcome. */
export interface AttemptRef {
  id: string;
  attempt: number;
}

export interface FencedRow {
  id: string;
  endpoint_id: string;
  ordering_key: string | null;
}

/** A success, with what the queue and the statistics need to count it. */
export interface SuccessRecord extends AttemptRef {
  status: number;
  endpoint_id: string;
  tenant_id: string;
  /** Answered quickly: credit towards a larger limit (store/endpoint-queues.ts). */
  fast: boolean;
  /** How long the answer took, in milliseconds (the adaptive limit's latency signal); null: not known. */
  answerMs: number | null;
  /** A keyed delivery's success lets the next of its line go. */
  ordering_key: string | null;
}
