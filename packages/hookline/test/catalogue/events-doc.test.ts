// docs/events.md is generated from the catalogue (scripts/events-doc.ts) and must not go stale.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { EVENTS_DOC_PATH, renderEventsDoc } from '../../scripts/events-doc.js';
import { CATALOGUE } from '../../src/catalogue/index.js';

describe('docs/events.md', () => {
  it('is what npm run docs:events writes from the catalogue', () => {
    const onDisk = readFileSync(EVENTS_DOC_PATH, 'utf8');
    expect(onDisk === renderEventsDoc(), 'docs/events.md is stale: run npm run docs:events').toBe(true);
  });

  it('has each event with its description, fields and example', () => {
    const doc = renderEventsDoc();
    for (const entry of CATALOGUE) {
      const start = doc.indexOf(`## \`${entry.name}\``);
      expect(start, entry.name).toBeGreaterThan(0);
      const section = doc.slice(start, doc.indexOf('\n## ', start + 1) >>> 0);
      for (const field of Object.keys(entry.schema['properties'] as object)) {
        expect(section, `${entry.name}.${field}`).toContain(`| \`${field}\` |`);
      }
      expect(section).toContain(JSON.stringify({ type: entry.name, data: entry.example }, null, 2));
    }
  });
});
