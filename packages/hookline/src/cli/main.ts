// The `hookline` command's entry point. `hookline worker` starts its sender thread (SQLite) before the
// rest of the program loads, so that the thread loads its own modules on one core while this thread
// loads the program on the other: the worker delivers sooner after it starts (docs/architecture.md,
// "Sending"). So it reads HOOKLINE_DATABASE_URL itself, ahead of config.ts, which validates it.
import { bootSenderThread, sendsFromThread } from '../delivery/sender-thread-boot.js';

if (process.argv[2] === 'worker' && sendsFromThread(process.env.HOOKLINE_DATABASE_URL)) bootSenderThread();
await import('./program.js');
