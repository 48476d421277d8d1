// The one place that reads the environment. Everything else receives a frozen, typed Config.
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { isPostgresUrl, schemaNameProblem, splitSchema } from './database-url.js';

export interface Config {
  readonly databaseUrl: string;
  /** Where the embedded default keeps its files (the SQLite database and the generated key). */
  readonly dataDir: string | null;
  readonly port: number;
  readonly host: string;
  /** base64 of 32 bytes, or null when it must be generated on first start (SQLite only). */
  readonly encryptionKey: string | null;
  /** Earlier keys (base64), still accepted for reading rows written before a key rotation. */
  readonly previousEncryptionKeys: readonly string[];
  readonly maxRetries: number;
  readonly retryBaseMs: number;
  readonly retryMaxMs: number;
  readonly deliveryTimeoutMs: number;
  readonly allowPrivateNetworks: boolean;
  /** PEM certificates of HOOKLINE_CA_FILE: CAs trusted for deliveries besides the default roots. */
  readonly extraCaCertificates: string | null;
  /** HOOKLINE_EGRESS_PROXY_URL, checked: the HTTP CONNECT proxy every attempt goes through, or null. */
  readonly egressProxyUrl: string | null;
  readonly logLevel: string;
  /** Attempts in flight per worker process, all endpoints together. */
  readonly workerConcurrency: number;
  /** The ceiling of each endpoint's adaptive in-flight limit, across all workers together. */
  readonly endpointConcurrency: number;
  /** Health port of `hookline worker` (which serves no API). */
  readonly workerAdminPort: number;
  /** Finished deliveries, their messages and statistics are deleted after this many days. */
  readonly retentionDays: number;
  /** An endpoint failing without a success for this long has its circuit opened (its queue paused). */
  readonly circuitBreakAfterMs: number;
  /** Requests per second one tenant key may make (bursts of twice that); 0 turns the limit off. */
  readonly tenantRateLimit: number;
  /** Endpoints a tenant may have that are not deleted: bounds how far one emit can fan out. */
  readonly maxEndpointsPerTenant: number;
  /** SQLite's `synchronous` pragma: `normal` (fast; a power loss may lose the last commits) or `full`. */
  readonly sqliteSynchronous: 'normal' | 'full';
  /** OpenTelemetry's `OTEL_*` variables (docs/operators.md, "Tracing"); null: no tracing at all. */
  readonly tracing: TracingConfig | null;
}

export type OtlpProtocol = 'http/protobuf' | 'http/json';
export type TracesSampler =
  | 'always_on'
  | 'always_off'
  | 'traceidratio'
  | 'parentbased_always_on'
  | 'parentbased_always_off'
  | 'parentbased_traceidratio';

export interface TracingConfig {
  /** The full URL spans are POSTed to (…/v1/traces). */
  readonly tracesUrl: string;
  readonly protocol: OtlpProtocol;
  readonly serviceName: string;
  readonly sampler: TracesSampler;
  /** OTEL_TRACES_SAMPLER_ARG: the ratio of the `…traceidratio` samplers. */
  readonly samplerRatio: number;
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}

/**
 * Defaults. The retry schedule waits 10 s, 20 s, 40 s … doubling up to a 6 h cap; 16 retries after the
 * first attempt add up to about 35 hours (at least ~26 h with jitter), so a subscriber that is down for
 * a whole day still receives everything once it is back.
 */
export const DEFAULTS = {
  databaseUrl: 'sqlite:./data/hookline.db',
  port: 8080,
  host: '127.0.0.1',
  maxRetries: 16,
  retryBaseMs: 10_000,
  retryMaxMs: 6 * 60 * 60 * 1000,
  deliveryTimeoutMs: 15_000,
  logLevel: 'info',
  workerConcurrency: 128,
  endpointConcurrency: 64,
  workerAdminPort: 8081,
  retentionDays: 30,
  tenantRateLimit: 20,
  maxEndpointsPerTenant: 100,
  circuitBreakAfterMs: 60_000,
  sqliteSynchronous: 'normal',
} as const;

type Env = Record<string, string | undefined>;

/** Every variable loadConfig reads (docs/configuration.md). A `HOOKLINE_` name not here is a mistake. */
export const KNOWN_VARIABLES = [
  'HOOKLINE_DATABASE_URL',
  'HOOKLINE_PORT',
  'HOOKLINE_HOST',
  'HOOKLINE_ENCRYPTION_KEY',
  'HOOKLINE_PREVIOUS_ENCRYPTION_KEYS',
  'HOOKLINE_MAX_RETRIES',
  'HOOKLINE_RETRY_BASE_MS',
  'HOOKLINE_RETRY_MAX_MS',
  'HOOKLINE_DELIVERY_TIMEOUT_MS',
  'HOOKLINE_ALLOW_PRIVATE_NETWORKS',
  'HOOKLINE_CA_FILE',
  'HOOKLINE_EGRESS_PROXY_URL',
  'HOOKLINE_LOG_LEVEL',
  'HOOKLINE_WORKER_CONCURRENCY',
  'HOOKLINE_ENDPOINT_CONCURRENCY',
  'HOOKLINE_WORKER_ADMIN_PORT',
  'HOOKLINE_RETENTION_DAYS',
  'HOOKLINE_CIRCUIT_BREAK_AFTER_MS',
  'HOOKLINE_TENANT_RATE_LIMIT',
  'HOOKLINE_MAX_ENDPOINTS_PER_TENANT',
  'HOOKLINE_SQLITE_SYNCHRONOUS',
] as const;

/**
 * `HOOKLINE_` names the service does not read but this repository's own tools do, so they may well be
 * set in the same shell: the test suite's and the benchmarks' (HOOKLINE_TEST_POSTGRES_URL,
 * HOOKLINE_BENCH_POSTGRES_URL, …) and the examples' (examples/*.ts).
 */
const TOOL_VARIABLE = /^HOOKLINE_(TEST|BENCH)_|^HOOKLINE_(SECRET|URL|PRODUCER_KEY)$/;

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        (previous[j] ?? 0) + 1,
        (current[j - 1] ?? 0) + 1,
        (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

/** The known variable an unknown name most likely meant, when one is close enough to be obvious. */
function closestKnown(name: string): string | null {
  const suffix = name.slice('HOOKLINE_'.length);
  let best: { name: string; distance: number } | null = null;
  for (const known of KNOWN_VARIABLES) {
    const knownSuffix = known.slice('HOOKLINE_'.length);
    const distance = editDistance(suffix, knownSuffix);
    if (distance <= Math.max(2, Math.floor(knownSuffix.length / 3)) && (!best || distance < best.distance)) {
      best = { name: known, distance };
    }
  }
  return best?.name ?? null;
}

export interface UnknownVariable {
  name: string;
  /** The known variable it probably meant, or null. */
  closest: string | null;
}

/** `HOOKLINE_*` variables that nothing reads: misspellings that would otherwise be silently ignored. */
export function unknownVariables(env: Env = process.env): UnknownVariable[] {
  const known = new Set<string>(KNOWN_VARIABLES);
  return Object.keys(env)
    .filter((name) => name.startsWith('HOOKLINE_') && !known.has(name) && !TOOL_VARIABLE.test(name))
    .sort()
    .map((name) => ({ name, closest: closestKnown(name) }));
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function readInt(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(name, `must be a whole number, got "${raw}"`);
  const value = Number(raw.trim());
  if (value < min || value > max)
    throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
  return value;
}

function readChoice<T extends string, F extends T | null>(
  env: Env,
  name: string,
  fallback: F,
  choices: readonly T[],
): T | F {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (!(choices as readonly string[]).includes(raw)) {
    throw new ConfigError(name, `must be one of ${choices.join(', ')}, got "${env[name]}"`);
  }
  return raw as T;
}

function readBool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (['true', '1', 'yes'].includes(raw)) return true;
  if (['false', '0', 'no'].includes(raw)) return false;
  throw new ConfigError(name, `must be true or false, got "${env[name]}"`);
}

function readDatabaseUrl(env: Env): { databaseUrl: string; dataDir: string | null } {
  const databaseUrl = env.HOOKLINE_DATABASE_URL?.trim() || DEFAULTS.databaseUrl;
  if (databaseUrl.startsWith('sqlite:')) {
    const file = databaseUrl.slice('sqlite:'.length);
    if (file === '')
      throw new ConfigError(
        'HOOKLINE_DATABASE_URL',
        'sqlite: needs a file path, e.g. sqlite:./data/hookline.db',
      );
    return { databaseUrl, dataDir: path.dirname(path.resolve(file)) };
  }
  if (isPostgresUrl(databaseUrl)) {
    try {
      new URL(databaseUrl);
    } catch {
      throw new ConfigError('HOOKLINE_DATABASE_URL', 'is not a valid postgres:// URL');
    }
    const { schema } = splitSchema(databaseUrl);
    const problem = schema === null ? null : schemaNameProblem(schema);
    if (problem) throw new ConfigError('HOOKLINE_DATABASE_URL', `?schema=: ${problem}`);
    // Both would set the search_path, and the URL's `options` would win over `schema`.
    if (schema !== null && /search_path/.test(new URL(databaseUrl).searchParams.get('options') ?? '')) {
      throw new ConfigError('HOOKLINE_DATABASE_URL', 'give ?schema= or a search_path in ?options=, not both');
    }
    return { databaseUrl, dataDir: null };
  }
  throw new ConfigError('HOOKLINE_DATABASE_URL', 'must start with sqlite: or postgres://');
}

export function validateEncryptionKey(raw: string, variable = 'HOOKLINE_ENCRYPTION_KEY'): string {
  const trimmed = raw.trim();
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(trimmed) || Buffer.from(trimmed, 'base64').length !== 32) {
    throw new ConfigError(variable, 'must be base64 of exactly 32 bytes (try: openssl rand -base64 32)');
  }
  return trimmed;
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/**
 * `http://[user:pass@]host:port`. Only `http:`: hookline speaks plain HTTP to the proxy, and TLS to
 * subscribers stays end to end inside the tunnel. The message never repeats the value (it may hold a
 * password).
 */
function readEgressProxyUrl(env: Env): string | null {
  const raw = env.HOOKLINE_EGRESS_PROXY_URL?.trim();
  if (!raw) return null;
  const expected = 'expected http://[user:pass@]host:port';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError('HOOKLINE_EGRESS_PROXY_URL', `is not a URL; ${expected}`);
  }
  if (url.protocol !== 'http:')
    throw new ConfigError('HOOKLINE_EGRESS_PROXY_URL', `must be an http:// URL; ${expected}`);
  if (!url.port) throw new ConfigError('HOOKLINE_EGRESS_PROXY_URL', `needs a port; ${expected}`);
  if (url.pathname !== '/' || url.search || url.hash)
    throw new ConfigError('HOOKLINE_EGRESS_PROXY_URL', `must have no path, query or fragment; ${expected}`);
  return url.href;
}

/** Read at start, so a missing or mistaken file stops start-up instead of failing every delivery. */
function readCaFile(env: Env): string | null {
  const file = env.HOOKLINE_CA_FILE?.trim();
  if (!file) return null;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError('HOOKLINE_CA_FILE', `cannot read ${file}: ${(err as Error).message}`);
  }
  const pems = text.match(PEM_CERTIFICATE) ?? [];
  if (pems.length === 0) {
    throw new ConfigError(
      'HOOKLINE_CA_FILE',
      `${file} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`,
    );
  }
  for (const [i, pem] of pems.entries()) {
    try {
      new X509Certificate(pem);
    } catch (err) {
      throw new ConfigError(
        'HOOKLINE_CA_FILE',
        `certificate ${i + 1} of ${file} is not valid: ${(err as Error).message}`,
      );
    }
  }
  return pems.join('\n');
}

const OTLP_PROTOCOLS: readonly OtlpProtocol[] = ['http/protobuf', 'http/json'];
const SAMPLERS: readonly TracesSampler[] = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
];

function readOtlpUrl(env: Env, name: string): string | null {
  const raw = env[name]?.trim();
  if (!raw) return null;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(name, 'is not a URL; expected http(s)://host:port');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new ConfigError(name, 'must be an http:// or https:// URL');
  return url.href;
}

/**
 * OpenTelemetry's own variables with their standard meanings (the OTLP exporter specification):
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as given; OTEL_EXPORTER_OTLP_ENDPOINT is a base to which
 * `v1/traces` is appended. Neither set: no tracing, and the SDK is never loaded (telemetry/tracing.ts).
 */
function readTracing(env: Env): TracingConfig | null {
  const tracesEndpoint = readOtlpUrl(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const base = readOtlpUrl(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  const protocol =
    readChoice(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', null, OTLP_PROTOCOLS) ??
    readChoice(env, 'OTEL_EXPORTER_OTLP_PROTOCOL', 'http/protobuf', OTLP_PROTOCOLS);
  const sampler = readChoice(env, 'OTEL_TRACES_SAMPLER', 'parentbased_always_on', SAMPLERS);
  const rawRatio = env.OTEL_TRACES_SAMPLER_ARG?.trim();
  let samplerRatio = 1;
  if (rawRatio && sampler.endsWith('traceidratio')) {
    samplerRatio = Number(rawRatio);
    if (!/^\d*\.?\d+$/.test(rawRatio) || samplerRatio > 1)
      throw new ConfigError('OTEL_TRACES_SAMPLER_ARG', `must be a ratio between 0 and 1, got "${rawRatio}"`);
  }
  const serviceName = env.OTEL_SERVICE_NAME?.trim() || 'hookline';
  const tracesUrl = tracesEndpoint ?? (base === null ? null : `${base.replace(/\/+$/, '')}/v1/traces`);
  if (tracesUrl === null) return null;
  return { tracesUrl, protocol, serviceName, sampler, samplerRatio };
}

export function loadConfig(env: Env = process.env): Config {
  const { databaseUrl, dataDir } = readDatabaseUrl(env);
  const rawKey = env.HOOKLINE_ENCRYPTION_KEY;
  const encryptionKey = rawKey && rawKey.trim() !== '' ? validateEncryptionKey(rawKey) : null;
  if (encryptionKey === null && dataDir === null) {
    throw new ConfigError(
      'HOOKLINE_ENCRYPTION_KEY',
      'is required with PostgreSQL: every process must share one key (generate one with: openssl rand -base64 32)',
    );
  }
  const previousEncryptionKeys = (env.HOOKLINE_PREVIOUS_ENCRYPTION_KEYS ?? '')
    .split(',')
    .map((k) => k.trim())
    .filter((k) => k !== '')
    .map((k) => validateEncryptionKey(k, 'HOOKLINE_PREVIOUS_ENCRYPTION_KEYS'));
  const retryBaseMs = readInt(env, 'HOOKLINE_RETRY_BASE_MS', DEFAULTS.retryBaseMs, 1, 86_400_000);
  const retryMaxMs = readInt(env, 'HOOKLINE_RETRY_MAX_MS', DEFAULTS.retryMaxMs, 1, 7 * 86_400_000);
  if (retryMaxMs < retryBaseMs) {
    throw new ConfigError(
      'HOOKLINE_RETRY_MAX_MS',
      `must not be smaller than HOOKLINE_RETRY_BASE_MS (${retryBaseMs})`,
    );
  }
  const logLevel = (env.HOOKLINE_LOG_LEVEL?.trim() || DEFAULTS.logLevel).toLowerCase();
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError('HOOKLINE_LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
  }
  const host = env.HOOKLINE_HOST?.trim() || DEFAULTS.host;
  return Object.freeze({
    databaseUrl,
    dataDir,
    port: readInt(env, 'HOOKLINE_PORT', DEFAULTS.port, 0, 65_535),
    host,
    encryptionKey,
    previousEncryptionKeys,
    maxRetries: readInt(env, 'HOOKLINE_MAX_RETRIES', DEFAULTS.maxRetries, 0, 100),
    retryBaseMs,
    retryMaxMs,
    deliveryTimeoutMs: readInt(env, 'HOOKLINE_DELIVERY_TIMEOUT_MS', DEFAULTS.deliveryTimeoutMs, 100, 300_000),
    allowPrivateNetworks: readBool(env, 'HOOKLINE_ALLOW_PRIVATE_NETWORKS', false),
    extraCaCertificates: readCaFile(env),
    egressProxyUrl: readEgressProxyUrl(env),
    logLevel,
    workerConcurrency: readInt(env, 'HOOKLINE_WORKER_CONCURRENCY', DEFAULTS.workerConcurrency, 1, 10_000),
    endpointConcurrency: readInt(
      env,
      'HOOKLINE_ENDPOINT_CONCURRENCY',
      DEFAULTS.endpointConcurrency,
      1,
      1_000,
    ),
    workerAdminPort: readInt(env, 'HOOKLINE_WORKER_ADMIN_PORT', DEFAULTS.workerAdminPort, 0, 65_535),
    retentionDays: readInt(env, 'HOOKLINE_RETENTION_DAYS', DEFAULTS.retentionDays, 1, 36_500),
    circuitBreakAfterMs: readInt(
      env,
      'HOOKLINE_CIRCUIT_BREAK_AFTER_MS',
      DEFAULTS.circuitBreakAfterMs,
      100,
      86_400_000,
    ),
    tenantRateLimit: readInt(env, 'HOOKLINE_TENANT_RATE_LIMIT', DEFAULTS.tenantRateLimit, 0, 100_000),
    maxEndpointsPerTenant: readInt(
      env,
      'HOOKLINE_MAX_ENDPOINTS_PER_TENANT',
      DEFAULTS.maxEndpointsPerTenant,
      1,
      100_000,
    ),
    sqliteSynchronous: readChoice(env, 'HOOKLINE_SQLITE_SYNCHRONOUS', DEFAULTS.sqliteSynchronous, [
      'normal',
      'full',
    ]),
    tracing: readTracing(env),
  });
}
