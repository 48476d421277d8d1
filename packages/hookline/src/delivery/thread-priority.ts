// `hookline serve` runs its delivery thread at a lower CPU priority than the API thread
// (docs/architecture.md, "One process: the delivery thread"). An emit is on the producer's request
// path and delivery is not: when the cores are busy, the kernel should run the API thread first and
// let deliveries fall behind, not make emits wait for a core while deliveries run.
import { readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';

/**
 * The nice value the delivery thread takes. At 10 the kernel's scheduler weighs it at about a tenth
 * of a thread at 0, so where the two compete for a core the API thread gets most of it, while with
 * a core to spare the delivery thread still runs at full speed. (At 19 it would be near starvation
 * on one busy core, for no better emit latency: bench/HISTORY.md, "Session of run Y".) An
 * unprivileged process cannot lower a nice value again, so this is a one-way step.
 */
export const DELIVERY_THREAD_NICE = 10;

/**
 * The calling thread's id in the kernel, where a thread has its own priority: on Linux,
 * `/proc/thread-self` links to `<pid>/task/<tid>`. Null elsewhere.
 */
function kernelThreadId(): number | null {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    return Number.isInteger(tid) && tid > 0 ? tid : null;
  } catch {
    return null;
  }
}

/**
 * Raises the calling thread's nice value to at least `nice`, never lowering a higher one (a process
 * started under `nice -n 15` stays there). Only where each thread has a priority of its own (Linux):
 * elsewhere setpriority(2) would slow the whole process, API included, so it does nothing. Returns
 * the thread's nice value afterwards, or null where it did nothing.
 */
export function lowerThreadPriority(nice: number): number | null {
  const tid = kernelThreadId();
  if (tid === null) return null;
  try {
    const current = getPriority(tid);
    if (current < nice) setPriority(tid, nice);
    return getPriority(tid);
  } catch {
    return null;
  }
}
