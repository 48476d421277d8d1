// The name of an installation's notification channel. Notifications reach every session of the
// database, so installations in other schemas would wake each other's workers for nothing: outside
// the public schema the name carries the schema. In the public schema it is kept as it is (e.g.
// `hookline_work`), so processes of earlier versions still hear and are heard.

/** The wake-up channel delivery/work-signal.ts listens on, before scoping. */
export const WORK_CHANNEL = 'hookline_work';

export function scopedChannel(channel: string, schema: string): string {
  return schema === 'public' ? channel : `${channel}:${schema}`;
}
