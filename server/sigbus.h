/*
 * sigbus: a SIGBUS in a mapped MemStore region is logged with
 * the faulting address and the region's file before the process dies.
 *
 * A store to a region page whose file lost its blocks (truncated, a hole
 * punched, a full file system under a sparse file) raises SIGBUS; without
 * a handler the process vanishes with no line in the log. The regions are
 * reserved when they are created (storage/region.c), so this is for what
 * happens to their files afterwards.
 *
 * The handler can reach no argument, so what it needs lives in one static
 * table (the exception to "no globals": a signal handler has nothing else).
 * It is filled by the main thread before the workers start and read only by
 * the handler, which is async-signal-safe (write(2), clock_gettime, no
 * stdio, no malloc).
 */
#ifndef RCKV_SRV_SIGBUS_H
#define RCKV_SRV_SIGBUS_H

#include <stddef.h>

struct node;

/*
 * srv_sigbus_install - install the SIGBUS handler (once per process) and remember n's log file and node id for its message. Main
 * thread, before any region is mapped. Returns 0 or -errno.
 */
int srv_sigbus_install(struct node *n);

/* Name [base, base + len) as a region in the handler's message (`path` is
 * copied). Main thread, before workers start. Up to SRV_SIGBUS_WATCH. */
#define SRV_SIGBUS_WATCH 8
void srv_sigbus_watch(const void *base, size_t len, const char *path);
/* Forget the region at base (it is about to be unmapped). */
void srv_sigbus_unwatch(const void *base);

/*
 * srv_block_async_signals - block every signal but the synchronous faults
 * (SIGBUS, SIGSEGV, SIGFPE, SIGILL) in the calling thread: a fault raised
 * while its signal is blocked kills the process without running any
 * handler (neither this one nor ASan's). For the server's threads, which
 * leave signals to the main thread.
 */
void srv_block_async_signals(void);

#endif
