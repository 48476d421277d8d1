// What every part of hookline is handed: configuration, database, encryption and a logger. Built once
// per process by createContext; tests build their own with a temporary database and a fake clock.
import { pino, type Logger } from 'pino';
import type { Config } from './config.js';
import { Envelope, encryptionKeyFromBase64 } from './crypto/envelope.js';
import { loadOrCreateKeyFile, type KeyFile } from './crypto/key-file.js';
import type { Db } from './store/db.js';
import { openDb } from './store/open.js';
import { Metrics } from './metrics.js';
import { WorkSignal } from './store/work-signal.js';
import { startTracing, type Tracing } from './telemetry/tracing.js';

export type Clock = () => number;

export interface Context {
  readonly config: Config;
  readonly db: Db;
  readonly envelope: Envelope;
  readonly logger: Logger;
  readonly clock: Clock;
  /** Wakes the fan-out and delivery loops when new work is written. */
  readonly signal: WorkSignal;
  readonly metrics: Metrics;
  /** OpenTelemetry spans; `tracing.enabled` is false without an OTLP endpoint (telemetry/tracing.ts). */
  readonly tracing: Tracing;
}

export interface ContextOptions {
  db?: Db;
  logger?: Logger;
  clock?: Clock;
  /** Process-wide metrics (CPU, memory) on /metrics; off in tests that run many services in one process. */
  processMetrics?: boolean;
  /**
   * What the thread that started this one shares of its database connection (store/db.ts,
   * threadShare); that thread's service also runs the store's maintenance.
   */
  threadShare?: SharedArrayBuffer;
  /** Collect the figures read from the database (queue depth); off in the delivery thread. */
  sharedMetrics?: boolean;
}

/** Logs go to stdout for the servers; one-shot commands pass 2 so stdout carries only their answer. */
export function createLogger(config: Config, fd: 1 | 2 = 1): Logger {
  return pino(
    {
      level: config.logLevel,
      // Belt and braces: no code logs these, and if one ever does, they are masked.
      redact: ['req.headers.authorization', '*.signing_secret', '*.secret', '*.key'],
    },
    pino.destination({ fd, sync: fd === 2 }),
  );
}

export async function createContext(config: Config, options: ContextOptions = {}): Promise<Context> {
  let keyBase64 = config.encryptionKey;
  let keyFile: KeyFile | null = null;
  if (keyBase64 === null) {
    keyFile = loadOrCreateKeyFile(config.dataDir ?? './data');
    keyBase64 = keyFile.key;
  }
  const db =
    options.db ??
    (await openDb(config.databaseUrl, {
      synchronous: config.sqliteSynchronous,
      threadShare: options.threadShare,
    }));
  const logger = options.logger ?? createLogger(config);
  if (keyFile?.created) {
    // Once, when the key is generated: later starts find it and say nothing (docs/security.md).
    logger.warn(
      { key_file: keyFile.file },
      `generated a new encryption key in ${keyFile.file}: back it up with the database; without it stored payloads, dead letters and signing secrets cannot be read`,
    );
  }
  const clock = options.clock ?? Date.now;
  return {
    config,
    db,
    envelope: new Envelope(
      encryptionKeyFromBase64(keyBase64),
      config.previousEncryptionKeys.map(encryptionKeyFromBase64),
    ),
    logger,
    clock,
    signal: await WorkSignal.create(db, logger),
    metrics: new Metrics(db, clock, options.processMetrics ?? true, options.sharedMetrics ?? true),
    tracing: await startTracing(config.tracing),
  };
}
