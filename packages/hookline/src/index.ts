// hookline as a library, for an identity product that embeds it:
//
//   const hookline = await startService(loadConfig(), { api: false, worker: true });
//   await hookline.emitter.emit({ tenantId: 'acme', type: 'user.created', data: { userId: 'user_1' } });
//   await hookline.emitter.emit({ tenantId: 'acme', type: 'user.deleted', data: {}, orderingKey: 'user_1' });
//
// Producers type their events with the catalogue (docs/events.md): `TypedEvent` is the union of
// `{ type, data }` over the 26 names, `EventData<'user.created'>` one event's data.
export { loadConfig, type Config } from './config.js';
export { startService, type Service, type ServiceOptions } from './service.js';
export { Emitter, type EmitInput, type EmitResult } from './events/emit.js';
export {
  CATALOGUE,
  EVENT_TYPES,
  WILDCARDS,
  matchesEventFilter,
  type CatalogueEntry,
  type EventData,
  type EventDataMap,
  type EventType,
  type TypedEvent,
} from './catalogue/index.js';
export { HooklineError, type ErrorCode } from './errors.js';
// Emitting inside the product's own PostgreSQL transaction (docs/producers.md):
//
//   const producer = createProducer({ encryptionKey: process.env.HOOKLINE_ENCRYPTION_KEY, schema: 'hookline' });
//   await producer.emitWithin(client, { tenantId: 'acme', type: 'user.created', data: { userId: 'user_1' } });
export {
  createProducer,
  type Producer,
  type ProducerEvent,
  type ProducerOptions,
  type SqlClient,
} from './producer/producer.js';
