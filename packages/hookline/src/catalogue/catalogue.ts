// The catalogue as subscribers and producers see it: entries in catalogue order (GET /v1/event-types,
// /openapi.json, docs/events.md) and the TypeScript type of each event's `data`.
import type { Static } from '@sinclair/typebox';
import { EVENT_DEFINITIONS, type EventDefinitions } from './definitions.js';
import { EVENT_TYPES, type EventType } from './events.js';

/** Each event's `data` type. Fields beyond the schema's are allowed, as on the wire. */
export type EventDataMap = {
  [T in EventType]: Static<EventDefinitions[T]['schema']> & { [field: string]: unknown };
};

/** The `data` of events of type `T`. */
export type EventData<T extends EventType> = EventDataMap[T];

/** An event as a producer emits it: `type` a catalogue name, `data` that type's data. */
export type TypedEvent<T extends EventType = EventType> = {
  [K in T]: { type: K; data: EventData<K> };
}[T];

export type JsonSchema = { [keyword: string]: unknown };

/** One entry of GET /v1/event-types (docs/contract.md §4.5). */
export interface CatalogueEntry {
  name: EventType;
  description: string;
  /** JSON Schema (draft 2020-12) of `data`. */
  schema: JsonSchema;
  example: Record<string, unknown>;
}

/**
 * Plain JSON Schema, as subscribers' validators take it: without TypeBox's symbol keys, and without
 * our `x-accepts` annotation (catalogue/fields.ts), which a strict validator would refuse as unknown.
 */
function plain<T>(value: T): T {
  return JSON.parse(JSON.stringify(value, (key, v: unknown) => (key === 'x-accepts' ? undefined : v))) as T;
}

/** The whole catalogue, in the order of EVENT_TYPES (the spec's order). */
export const CATALOGUE: readonly CatalogueEntry[] = Object.freeze(
  EVENT_TYPES.map((name) => {
    const { description, schema, example } = EVENT_DEFINITIONS[name];
    return Object.freeze({ name, description, schema: plain(schema), example: plain(example) });
  }),
);

export function catalogueEntry(name: EventType): CatalogueEntry {
  return CATALOGUE[EVENT_TYPES.indexOf(name)]!;
}
