// The API's listen backlog (src/service.ts, LISTEN_BACKLOG): a burst of connections that arrive while
// the API thread is busy waits in the kernel's accept queue instead of having its SYNs dropped (and
// its first requests wait a second or more for the retransmission). Read off Linux's own count of
// accept-queue overflows, so the test needs /proc/net/netstat (and net.core.somaxconn of 2048 or more).
import { existsSync, readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../helpers/service.js';

const NETSTAT = '/proc/net/netstat';
const SOMAXCONN = '/proc/sys/net/core/somaxconn';
/** The kernel caps every listen backlog at net.core.somaxconn: a machine setting, not hookline's. */
const roomForBurst = existsSync(NETSTAT) && Number(readFileSync(SOMAXCONN, 'utf8')) >= 2048;

/** TcpExt ListenOverflows: connections the kernel refused because a listener's accept queue was full. */
function listenOverflows(): number {
  const lines = readFileSync(NETSTAT, 'utf8').split('\n');
  const header = lines.find((l) => l.startsWith('TcpExt:'))!.split(/\s+/);
  const values = lines.filter((l) => l.startsWith('TcpExt:'))[1]!.split(/\s+/);
  return Number(values[header.indexOf('ListenOverflows')]);
}

describe.skipIf(!roomForBurst)('listen backlog', () => {
  let t: TestService;

  beforeAll(async () => {
    t = await startTestService('sqlite', { listen: true });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('holds a burst of 1,500 connections made while the event loop is busy', async () => {
    const { port } = new URL(t.service.address!);
    const before = listenOverflows();
    // The connections reach the kernel before this thread, the API's, returns to its event loop to
    // accept any of them (net.connect makes its call on the next tick, and the count is read after
    // those). Node's default backlog (511) let the kernel drop ~1,000 of these.
    const sockets: Socket[] = [];
    for (let i = 0; i < 1500; i++) {
      const socket = connect(Number(port), '127.0.0.1');
      socket.on('error', () => {});
      sockets.push(socket);
    }
    await new Promise<void>((resolve) => process.nextTick(resolve));
    const overflowed = listenOverflows() - before;
    for (const s of sockets) s.destroy();
    // Other processes on the machine could overflow their own queues meanwhile: not a thousand.
    expect(overflowed).toBeLessThan(100);
  });
});
