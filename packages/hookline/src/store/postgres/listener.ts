// LISTEN on its own connection (a pooled one cannot keep a LISTEN), reconnecting after a loss.
import pg from 'pg';

export interface ListenerLog {
  warn(obj: object, msg: string): void;
}

export class PgListener {
  private client: pg.Client | null = null;
  private closed = false;

  constructor(
    private readonly config: pg.ClientConfig,
    /** The channel's name, asked for at each (re)connection: finding it may take a query. */
    private readonly channel: () => Promise<string>,
    private readonly onNotify: (payload: string) => void,
    private readonly log: ListenerLog,
  ) {}

  async start(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client(this.config);
    this.client = client;
    client.on('notification', (message) => this.onNotify(message.payload ?? ''));
    client.on('error', (err) => {
      this.log.warn({ err }, 'LISTEN connection lost; reconnecting');
      this.client = null;
      client.end().catch(() => {});
      this.retry();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${client.escapeIdentifier(await this.channel())}`);
    } catch (err) {
      this.log.warn({ err }, 'could not LISTEN; workers fall back to polling');
      this.client = null;
      await client.end().catch(() => {});
      this.retry();
    }
  }

  private retry(): void {
    if (!this.closed) setTimeout(() => void this.start().catch(() => {}), 1000).unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => {});
  }
}
