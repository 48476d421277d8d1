export { EVENT_TYPES, isEventType, type EventType } from './events.js';
export {
  WILDCARDS,
  findInvalidEventFilters,
  isValidEventFilter,
  isWildcard,
  matchesEventFilter,
  type EventFilter,
  type Wildcard,
} from './event-filter.js';
export { USER_ID_PATTERN, validateEventData } from './payload-rules.js';
export {
  CATALOGUE,
  catalogueEntry,
  type CatalogueEntry,
  type EventData,
  type EventDataMap,
  type JsonSchema,
  type TypedEvent,
} from './catalogue.js';
export { invalidEventFiltersMessage, unknownEventTypeMessage } from './messages.js';
