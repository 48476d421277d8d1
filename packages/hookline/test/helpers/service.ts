// A real hookline service for tests: a real database (SQLite file or PostgreSQL schema), real
// migrations, the real Fastify app (driven with inject) and, when asked, a real delivery worker.
import { randomBytes } from 'node:crypto';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { loadConfig, type Config } from '../../src/config.js';
import { CLI_ACTOR } from '../../src/engine/audit.js';
import { createApiKey } from '../../src/keys/api-keys.js';
import { startService, type Service, type ServiceOptions } from '../../src/service.js';
import type { Role } from '../../src/store/api-keys.js';
import type { Db } from '../../src/store/db.js';
import { createTestDatabase, type StoreKind, type TestDatabase } from './stores.js';

export const TEST_ENCRYPTION_KEY = randomBytes(32).toString('base64');

/** Configuration as the environment would give it, with fast retries for tests. */
export function testEnv(database: TestDatabase, env: Record<string, string> = {}): Record<string, string> {
  return {
    HOOKLINE_DATABASE_URL: database.url,
    HOOKLINE_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    HOOKLINE_ALLOW_PRIVATE_NETWORKS: 'true',
    HOOKLINE_LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    HOOKLINE_RETRY_BASE_MS: '20',
    HOOKLINE_RETRY_MAX_MS: '100',
    HOOKLINE_MAX_RETRIES: '3',
    HOOKLINE_DELIVERY_TIMEOUT_MS: '2000',
    HOOKLINE_PORT: '0',
    HOOKLINE_WORKER_ADMIN_PORT: '0',
    // Suites fire hundreds of requests per second with one key; the limit has its own test.
    HOOKLINE_TENANT_RATE_LIMIT: '0',
    ...env,
  };
}

export interface TestService {
  service: Service;
  database: TestDatabase;
  config: Config;
  /** A key for each role; the tenant key belongs to tenant `acme`. */
  keys: Record<Role, string>;
  keyFor(role: Role, tenantId?: string): Promise<string>;
  inject(options: InjectOptions): Promise<LightMyRequestResponse>;
  /** inject with a bearer key and JSON body. */
  call(method: string, url: string, key: string | null, body?: unknown): Promise<LightMyRequestResponse>;
  close(): Promise<void>;
}

export async function startTestService(
  kind: StoreKind,
  options: {
    env?: Record<string, string>;
    worker?: boolean;
    /** The service's connection to the test database, when it needs other settings than the default. */
    openDb?: (database: TestDatabase) => Db;
  } & Partial<ServiceOptions> = {},
): Promise<TestService> {
  const { env, worker, openDb, workerOptions, ...serviceOptions } = options;
  const database = await createTestDatabase(kind);
  const config = loadConfig(testEnv(database, env));
  const service = await startService(config, {
    api: true,
    processMetrics: false,
    shutdownGraceMs: 2000,
    ...serviceOptions,
    worker: worker ?? false,
    workerOptions: { pollIntervalMs: 50, reapIntervalMs: 200, ...workerOptions },
    db: openDb ? openDb(database) : database.open(),
  });
  const keyFor = async (role: Role, tenantId = 'acme') =>
    (await createApiKey(service.ctx, { role, tenantId: role === 'tenant' ? tenantId : null }, CLI_ACTOR)).key;
  const keys = {
    tenant: await keyFor('tenant'),
    producer: await keyFor('producer'),
    instance_manager: await keyFor('instance_manager'),
  };
  const inject = (o: InjectOptions) => service.app!.inject(o);
  return {
    service,
    database,
    config,
    keys,
    keyFor,
    inject,
    call: (method, url, key, body) =>
      inject({
        method: method as InjectOptions['method'],
        url,
        headers: {
          ...(key ? { authorization: `Bearer ${key}` } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { payload: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
      }),
    close: async () => {
      await service.close();
      await database.drop();
    },
  };
}
