// Emitting an event: validate, write the message durably (encrypted), wake the workers, answer.
// Nothing here depends on how many endpoints subscribe or how they behave: a tenant's few endpoints
// may get their deliveries in the same transaction (engine/fanout.ts), many are left to the workers.
import type { Context } from '../context.js';
import { HooklineError } from '../errors.js';
import { newId } from '../ids.js';
import { isConnectionLoss, isUniqueViolation, type Queryable } from '../store/db.js';
import { insertAndFanOut } from '../engine/fanout.js';
import { messageAad, storedKeys } from '../engine/sealing.js';
import {
  existingMessageIds,
  findByIdempotencyKeys,
  idempotencyKeyId,
  releaseIdempotencyKey,
  type MessageRow,
} from '../store/messages.js';
import { ensureTenant } from '../store/tenants.js';
import { SPAN_STATUS_ERROR, type Span } from '../telemetry/tracing.js';
import { fingerprintText, IDEMPOTENCY_WINDOW_MS, validate } from '../engine/validate-event.js';

export interface EmitInput {
  tenantId: string;
  type: string;
  data: unknown;
  idempotencyKey?: string | null;
  /**
   * Deliveries of a tenant's messages sharing this key go to each endpoint one at a time, in emit
   * order (docs/contract.md §6, docs/delivery.md "Ordered delivery").
   */
  orderingKey?: string | null;
  /** The API request's span, when tracing is on: the emit's span is its child. */
  requestSpan?: Span | null;
}

export interface EmitResult {
  id: string;
  /** True when an earlier emit with the same idempotency key already created this message. */
  replayed: boolean;
}

interface Prepared {
  input: EmitInput;
  /** The Idempotency-Key as stored: its keyed hash (crypto/envelope.ts, keyHash); null without one. */
  key: string | null;
  /** The ordering_key as stored: its keyed hash, and sealed; null without one. */
  orderingKey: string | null;
  orderingKeySealed: Buffer | null;
  fingerprint: string | null;
  /** The new message's id, made with the emit: its sealed payload is bound to it. */
  id: string;
  /**
   * The body, sealed as the emit arrives, not in the group's transaction: on SQLite that transaction
   * holds the write lock the delivery thread also needs, and sealing in it was ~40 % of the time the
   * API held that lock (bench/HISTORY.md, "Session of run Q").
   */
  payload: Buffer;
  /** The emit span's `traceparent`, stored with the message; null when tracing is off. */
  traceContext: string | null;
}

interface Waiting extends Prepared {
  resolve: (result: EmitResult) => void;
  reject: (err: unknown) => void;
}

/** Emits written per transaction at most. */
const GROUP_LIMIT = 256;

/**
 * Writes emits durably with group commit (docs/architecture.md, "Emitting"): emits that arrive while a
 * write is under way wait and go together in the next transaction, as one multi-row insert, and each
 * is answered only once that transaction has committed. With no write under way an emit goes at once,
 * so an idle service adds no delay.
 */
export class Emitter {
  /** Tenants known to exist already, to spare a write per emit. */
  private readonly knownTenants = new Set<string>();
  private waiting: Waiting[] = [];
  private writing = false;

  constructor(private readonly ctx: Context) {}

  /**
   * Messages written: where emits leave fan-out to the workers, that is what they are woken for;
   * where an emit fans out itself, its deliveries may be claimed at once as well (store/work-signal.ts).
   */
  private wakeWorkers(): void {
    this.ctx.signal.notify(this.ctx.db.capabilities.fanOutOnEmit ? 'work' : 'fanout');
  }

  emit(input: EmitInput): Promise<EmitResult> {
    let prepared: Prepared;
    try {
      const body = validate(input);
      const { envelope } = this.ctx;
      const id = newId('message', this.ctx.clock());
      const { idempotencyKey: key, orderingKey, orderingKeySealed } = storedKeys(envelope, id, input);
      const fingerprint = key === null ? null : envelope.digest(fingerprintText(input));
      const payload = envelope.seal(body, messageAad(id));
      prepared = { input, key, orderingKey, orderingKeySealed, fingerprint, id, payload, traceContext: null };
    } catch (err) {
      return Promise.reject(err);
    }
    // One boolean when tracing is off: no span, no traceparent (docs/operators.md, "Tracing").
    if (!this.ctx.tracing.enabled) return this.enqueue(prepared);
    const span = this.ctx.tracing.startSpan('hookline.emit', input.requestSpan ?? null, {
      'hookline.tenant_id': input.tenantId,
      'hookline.event_type': input.type,
    });
    prepared.traceContext = this.ctx.tracing.traceparentOf(span);
    return this.enqueue(prepared).then(
      (result) => {
        span.setAttributes({ 'hookline.message_id': result.id, 'hookline.replayed': result.replayed });
        span.end();
        return result;
      },
      (err: unknown) => {
        span.setStatus({
          code: SPAN_STATUS_ERROR,
          message: err instanceof HooklineError ? err.code : 'failed',
        });
        span.end();
        throw err;
      },
    );
  }

  private enqueue(prepared: Prepared): Promise<EmitResult> {
    return new Promise<EmitResult>((resolve, reject) => {
      // Field by field, not `{ ...prepared, resolve, reject }`: a spread that adds properties made a
      // new hidden class for every emit here (V8's --log-maps: two a request), and every read of a
      // Waiting was megamorphic (bench/HISTORY.md, "Session of run W").
      const { input, key, orderingKey, orderingKeySealed, fingerprint, id, payload, traceContext } = prepared;
      this.waiting.push({
        input,
        key,
        orderingKey,
        orderingKeySealed,
        fingerprint,
        id,
        payload,
        traceContext,
        resolve,
        reject,
      });
      // The write starts after the requests read in this turn of the event loop have joined it: an
      // SQLite transaction runs synchronously, so starting at once would commit each emit alone.
      if (!this.writing) {
        this.writing = true;
        setImmediate(() => void this.drain());
      }
    });
  }

  private async drain(): Promise<void> {
    try {
      while (this.waiting.length > 0) {
        const group = this.takeGroup();
        await this.writeGroup(group);
      }
    } finally {
      this.writing = false;
    }
  }

  /** The next group: one emit per tenant and Idempotency-Key, so no group races with itself. */
  private takeGroup(): Waiting[] {
    const group: Waiting[] = [];
    const rest: Waiting[] = [];
    const keys = new Set<string>();
    for (const w of this.waiting) {
      const k = w.key === null ? null : `${w.input.tenantId}\u0000${w.key}`;
      if (group.length >= GROUP_LIMIT || (k !== null && keys.has(k))) rest.push(w);
      else {
        if (k !== null) keys.add(k);
        group.push(w);
      }
    }
    this.waiting = rest;
    return group;
  }

  private async writeGroup(group: Waiting[]): Promise<void> {
    let results: (EmitResult | HooklineError)[];
    let wake: boolean;
    try {
      ({ results, wake } = this.isOneInsert(group)
        ? await this.writeOneInsert(group, this.ctx.clock())
        : await this.ctx.db.transaction((tx) => this.write(tx, group)));
    } catch (err) {
      if (isConnectionLoss(err)) return this.afterLostConnection(group, err);
      // One emit spoilt the group (most likely a key another process inserted meanwhile): each goes
      // alone, so only that one fails, or reads the winner's answer.
      if (group.length > 1 || isUniqueViolation(err)) {
        for (const w of group) await this.writeGroup1(w);
      } else group[0]!.reject(err);
      return;
    }
    for (const w of group) this.knownTenants.add(w.input.tenantId);
    if (wake) this.wakeWorkers();
    group.forEach((w, i) => {
      const r = results[i]!;
      if (r instanceof HooklineError) w.reject(r);
      else w.resolve(r);
    });
  }

  /**
   * A group's transaction lost its connection (PostgreSQL). Lost before COMMIT, it was retried and
   * failed again; lost during COMMIT, it may have committed all the same. Its messages' ids, made as
   * the emits arrived, tell: written, the emits with a new message are answered, and the others (an
   * Idempotency-Key seen before) are asked again; not written, each emit goes alone in a transaction
   * of its own. Written twice, never.
   */
  private async afterLostConnection(group: Waiting[], err: unknown): Promise<void> {
    let written: Set<string>;
    try {
      written = await existingMessageIds(
        this.ctx.db,
        group.map((w) => w.id),
      );
    } catch {
      for (const w of group) w.reject(err);
      return;
    }
    if (written.size > 0) {
      for (const w of group) this.knownTenants.add(w.input.tenantId);
      this.wakeWorkers();
    }
    for (const w of group) {
      if (written.has(w.id)) w.resolve({ id: w.id, replayed: false });
      else await this.writeGroup1(w);
    }
  }

  /**
   * Where the store leaves fan-out to the workers (PostgreSQL), a group without Idempotency-Keys, all
   * of whose tenants are known to exist, is one multi-row insert: atomic by itself, so it runs without
   * BEGIN and COMMIT around it, one round trip instead of three. An API process answers in bursts
   * between those round trips, so each one it saves shortens every emit's wait (docs/architecture.md,
   * "Emitting"). Where emits fan out (SQLite), the write reads, then inserts: it needs its transaction.
   */
  private isOneInsert(group: readonly Waiting[]): boolean {
    return (
      !this.ctx.db.capabilities.fanOutOnEmit &&
      group.every((w) => w.key === null && this.knownTenants.has(w.input.tenantId))
    );
  }

  /**
   * Writes a group that isOneInsert. Were the connection lost on the way, the insert may or may not
   * have committed: it is sent once more with the same rows, which carry their own ids, so it either
   * writes them or finds them written (a unique violation on the id, the only unique key such rows
   * have). Either way each emit is written once, as a transaction retried before its COMMIT would be.
   */
  private async writeOneInsert(
    group: readonly Prepared[],
    now: number,
  ): Promise<{ results: (EmitResult | HooklineError)[]; wake: boolean }> {
    const rows = group.map((p) => this.newMessage(p, now));
    const results = rows.map((r) => ({ id: r.id, replayed: false }));
    const insert = async () => ({
      results,
      wake: (await insertAndFanOut(this.ctx.db, rows, now, this.ctx.tracing)).workForWorkers,
    });
    try {
      return await insert();
    } catch (err) {
      if (!isConnectionLoss(err)) throw err;
    }
    try {
      return await insert();
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      return { results, wake: true };
    }
  }

  private newMessage(p: Prepared, now: number): MessageRow {
    return {
      id: p.id,
      tenant_id: p.input.tenantId,
      event_type: p.input.type,
      payload: p.payload,
      idempotency_key: p.key,
      idempotency_fingerprint: p.fingerprint,
      created_at: now,
      awaits_fanout: true,
      ordering_key: p.orderingKey,
      ordering_key_sealed: p.orderingKeySealed,
      trace_context: p.traceContext,
    };
  }

  private async writeGroup1(w: Waiting): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        const {
          results: [result],
          wake,
        } = await this.ctx.db.transaction((tx) => this.write(tx, [w]));
        if (result instanceof HooklineError) throw result;
        if (wake) this.wakeWorkers();
        this.knownTenants.add(w.input.tenantId);
        w.resolve(result!);
        return;
      } catch (err) {
        // Two requests with the same new key raced: the loser reads the winner's answer.
        if (attempt === 0 && w.key !== null && isUniqueViolation(err)) continue;
        w.reject(err);
        return;
      }
    }
  }

  /**
   * Writes a group in `tx`: the group's Idempotency-Keys are looked up in one statement, new messages
   * go in one insert. `wake`: whether the workers have anything to do for it (an emit whose tenant
   * has no matching endpoint leaves them nothing on SQLite, where it is fanned out at once).
   */
  private async write(
    tx: Queryable,
    group: readonly Prepared[],
  ): Promise<{ results: (EmitResult | HooklineError)[]; wake: boolean }> {
    const now = this.ctx.clock();
    const results: (EmitResult | HooklineError)[] = [];
    const rows: MessageRow[] = [];
    const tenants = new Set<string>();
    const earlier = await findByIdempotencyKeys(
      tx,
      group.flatMap((p) => (p.key === null ? [] : [{ tenantId: p.input.tenantId, key: p.key }])),
    );
    for (const p of group) {
      if (p.key !== null) {
        const existing = earlier.get(idempotencyKeyId(p.input.tenantId, p.key));
        if (existing && now - Number(existing.created_at) < IDEMPOTENCY_WINDOW_MS) {
          results.push(
            existing.idempotency_fingerprint !== p.fingerprint
              ? new HooklineError(
                  'idempotency_conflict',
                  'this Idempotency-Key was already used with a different event in the last 24 hours',
                )
              : { id: existing.id, replayed: true },
          );
          continue;
        }
        if (existing) await releaseIdempotencyKey(tx, existing.id);
      }
      if (!this.knownTenants.has(p.input.tenantId)) tenants.add(p.input.tenantId);
      const row = this.newMessage(p, now);
      rows.push(row);
      results.push({ id: row.id, replayed: false });
    }
    for (const tenant of [...tenants].sort()) await ensureTenant(tx, tenant, now);
    const { workForWorkers } = await insertAndFanOut(tx, rows, now, this.ctx.tracing);
    return { results, wake: workForWorkers };
  }
}
