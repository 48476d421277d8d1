// Emitting inside the identity product's own PostgreSQL transaction (docs/producers.md): the event
// exists if and only if the product's change committed. Everything that can refuse an event —
// validation, sealing — happens here, before the one statement (store/emit-within.ts), so
// a refused event leaves the caller's transaction as it was.
import { randomUUID } from 'node:crypto';
import type { TypedEvent } from '../catalogue/index.js';
import { Envelope, encryptionKeyFromBase64 } from '../crypto/envelope.js';
import { schemaNameProblem } from '../database-url.js';
import { HooklineError } from '../errors.js';
import { messageAad, storedKeys } from '../engine/sealing.js';
import { fingerprintText, IDEMPOTENCY_WINDOW_MS, validate } from '../engine/validate-event.js';
import { newId } from '../ids.js';
import {
  insertWithin,
  type OutboxMessage,
  type OutboxOutcome,
  type SqlClient,
} from '../store/emit-within.js';

export type { SqlClient } from '../store/emit-within.js';

export interface ProducerOptions {
  /** HOOKLINE_ENCRYPTION_KEY of the hookline installation (base64 of 32 bytes): payloads are sealed with it. */
  encryptionKey: string | undefined;
  /** The schema hookline's tables are in (default `public`). */
  schema?: string;
}

/**
 * One event: `type` and `data` are typed by the catalogue (docs/events.md), so a misspelt name or a
 * `user.created` without its `userId` fails to compile.
 */
export type ProducerEvent = TypedEvent & {
  tenantId: string;
  /** Deliveries sharing a key go to each endpoint one at a time, in order (docs/producers.md, "Order"). */
  orderingKey?: string | null;
  /** The same key and tenant within 24 hours answer the same id and write nothing (docs/producers.md). */
  idempotencyKey?: string | null;
};

export interface Producer {
  /** Emits one event inside the transaction `client` has open; visible to the workers at its commit. */
  emitWithin(client: SqlClient, input: ProducerEvent): Promise<{ id: string }>;
  /** Emits several in one round trip: all are validated first, and one invalid input writes nothing. */
  emitManyWithin(client: SqlClient, inputs: readonly ProducerEvent[]): Promise<{ id: string }[]>;
}

interface Prepared {
  message: OutboxMessage;
  /** The index of the earlier input of this call with the same tenant and Idempotency-Key, if any. */
  sameAs: number | null;
}

const IDEMPOTENCY_CONFLICT =
  'this Idempotency-Key was already used with a different event in the last 24 hours';

export function createProducer(options: ProducerOptions): Producer {
  let envelope: Envelope;
  try {
    envelope = new Envelope(encryptionKeyFromBase64(options.encryptionKey ?? ''));
  } catch {
    throw new HooklineError('validation_failed', 'encryptionKey must be the base64 of 32 bytes');
  }
  const schema = options.schema ?? 'public';
  const problem = schemaNameProblem(schema);
  if (problem) throw new HooklineError('validation_failed', problem);
  // Names this producer's wake-ups; workers wake for any origin but their own.
  const wakePayload = `${randomUUID()} fanout`;

  function prepare(inputs: readonly ProducerEvent[], label: (i: number) => string): Prepared[] {
    const now = Date.now();
    const firstOfKey = new Map<string, number>();
    return inputs.map((input, i) => {
      let body: string;
      try {
        body = validate(input);
      } catch (err) {
        if (err instanceof HooklineError) throw new HooklineError(err.code, `${label(i)}${err.message}`);
        throw err;
      }
      // Both keys are stored as keyed hashes, as on the HTTP path (docs/security.md, "What is stored").
      const id = newId('message', now);
      const { idempotencyKey: key, orderingKey, orderingKeySealed } = storedKeys(envelope, id, input);
      const message: OutboxMessage = {
        id,
        tenantId: input.tenantId,
        type: input.type,
        payload: envelope.seal(body, messageAad(id)),
        idempotencyKey: key,
        fingerprint: key === null ? null : envelope.digest(fingerprintText(input)),
        orderingKey,
        orderingKeySealed,
      };
      let sameAs: number | null = null;
      if (key !== null) {
        const name = `${input.tenantId}\u0000${key}`;
        sameAs = firstOfKey.get(name) ?? null;
        if (sameAs === null) firstOfKey.set(name, i);
      }
      return { message, sameAs };
    });
  }

  async function write(client: SqlClient, prepared: readonly Prepared[]): Promise<{ id: string }[]> {
    const firsts = prepared.filter((p) => p.sameAs === null).map((p) => p.message);
    for (const p of prepared) {
      const first = p.sameAs === null ? null : prepared[p.sameAs]!.message;
      if (first && first.fingerprint !== p.message.fingerprint) {
        throw new HooklineError('idempotency_conflict', IDEMPOTENCY_CONFLICT);
      }
    }
    const now = Date.now();
    let outcomes = await insertWithin(client, schema, firsts, now, IDEMPOTENCY_WINDOW_MS, wakePayload);
    // Keys whose earlier use had expired were released by that statement: written again, now free.
    const again = firsts.filter((_, i) => outcomes[i]!.written === null);
    if (again.length > 0) {
      const second = await insertWithin(client, schema, again, now, IDEMPOTENCY_WINDOW_MS, wakePayload);
      const byId = new Map(again.map((m, i) => [m.id, second[i]!]));
      outcomes = outcomes.map((o, i) => (o.written === null ? byId.get(firsts[i]!.id)! : o));
    }
    const idOf = new Map<string, string>();
    firsts.forEach((m, i) => idOf.set(m.id, answer(m, outcomes[i]!)));
    return prepared.map((p) => ({
      id: idOf.get(p.sameAs === null ? p.message.id : prepared[p.sameAs]!.message.id)!,
    }));
  }

  return {
    async emitWithin(client, input) {
      const [result] = await write(
        client,
        prepare([input], () => ''),
      );
      return result!;
    },
    async emitManyWithin(client, inputs) {
      if (inputs.length === 0) return [];
      return write(
        client,
        prepare(inputs, (i) => `inputs[${i}]: `),
      );
    },
  };
}

/** The id an emit answers: its own message's, or the earlier one's under the same Idempotency-Key. */
function answer(message: OutboxMessage, outcome: OutboxOutcome): string {
  const written = outcome.written;
  if (!written) throw new Error(`message ${message.id} was neither written nor found`);
  if (written.id !== message.id && written.fingerprint !== message.fingerprint) {
    throw new HooklineError('idempotency_conflict', IDEMPOTENCY_CONFLICT);
  }
  return written.id;
}
