/*
 * worker: one thread with an epoll loop over its client connections, a
 * scheduler of coroutines that run transactions, and its fabric endpoints
 * (DESIGN.md section 3). A client belongs to one worker for life.
 */
#ifndef RCKV_SRV_WORKER_H
#define RCKV_SRV_WORKER_H

#include <ck_pr.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/node.h"

struct client;
struct sched;
struct fab_worker;
struct cc_worker;
struct worker_task;
struct script_pool;
struct ps_worker;
struct cmdstat;

struct worker {
	struct node *node;
	int id;
	pthread_t thread;
	int epfd;
	int wakefd;                   /* eventfd: new connections, shutdown */
	bool busy;                    /* the last epoll wait returned events */
	struct sched *sched;          /* coroutines of this worker */
	int parked;                   /* of them, parked in a blocking list command (dispatch.c); owner only */
	struct fab_worker *fw;        /* fabric endpoints */
	struct cc_worker *ccw;        /* executor state: address cache, ts clock,
					 its transactions' stats and in-flight count */
	struct srv_stats stats;       /* owner writes; see node.h */
	uint64_t dirty;               /* keys changed by committed transactions
					 (worker_add_dirty: the owner, ck_pr stores;
					 save.c sums them with ck_pr loads): not in
					 stats, which CONFIG RESETSTAT zeroes */
	struct script_pool *scripts;  /* Lua VMs lent to running scripts (server/script.h) */
	struct ps_worker *ps;         /* Pub/Sub inbox and local subscribers (server/pubsub.c) */
	struct cmdstat *cstat;        /* INFO commandstats / latencystats (server/cmdstat.h) */

	pthread_mutex_t clients_lock; /* guards the list links for CLIENT LIST */
	struct client *clients;       /* list of this worker's clients */
	uint64_t nclients;
	void *handoff;                /* ck_ring of accepted fds (worker.c) */
	struct client *ready_head, *ready_tail; /* clients with requests to run */
	struct client *wlist;         /* clients with replies to write (conn.c) */
	pthread_mutex_t tasks_mu;
	struct worker_task *tasks;    /* worker_call's, to start (worker.c) */
	bool tasks_closed;            /* the worker stopped: worker_call refuses */
};

/*
 * worker_call - run fn(w, arg) on a coroutine of worker w (it may run
 * transactions), from another thread, and wait until it returns. 0, or
 * -ESHUTDOWN if the worker stopped first. Rare work (a rejoin's copy):
 * one mutex, one wake-up.
 */
int worker_call(struct worker *w, void (*fn)(struct worker *w, void *arg), void *arg);

/* Count n keys changed (rdb_changes_since_last_save). Owner worker only:
 * one writer, so a load and an atomic store make the sum other threads
 * read (ck_pr_load_64) never torn. */
static inline void worker_add_dirty(struct worker *w, uint64_t n)
{
	if (n)
		ck_pr_store_64(&w->dirty, w->dirty + n);
}

/* Create worker `id` of n (listening sockets and fabric peers must exist).
 * 0, or -errno with err filled. */
int worker_start(struct node *n, int id, struct worker **out, char *err, size_t errlen);
/* Start its thread. */
int worker_run(struct worker *w);
/* Wake its epoll loop (new connection, shutdown). Any thread. */
void worker_wake(struct worker *w);
/*
 * worker_give_fd - make connected socket fd a client of w, as an accepted
 * connection is (the maxclients check included): for connections that do
 * not come through a listening socket (tests/fuzz/fuzz_commands.c drives an
 * in-process node over a socketpair). Any thread; w owns fd from then on.
 * 0, or -EAGAIN when w's hand-off ring is full (fd is still the caller's).
 */
int worker_give_fd(struct worker *w, int fd);
void worker_join(struct worker *w);
void worker_destroy(struct worker *w);

#endif
