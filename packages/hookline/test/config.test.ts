import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ConfigError, DEFAULTS, KNOWN_VARIABLES, loadConfig, unknownVariables } from '../src/config.js';

const KEY = Buffer.alloc(32, 7).toString('base64');

describe('loadConfig', () => {
  it('has working defaults for the embedded mode', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      databaseUrl: 'sqlite:./data/hookline.db',
      port: 8080,
      host: '127.0.0.1',
      encryptionKey: null,
      maxRetries: DEFAULTS.maxRetries,
      deliveryTimeoutMs: 15_000,
      allowPrivateNetworks: false,
      logLevel: 'info',
    });
    expect(config.dataDir).toMatch(/data$/);
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('HOOKLINE_SQLITE_SYNCHRONOUS is normal by default, full on request, and refused otherwise', () => {
    expect(loadConfig({}).sqliteSynchronous).toBe('normal');
    expect(loadConfig({ HOOKLINE_SQLITE_SYNCHRONOUS: 'FULL' }).sqliteSynchronous).toBe('full');
    expect(() => loadConfig({ HOOKLINE_SQLITE_SYNCHRONOUS: 'off' })).toThrow(/HOOKLINE_SQLITE_SYNCHRONOUS/);
  });

  it("reads OpenTelemetry's OTEL_* variables with their standard meanings", () => {
    // No endpoint: no tracing, whatever else is set.
    expect(
      loadConfig({ OTEL_SERVICE_NAME: 'x', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }).tracing,
    ).toBeNull();
    // The general endpoint is a base: the signal's path is appended.
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }).tracing).toEqual({
      tracesUrl: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      serviceName: 'hookline',
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
    });
    // The traces endpoint is used as given, and wins; the traces protocol wins over the general one.
    expect(
      loadConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.internal/otlp/spans',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
        OTEL_SERVICE_NAME: 'webhooks',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
      }).tracing,
    ).toEqual({
      tracesUrl: 'https://traces.internal/otlp/spans',
      protocol: 'http/json',
      serviceName: 'webhooks',
      sampler: 'parentbased_traceidratio',
      samplerRatio: 0.25,
    });
  });

  it('default retry schedule rides out a day-long outage', () => {
    // Lower bound of the whole schedule with the jitter at its most negative (-25 %).
    let total = 0;
    for (let n = 1; n <= DEFAULTS.maxRetries; n++) {
      total += Math.min(DEFAULTS.retryMaxMs, DEFAULTS.retryBaseMs * 2 ** (n - 1)) * 0.75;
    }
    expect(total).toBeGreaterThan(24 * 60 * 60 * 1000);
  });

  it('HOOKLINE_MAX_ENDPOINTS_PER_TENANT is 100 by default and read when set', () => {
    expect(loadConfig({}).maxEndpointsPerTenant).toBe(100);
    expect(loadConfig({ HOOKLINE_MAX_ENDPOINTS_PER_TENANT: '3' }).maxEndpointsPerTenant).toBe(3);
  });

  it('reads earlier encryption keys for rows written before a rotation', () => {
    const old = Buffer.alloc(32, 9).toString('base64');
    expect(
      loadConfig({ HOOKLINE_PREVIOUS_ENCRYPTION_KEYS: ` ${KEY}, ${old} ` }).previousEncryptionKeys,
    ).toEqual([KEY, old]);
  });

  it('reads every variable', () => {
    const config = loadConfig({
      HOOKLINE_DATABASE_URL: 'postgres://u@db:5432/hookline',
      HOOKLINE_PORT: '9000',
      HOOKLINE_HOST: '0.0.0.0',
      HOOKLINE_ENCRYPTION_KEY: KEY,
      HOOKLINE_MAX_RETRIES: '5',
      HOOKLINE_RETRY_BASE_MS: '100',
      HOOKLINE_RETRY_MAX_MS: '1000',
      HOOKLINE_DELIVERY_TIMEOUT_MS: '5000',
      HOOKLINE_ALLOW_PRIVATE_NETWORKS: 'true',
      HOOKLINE_LOG_LEVEL: 'debug',
    });
    expect(config).toMatchObject({
      databaseUrl: 'postgres://u@db:5432/hookline',
      dataDir: null,
      port: 9000,
      host: '0.0.0.0',
      encryptionKey: KEY,
      maxRetries: 5,
      retryBaseMs: 100,
      retryMaxMs: 1000,
      deliveryTimeoutMs: 5000,
      allowPrivateNetworks: true,
      logLevel: 'debug',
    });
  });

  it.each([
    [{ HOOKLINE_PORT: 'eighty' }, 'HOOKLINE_PORT'],
    [{ HOOKLINE_PORT: '70000' }, 'HOOKLINE_PORT'],
    [{ HOOKLINE_MAX_RETRIES: '-1' }, 'HOOKLINE_MAX_RETRIES'],
    [{ HOOKLINE_RETRY_BASE_MS: '1.5' }, 'HOOKLINE_RETRY_BASE_MS'],
    [{ HOOKLINE_RETRY_BASE_MS: '5000', HOOKLINE_RETRY_MAX_MS: '100' }, 'HOOKLINE_RETRY_MAX_MS'],
    [{ HOOKLINE_DELIVERY_TIMEOUT_MS: '0' }, 'HOOKLINE_DELIVERY_TIMEOUT_MS'],
    [{ HOOKLINE_ALLOW_PRIVATE_NETWORKS: 'maybe' }, 'HOOKLINE_ALLOW_PRIVATE_NETWORKS'],
    [{ HOOKLINE_LOG_LEVEL: 'loud' }, 'HOOKLINE_LOG_LEVEL'],
    [{ HOOKLINE_DATABASE_URL: 'mysql://x' }, 'HOOKLINE_DATABASE_URL'],
    [{ HOOKLINE_DATABASE_URL: 'sqlite:' }, 'HOOKLINE_DATABASE_URL'],
    [{ HOOKLINE_ENCRYPTION_KEY: 'c2hvcnQ=' }, 'HOOKLINE_ENCRYPTION_KEY'],
    [{ HOOKLINE_ENCRYPTION_KEY: 'not base64 at all!' }, 'HOOKLINE_ENCRYPTION_KEY'],
    [{ HOOKLINE_DATABASE_URL: 'postgres://u@db/x' }, 'HOOKLINE_ENCRYPTION_KEY'],
    [{ HOOKLINE_PREVIOUS_ENCRYPTION_KEYS: `${KEY},short` }, 'HOOKLINE_PREVIOUS_ENCRYPTION_KEYS'],
    [{ HOOKLINE_MAX_ENDPOINTS_PER_TENANT: '0' }, 'HOOKLINE_MAX_ENDPOINTS_PER_TENANT'],
    [{ HOOKLINE_MAX_ENDPOINTS_PER_TENANT: 'lots' }, 'HOOKLINE_MAX_ENDPOINTS_PER_TENANT'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, 'OTEL_EXPORTER_OTLP_ENDPOINT'],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'not a url' }, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, 'OTEL_EXPORTER_OTLP_PROTOCOL'],
    [{ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/xml' }, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'],
    [{ OTEL_TRACES_SAMPLER: 'sometimes' }, 'OTEL_TRACES_SAMPLER'],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1.5' }, 'OTEL_TRACES_SAMPLER_ARG'],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: 'half' }, 'OTEL_TRACES_SAMPLER_ARG'],
  ])('rejects %o naming %s', (env, variable) => {
    expect(() => loadConfig(env)).toThrowError(ConfigError);
    try {
      loadConfig(env);
    } catch (err) {
      expect((err as ConfigError).variable).toBe(variable);
      expect((err as Error).message).toContain(variable);
    }
  });
});

describe('unknown HOOKLINE_ variables', () => {
  it('names each unknown one, with the known name it probably meant', () => {
    expect(
      unknownVariables({
        HOOKLINE_RETRY_BASE: '5',
        HOOKLINE_PROT: '9000',
        HOOKLINE_DATABASE: 'sqlite:x.db',
        HOOKLINE_ENCRYPTON_KEY: KEY,
        HOOKLINE_SOMETHING_ELSE: '1',
        HOOKLINE_PORT: '9000',
        PATH: '/usr/bin',
      }),
    ).toEqual([
      { name: 'HOOKLINE_DATABASE', closest: 'HOOKLINE_DATABASE_URL' },
      { name: 'HOOKLINE_ENCRYPTON_KEY', closest: 'HOOKLINE_ENCRYPTION_KEY' },
      { name: 'HOOKLINE_PROT', closest: 'HOOKLINE_PORT' },
      { name: 'HOOKLINE_RETRY_BASE', closest: 'HOOKLINE_RETRY_BASE_MS' },
      { name: 'HOOKLINE_SOMETHING_ELSE', closest: null },
    ]);
  });

  it("leaves alone the variables of the repository's own tests, benchmarks and examples", () => {
    expect(
      unknownVariables({
        HOOKLINE_TEST_POSTGRES_URL: 'postgres://x',
        HOOKLINE_TEST_POSTGRES: 'required',
        HOOKLINE_BENCH_POSTGRES_URL: 'postgres://x',
        HOOKLINE_SECRET: 'whsec_x',
        HOOKLINE_URL: 'http://127.0.0.1:8080',
        HOOKLINE_PRODUCER_KEY: 'hk_p_x',
      }),
    ).toEqual([]);
  });

  it('knows every variable loadConfig reads and every one docs/configuration.md lists', () => {
    const read = new Set<string>();
    const env = new Proxy({} as Record<string, string | undefined>, {
      get: (_target, name) => {
        if (typeof name === 'string') read.add(name);
        return undefined;
      },
    });
    loadConfig(env);
    expect([...read].filter((n) => n.startsWith('HOOKLINE_')).sort()).toEqual([...KNOWN_VARIABLES].sort());
    const docs = readFileSync(new URL('../../../docs/configuration.md', import.meta.url), 'utf8');
    const documented = new Set(docs.match(/HOOKLINE_[A-Z_]+/g));
    expect([...documented].sort()).toEqual([...KNOWN_VARIABLES].sort());
  });
});
