/*
 * switch.c: node-wide quiesce and the online protocol switch (DESIGN.md
 * section 6). The sequence on each node:
 *   1. quiesce := 1: new transactions park in cc_enter;
 *   2. wait until in-flight transactions drain to zero;
 *   3. the quiet step: reset item metadata and publish the new protocol
 *      (or flush);
 *   4. quiesce := 0: parked transactions resume under the new protocol.
 * On a cluster every node does 1-2 before any does 3, and 3 before any does
 * 4 (server/cluster.c drives that), so no transaction anywhere runs while
 * items carry the metadata of two protocols. Clients see a pause, never an
 * error.
 *
 * Invariant (1): no transaction runs on a node between its step 2 and its
 * step 4.
 */
#include "cc/switch.h"

#include <ck_pr.h>
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cc/cc.h"
#include "cc/exec_internal.h"
#include "cc/node.h"
#include "cc/sched.h"

static void pause_for(struct cc_worker *w, uint64_t ns)
{
	if (w) {
		sched_sleep(w->sched, ns);
	} else {
		struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)ns };
		nanosleep(&ts, NULL);
	}
}

bool cc_enter_light;
static pthread_once_t setup_once = PTHREAD_ONCE_INIT;

static void setup_membarrier(void)
{
	long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED))
		return; /* old kernel or filtered: full fences in cc_enter */
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
		cc_enter_light = true;
}

void cc_quiesce_setup(void)
{
	pthread_once(&setup_once, setup_membarrier);
}

/* The quiescer's half of the handshake: quiesce (already stored) is
 * visible to every worker before we read any inflight count. */
static void fence_all_threads(void)
{
	ck_pr_fence_memory();
	if (!cc_enter_light)
		return; /* the workers fence in cc_enter */
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
		return;
	/* membarrier(2): once registered, the command does not fail. Were it
	 * to, a worker's inflight store could still sit in its store buffer;
	 * a millisecond is far longer than any store buffer takes to drain. */
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 1000000 };
	nanosleep(&ts, NULL);
}

/* Transactions in flight on the node: the sum of the workers' counters
 * (each written only by its worker, see cc_enter). */
static uint64_t node_inflight(struct cc_node *n)
{
	uint64_t sum = 0;
	for (int i = 0; i < n->nworkers; i++) {
		struct cc_worker *w = ck_pr_load_ptr(&n->workers[i]);
		if (w)
			sum += cc_worker_inflight(w);
	}
	return sum;
}

void cc_quiesce_begin(struct cc_node *n, struct cc_worker *w)
{
	/* A coroutine must not block its thread: other coroutines of the same
	 * worker may be the ones we wait for. */
	if (w) {
		while (pthread_mutex_trylock(&n->switch_lock) != 0)
			sched_sleep(w->sched, 1000000);
	} else {
		pthread_mutex_lock(&n->switch_lock);
	}
	ck_pr_store_int(&n->quiesce, 1);
	fence_all_threads(); /* quiesce is visible before we read inflight */
	while (node_inflight(n) != 0)
		pause_for(w, 100000);
}

void cc_quiesce_end(struct cc_node *n)
{
	ck_pr_fence_store(); /* the quiet step's writes precede the resume */
	ck_pr_store_int(&n->quiesce, 0);
	pthread_mutex_unlock(&n->switch_lock);
}

void cc_switch_apply(struct cc_node *n, const struct cc_protocol *to)
{
	/* Item metadata of the old protocol means nothing to the new one:
	 * reset lock and meta words (versions stay, so WATCH is unaffected). */
	st_reset_meta(n->region);
	/* The reset is not in the write-ahead log: a checkpoint takes it in,
	 * so that a log never spans a switch and replay never hands the new
	 * protocol the old one's metadata (server/node.c replays without a
	 * reset: it would also drop the locks that guard a cluster's
	 * unsettled transactions). A failure shows in INFO. */
	if (st_region_is_wal(n->region))
		(void)st_wal_checkpoint(n->region);
	ck_pr_store_ptr(&n->proto, (void *)to);
	if (n->on_switch)
		n->on_switch(n, to); /* CONFIG GET cc, cc-lock-mode */
	n->proto_epoch++;
	/* Address caches start over under the new protocol: the old one may
	 * have moved many items (mvcc gives them room for versions), and
	 * every stale entry would cost the new one an abort. */
	ck_pr_inc_64(&n->flush_epoch);
	struct st_header *h = st_region_header(n->region);
	h->protocol_epoch = n->proto_epoch;
}

int cc_quiesce_run(struct cc_node *n, struct cc_worker *w, int (*fn)(struct cc_node *n, void *arg),
		   void *arg)
{
	cc_quiesce_begin(n, w);
	int rc = fn(n, arg);
	cc_quiesce_end(n);
	return rc;
}

const struct cc_protocol *cc_switch_lookup(const struct cc_node *n, const char *name, int shared,
					   char *err, size_t errlen)
{
	const struct cc_protocol *p =
		shared < 0 ? cc_protocol_find(name) : cc_protocol_resolve(name, shared != 0);
	if (!p || (p->testing_only && !n->limits.testing)) {
		snprintf(err, errlen, "unknown concurrency control protocol '%s'%s", name,
			 p ? " (available only with 'testing yes')" : "");
		return NULL;
	}
	return p;
}

int cc_switch(struct cc_node *n, struct cc_worker *w, const char *name, bool shared, char *err,
	      size_t errlen)
{
	const struct cc_protocol *p = cc_switch_lookup(n, name, shared, err, errlen);
	if (!p)
		return -EINVAL;
	if (p->shared_locks && n->max_node_id > CC_SHARED_MAX_NODE) {
		snprintf(err, errlen, "cc-lock-mode shared supports node ids 1..%d",
			 CC_SHARED_MAX_NODE);
		return -EINVAL;
	}
	if (n->cops)
		return n->cops->switch_all(n, w, p, err, errlen);
	if (p == ck_pr_load_ptr(&n->proto))
		return 0;
	cc_quiesce_begin(n, w);
	cc_switch_apply(n, p);
	cc_quiesce_end(n);
	return 0;
}

const char *const *cc_protocol_names(const struct cc_node *n)
{
	static __thread const char *names[16];
	const struct cc_protocol *const *all = cc_protocol_all();
	int k = 0;
	for (int i = 0; all[i] && k < 15; i++)
		if ((!all[i]->testing_only || n->limits.testing) && !all[i]->id)
			names[k++] = all[i]->name;
	names[k] = NULL;
	return names;
}
