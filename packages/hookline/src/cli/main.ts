// The `hookline` command's entry point. `hookline worker` starts its sender thread (SQLite) before the
// rest of the program loads, so that the thread loads its own modules on one core while this thread
// loads the program on the other: the worker delivers sooner after it starts (docs/architecture.md,
// "Sending").
import { bootSenderThread, sendsFromThread } from '../delivery/sender-thread-boot.js';

if (process.argv[2] === 'worker' && sendsFromThread(process.env.HOOKLINE_DATABASE_URL)) bootSenderThread();
await import('./program.js');
