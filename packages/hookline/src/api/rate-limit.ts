// Token buckets per API key, in this process's memory: a runaway tenant script cannot crowd out the
// others. Only tenant keys are limited; producers are the identity product itself, and throttling
// them would only move events into its own retry logic.

interface Bucket {
  tokens: number;
  updatedAt: number;
}

const MAX_BUCKETS = 10_000;

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly burst: number;

  constructor(private readonly perSecond: number) {
    this.burst = perSecond * 2;
  }

  /** Takes one request's token; answers how many seconds to wait when there is none. */
  take(key: string, now: number): { ok: true } | { ok: false; retryAfterSeconds: number } {
    const bucket = this.refill(key, now);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { ok: true };
    }
    return { ok: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / this.perSecond)) };
  }

  private refill(key: string, now: number): Bucket {
    let bucket = this.buckets.get(key);
    if (!bucket) {
      if (this.buckets.size >= MAX_BUCKETS) this.forgetFull(now);
      bucket = { tokens: this.burst, updatedAt: now };
      this.buckets.set(key, bucket);
    }
    bucket.tokens = Math.min(this.burst, bucket.tokens + ((now - bucket.updatedAt) / 1000) * this.perSecond);
    bucket.updatedAt = now;
    return bucket;
  }

  /** A bucket that has refilled completely carries no information: drop it to bound memory. */
  private forgetFull(now: number): void {
    for (const [key, b] of this.buckets) {
      if (b.tokens + ((now - b.updatedAt) / 1000) * this.perSecond >= this.burst) this.buckets.delete(key);
    }
  }
}
