// Writes docs/events.md from the catalogue (src/catalogue/definitions.ts): `npm run docs:events`.
// test/catalogue/events-doc.test.ts fails when the file is not what this would write.
import { writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { CATALOGUE, type CatalogueEntry, type JsonSchema } from '../src/catalogue/index.js';

export const EVENTS_DOC_PATH = fileURLToPath(new URL('../../../docs/events.md', import.meta.url));

/** A field's type in a word or two: `string`, `string (email)`, `list of strings`. */
function typeOf(schema: JsonSchema): string {
  if (schema['type'] === 'array') {
    const items = (schema['items'] ?? {}) as JsonSchema;
    return `list of ${typeOf(items)}s`;
  }
  const format = typeof schema['format'] === 'string' ? ` (${schema['format']})` : '';
  return `${String(schema['type'] ?? 'any')}${format}`;
}

/** Text as Markdown shows it: `<id>` is not an HTML tag, `|` does not end a table cell. */
function text(raw: string): string {
  return raw.replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

function fieldsTable(schema: JsonSchema): string[] {
  const properties = (schema['properties'] ?? {}) as Record<string, JsonSchema>;
  const required = new Set((schema['required'] ?? []) as string[]);
  const rows = Object.entries(properties).map(
    ([name, field]) =>
      `| \`${name}\` | ${typeOf(field)} | ${required.has(name) ? 'yes' : 'no'} | ${text(String(field['description'] ?? ''))} |`,
  );
  return ['| Field | Type | Required | Description |', '| --- | --- | --- | --- |', ...rows];
}

function anchor(name: string): string {
  return name.toLowerCase().replace(/[^a-z0-9_ -]/g, '');
}

function section(entry: CatalogueEntry): string[] {
  return [
    `## \`${entry.name}\``,
    '',
    text(entry.description),
    '',
    ...fieldsTable(entry.schema),
    '',
    'Any other field may appear too.',
    '',
    '```json',
    JSON.stringify({ type: entry.name, data: entry.example }, null, 2),
    '```',
    '',
  ];
}

export function renderEventsDoc(): string {
  return [
    '<!-- Generated from packages/hookline/src/catalogue/definitions.ts by',
    '     packages/hookline/scripts/events-doc.ts (npm run docs:events). Do not edit by hand. -->',
    '',
    '# Event types',
    '',
    `The ${CATALOGUE.length} events hookline delivers, with what each one's \`data\` holds. Every delivery`,
    'body is `{"type": <name>, "data": {…}}`, and the name is also in the `service-webhook-event` header',
    '(docs/contract.md §5, docs/signatures.md).',
    '',
    'The same catalogue is served by the API: `GET /v1/event-types` answers every name with its',
    'description, the JSON Schema (draft 2020-12) of its `data` and an example, and `/openapi.json`',
    "describes each event as a request to the subscriber in OpenAPI 3.1's `webhooks`. TypeScript",
    "producers get the names and data types from the `hookline` package: `EventType`, `EventData<'user.created'>`,",
    '`EventDataMap` and `TypedEvent`.',
    '',
    '- **Ids.** `user.*` events carry `userId` (shaped `user_<id>`); organization events carry',
    '  `organizationId`; memberships carry both (and `membershipId`); invitations carry `organizationId`',
    '  and `invitationId`; `connection.saml_certificate_renewed` carries `organizationId` and `connectionId`.',
    '- **More fields may appear.** The schemas allow fields they do not name, and the identity product may',
    '  add some; a subscriber should ignore what it does not know.',
    '- **What hookline checks on emit.** Only `user.created` is refused without a `data.userId` shaped',
    '  `user_<id>` (400 `invalid_event_data`); every other rule here describes what the identity product',
    '  sends, and is not enforced, so producers that send other fields keep working.',
    '',
    '| Event | Description |',
    '| --- | --- |',
    ...CATALOGUE.map((e) => `| [\`${e.name}\`](#${anchor(e.name)}) | ${text(e.description)} |`),
    '',
    ...CATALOGUE.flatMap(section),
  ].join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  writeFileSync(EVENTS_DOC_PATH, renderEventsDoc());
  console.log(`wrote ${EVENTS_DOC_PATH}`);
}
