/*
 * switch.c: node-wide quiesce and the online protocol switch (DESIGN.md
 * section 6). One switch at a time per node (switch_lock). The sequence:
 *   1. quiesce := 1: new transactions park in cc_enter;
 *   2. wait, yielding, until in-flight transactions drain to zero;
 *   3. run the quiet step (reset item metadata and publish the new
 *      protocol, or flush);
 *   4. quiesce := 0: parked transactions resume under the new protocol.
 * Clients see a pause, never an error.
 *
 * Invariant (1): no transaction runs between step 2 and step 4, so no item
 * carries metadata of two protocols and no transaction sees two protocols.
 */
#include "cc/switch.h"

#include <ck_pr.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cc/cc.h"
#include "cc/sched.h"
#include "server/node.h"
#include "server/worker.h"

static pthread_mutex_t switch_lock = PTHREAD_MUTEX_INITIALIZER;

int cc_quiesce_run(struct node *n, struct worker *w, int (*fn)(struct node *n, void *arg),
		   void *arg)
{
	/* Only one quiesce at a time; a second caller waits its turn without
	 * blocking its worker thread. */
	while (pthread_mutex_trylock(&switch_lock) != 0)
		sched_sleep(w->sched, 1000000);
	ck_pr_store_int(&n->quiesce, 1);
	ck_pr_fence_memory(); /* quiesce is visible before we read inflight */
	while (ck_pr_load_64(&n->inflight) != 0)
		sched_sleep(w->sched, 100000);
	int rc = fn(n, arg);
	ck_pr_fence_store(); /* the quiet step's writes precede the resume */
	ck_pr_store_int(&n->quiesce, 0);
	pthread_mutex_unlock(&switch_lock);
	return rc;
}

struct switch_arg {
	const struct cc_protocol *to;
};

static int do_switch(struct node *n, void *arg)
{
	struct switch_arg *sa = arg;
	/* Item metadata of the old protocol means nothing to the new one:
	 * reset lock and meta words (versions stay, so WATCH is unaffected). */
	st_reset_meta(n->region);
	ck_pr_store_ptr(&n->proto, (void *)sa->to);
	n->proto_epoch++;
	struct st_header *h = st_region_header(n->region);
	h->protocol_epoch = n->proto_epoch;
	return 0;
}

int cc_switch(struct node *n, struct worker *w, const char *name, char *err, size_t errlen)
{
	const struct cc_protocol *p = cc_protocol_find(name);
	if (!p || (p->testing_only && !n->cfg.testing)) {
		snprintf(err, errlen, "unknown concurrency control protocol '%s'%s", name,
			 p ? " (available only with 'testing yes')" : "");
		return -EINVAL;
	}
	if (p == ck_pr_load_ptr(&n->proto))
		return 0;
	struct switch_arg sa = { .to = p };
	return cc_quiesce_run(n, w, do_switch, &sa);
}

const char *const *cc_protocol_names(const struct node *n)
{
	static const char *names[16];
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	(void)once;
	const struct cc_protocol *const *all = cc_protocol_all();
	int k = 0;
	for (int i = 0; all[i] && k < 15; i++)
		if (!all[i]->testing_only || n->cfg.testing)
			names[k++] = all[i]->name;
	names[k] = NULL;
	return names;
}
