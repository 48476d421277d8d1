import { blobType, type Dialect } from '../db.js';

export const name = 'initial schema';

// Timestamps are epoch milliseconds (BIGINT) in both dialects; JSON is TEXT; secrets and payloads are
// AES-GCM envelopes (BLOB/BYTEA), never plaintext.
export function statements(dialect: Dialect): string[] {
  const blob = blobType(dialect);
  return [
    `CREATE TABLE tenants (
      id TEXT PRIMARY KEY,
      created_at BIGINT NOT NULL
    )`,
    `CREATE TABLE api_keys (
      id TEXT PRIMARY KEY,
      key_hash TEXT NOT NULL UNIQUE,
      prefix TEXT NOT NULL,
      role TEXT NOT NULL,
      tenant_id TEXT,
      label TEXT NOT NULL DEFAULT '',
      created_at BIGINT NOT NULL,
      revoked_at BIGINT
    )`,
    `CREATE TABLE endpoints (
      id TEXT PRIMARY KEY,
      tenant_id TEXT NOT NULL,
      url TEXT NOT NULL,
      events TEXT NOT NULL,
      description TEXT NOT NULL DEFAULT '',
      status TEXT NOT NULL,
      disabled_reason TEXT,
      secret ${blob} NOT NULL,
      previous_secret ${blob},
      previous_secret_expires_at BIGINT,
      failing_since BIGINT,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      deleted_at BIGINT
    )`,
    `CREATE INDEX endpoints_by_tenant ON endpoints (tenant_id, id)`,
    `CREATE TABLE messages (
      id TEXT PRIMARY KEY,
      tenant_id TEXT NOT NULL,
      event_type TEXT NOT NULL,
      payload ${blob} NOT NULL,
      idempotency_key TEXT,
      idempotency_fingerprint TEXT,
      created_at BIGINT NOT NULL,
      fanned_out_at BIGINT
    )`,
    `CREATE UNIQUE INDEX messages_by_idempotency_key ON messages (tenant_id, idempotency_key)
      WHERE idempotency_key IS NOT NULL`,
    `CREATE INDEX messages_awaiting_fanout ON messages (created_at) WHERE fanned_out_at IS NULL`,
    `CREATE TABLE deliveries (
      id TEXT PRIMARY KEY,
      message_id TEXT NOT NULL REFERENCES messages (id),
      endpoint_id TEXT NOT NULL REFERENCES endpoints (id),
      tenant_id TEXT NOT NULL,
      event_type TEXT NOT NULL,
      status TEXT NOT NULL,
      attempts INTEGER NOT NULL DEFAULT 0,
      next_attempt_at BIGINT NOT NULL,
      lease_expires_at BIGINT,
      last_status INTEGER,
      last_error TEXT,
      first_headers TEXT,
      replay_of TEXT,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      completed_at BIGINT
    )`,
    `CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending'`,
    `CREATE INDEX deliveries_leased ON deliveries (lease_expires_at) WHERE status = 'delivering'`,
    `CREATE INDEX deliveries_by_endpoint ON deliveries (endpoint_id, status)`,
    `CREATE INDEX deliveries_by_message ON deliveries (message_id)`,
    `CREATE TABLE dead_letters (
      id TEXT PRIMARY KEY,
      delivery_id TEXT NOT NULL UNIQUE,
      tenant_id TEXT NOT NULL,
      endpoint_id TEXT NOT NULL,
      message_id TEXT NOT NULL,
      event_type TEXT NOT NULL,
      attempts INTEGER NOT NULL,
      last_error TEXT,
      original ${blob} NOT NULL,
      died_at BIGINT NOT NULL,
      replayed_at BIGINT,
      replay_delivery_id TEXT
    )`,
    `CREATE INDEX dead_letters_by_tenant ON dead_letters (tenant_id, id)`,
    `CREATE INDEX dead_letters_by_endpoint ON dead_letters (endpoint_id, id)`,
    `CREATE TABLE delivery_stats (
      bucket BIGINT NOT NULL,
      endpoint_id TEXT NOT NULL,
      tenant_id TEXT NOT NULL,
      succeeded INTEGER NOT NULL DEFAULT 0,
      failed INTEGER NOT NULL DEFAULT 0,
      dead INTEGER NOT NULL DEFAULT 0,
      PRIMARY KEY (bucket, endpoint_id)
    )`,
    `CREATE TABLE audit_log (
      id TEXT PRIMARY KEY,
      actor_key_id TEXT,
      actor_role TEXT NOT NULL,
      action TEXT NOT NULL,
      target TEXT,
      details TEXT NOT NULL DEFAULT '{}',
      created_at BIGINT NOT NULL
    )`,
  ];
}
