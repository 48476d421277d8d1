// Composes a running hookline: context, migrations, the HTTP API and/or the delivery worker.
import type { FastifyInstance } from 'fastify';
import { startHealthServer, type HealthServer } from './api/health-server.js';
import type { Config } from './config.js';
import { createContext, type Context, type ContextOptions } from './context.js';
import { startQueueSampler } from './delivery/queue-sampler.js';
import { startRetention } from './delivery/retention.js';
import { DeliveryThread } from './delivery/delivery-thread.js';
import { DeliveryWorker, type WorkerOptions } from './delivery/worker.js';
import { Emitter } from './events/emit.js';
import type { Maintenance } from './store/db.js';
import { keyConverter } from './engine/sealing.js';
import { migrate } from './store/migrations/index.js';

export interface ServiceOptions extends ContextOptions {
  /** Serve the HTTP API (`serve`), or only health routes (`worker`). */
  api: boolean;
  worker: boolean;
  /** Bind a port; tests that use `app.inject` leave it off. */
  listen?: boolean;
  workerOptions?: WorkerOptions;
  /**
   * Run the delivery worker in a worker thread of its own, so delivery never shares the API's event
   * loop (`hookline serve`). Off: in this thread (tests that look inside the worker).
   */
  deliveryThread?: boolean;
  /** Grace for attempts in flight at shutdown. */
  shutdownGraceMs?: number;
}

export interface Service {
  ctx: Context;
  /** The API (null for a worker, which serves only health routes). */
  app: FastifyInstance | null;
  emitter: Emitter;
  worker: DeliveryWorker | null;
  /** Where the HTTP listener is, when listening. */
  address: string | null;
  close(): Promise<void>;
}

/**
 * Connections the kernel may hold for the API before it accepts them. Node's default, 511, overflowed
 * when producers opened connections in a burst while the API thread was busy (a cold start under
 * load): the kernel dropped the extra SYNs, and those clients' first emits waited for their
 * retransmissions, 1 s and then 3 s later. Linux caps it at net.core.somaxconn (4096 by default).
 */
export const LISTEN_BACKLOG = 4096;

export async function startService(config: Config, options: ServiceOptions): Promise<Service> {
  const ctx = await createContext(config, options);
  // The store's housekeeping (SQLite: a checkpointer thread) starts beside the rest of start-up and is
  // awaited last, so a worker's first claim does not wait for it.
  const starting = ctx.db.startMaintenance();
  starting?.catch(() => {}); // awaited below, where its failure fails the start
  let maintenance: Maintenance | null = null;
  let service: Service;
  try {
    await migrate(ctx.db, (message) => ctx.logger.info(message), keyConverter(ctx.envelope));
    const emitter = new Emitter(ctx);
    // The API's framework is loaded only where there is an API: a worker starts without it.
    const api = options.api ? await (await import('./api/app.js')).buildApp(ctx, { emitter }) : null;
    let address: string | null = null;
    let health: HealthServer | null = null;
    if (options.listen && api) {
      address = await api.listen({ port: config.port, host: config.host, backlog: LISTEN_BACKLOG });
    } else if (options.listen) {
      health = await startHealthServer(ctx, config.workerAdminPort, config.host);
      address = health.address;
    }
    const inThread = options.worker && options.deliveryThread === true;
    const thread = inThread
      ? await DeliveryThread.start(config, options.workerOptions ?? {}, ctx.db, ctx.logger)
      : null;
    if (thread) {
      // News from other processes reaches the thread through its own connection's LISTEN; this
      // thread passes on its own emits' (and, were it forwarded too, the thread would wake twice).
      await ctx.signal.onWake((kind) => thread.wake(kind), { listen: false });
      ctx.metrics.addSource(() => thread.metrics());
    }
    const worker = options.worker && !inThread ? new DeliveryWorker(ctx, options.workerOptions) : null;
    await worker?.start();
    const stopSampler = worker ? startQueueSampler(ctx) : () => {};
    const stopRetention = worker ? startRetention(ctx) : () => {};
    let closing: Promise<void> | null = null;
    const close = () =>
      (closing ??= (async () => {
        stopSampler();
        stopRetention();
        await api?.close();
        await health?.close();
        await worker?.stop(options.shutdownGraceMs ?? 10_000);
        await thread?.stop(options.shutdownGraceMs ?? 10_000);
        await ctx.signal.close();
        // Before the connection: SQLite's last connection to close copies the rest of the log in.
        await maintenance?.stop();
        await ctx.db.close();
        // Last: exports the spans of everything above (docs/operators.md, "Tracing").
        await ctx.tracing.shutdown();
      })());
    service = { ctx, app: api, emitter, worker, address, close };
  } catch (err) {
    await ctx.signal.close();
    await starting?.then(
      (c) => c.stop(),
      () => {},
    );
    await ctx.db.close();
    throw err;
  }
  try {
    maintenance = await starting;
  } catch (err) {
    await service.close();
    throw err;
  }
  return service;
}
