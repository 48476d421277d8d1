// What an unknown event name or filter is told: the nearest name when it is a typo, never a far one.
import { describe, expect, it } from 'vitest';
import { invalidEventFiltersMessage, unknownEventTypeMessage } from '../../src/catalogue/index.js';

describe('unknownEventTypeMessage', () => {
  it.each([
    ['user.creatd', 'user.created'],
    ['User.Created', 'user.created'],
    ['organisation.updated', 'organization.updated'],
    ['organizationMembership.create', 'organizationMembership.created'],
  ])('suggests the nearest name for %j', (typo, nearest) => {
    expect(unknownEventTypeMessage(typo)).toBe(
      `unknown event type ${JSON.stringify(typo)} (did you mean ${JSON.stringify(nearest)}?); ` +
        'GET /v1/event-types lists the 26 names',
    );
  });

  it.each(['invoice.paid', 'user', '', 'x'.repeat(5000)])('suggests nothing far from %j', (name) => {
    const message = unknownEventTypeMessage(name);
    expect(message).not.toContain('did you mean');
    expect(message).toMatch(/; GET \/v1\/event-types lists the 26 names$/);
    expect(message.length).toBeLessThan(200);
  });
});

describe('invalidEventFiltersMessage', () => {
  it('suggests a wildcard for a near one, and nothing for a short pattern', () => {
    expect(invalidEventFiltersMessage(['usr.*', 'org*'])).toBe(
      'events has unknown event filters "usr.*" (did you mean "user.*"?), "org*"; use event type names ' +
        '(GET /v1/event-types lists them) or the wildcards user.*, organization.*, organizationMembership.*, *',
    );
  });
});
