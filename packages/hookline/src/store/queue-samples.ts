import type { Queryable } from './db.js';

export interface QueueSample {
  bucket: number;
  due: number;
  scheduled: number;
  delivering: number;
  dead_letters: number;
}

export async function recordQueueSample(q: Queryable, s: QueueSample): Promise<void> {
  await q.run(
    `INSERT INTO queue_samples (bucket, due, scheduled, delivering, dead_letters) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (bucket) DO UPDATE SET due = excluded.due, scheduled = excluded.scheduled,
       delivering = excluded.delivering, dead_letters = excluded.dead_letters`,
    [s.bucket, s.due, s.scheduled, s.delivering, s.dead_letters],
  );
}

export async function queueSamplesSince(q: Queryable, since: number): Promise<QueueSample[]> {
  return q.all<QueueSample>('SELECT * FROM queue_samples WHERE bucket >= $1 ORDER BY bucket', [since]);
}
