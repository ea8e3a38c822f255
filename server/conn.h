/*
 * conn: client connections of a worker: accept, read, process on a
 * coroutine, write, close. Owner worker only.
 */
#ifndef RCKV_SRV_CONN_H
#define RCKV_SRV_CONN_H

struct worker;
struct client;

/* Take ownership of an accepted, non-blocking socket. */
struct client *client_create(struct worker *w, int fd);
/* Readiness events from the worker's epoll loop. */
void client_on_readable(struct client *cl);
void client_on_writable(struct client *cl);
/* Start processing queued requests on a coroutine if not already running;
 * called by the worker for every client on its ready list. Returns 0, or
 * -EAGAIN if no coroutine is free (the client stays ready). */
int client_start(struct client *cl);
/* Write the replies of every client whose coroutine finished since the
 * last call: the worker calls it once per loop, after running coroutines,
 * so a round's replies leave in one burst (as Redis's
 * handleClientsWithPendingWrites): a client woken by the first of them is
 * still running when the rest arrive, instead of going back to sleep
 * between replies and being woken again for each. */
void client_flush_pending(struct worker *w);
/* Queue cl's replies to be written with the round's others
 * (client_flush_pending): for output that no command of its own produced
 * (Pub/Sub messages). Owner worker, outside cl's coroutine. */
void client_queue_write(struct client *cl);
/* Close now, or as soon as its coroutine finishes. */
void client_close(struct client *cl);
/* Close every client (shutdown). */
void client_close_all(struct worker *w);
/* Idle clients over `timeout` seconds are closed (cfg.timeout). */
void client_reap_idle(struct worker *w, int timeout);

#endif
