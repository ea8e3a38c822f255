/*
 * expire: active expiry (server/expire.h says what and why). A thread of
 * its own paces the work and sleeps between slices; it scans a bounded
 * part of the region itself (st_scan is lock-free), and only when it found
 * keys past their time does it hand them to a worker's coroutine
 * (worker_call, taking turns over the workers), which reaps them, one
 * transaction per key. A slice that finds nothing wakes no worker: a
 * worker woken polls for a while (busy-poll-us) before it sleeps again.
 */
#include "server/expire.h"

#include <ck_pr.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cc/exec.h"
#include "cc/txn.h"
#include "server/log.h"
#include "server/node.h"
#include "server/notify.h"
#include "server/worker.h"
#include "storage/st.h"

#define EXPIRE_TICK_MS 100       /* between slices while keys expire (Redis: hz 10) */
#define EXPIRE_IDLE_MIN_MS 1000  /* after a pass that met no expiring key ... */
#define EXPIRE_IDLE_MAX_MS 16000 /* ... doubling up to this */
#define SLICE_BUCKETS 4096       /* index buckets per st_scan call */
#define TICK_BUDGET_NS 1000000   /* scanning per tick: 1% of a core at most */
#define SLICE_KEYS 64            /* keys a slice reaps at most (then it stops early) */

struct expire_cycle {
	struct node *n;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	int paused;        /* DEBUG SET-ACTIVE-EXPIRE 0 */
	uint64_t cursor;   /* st_scan's, across slices */
	uint64_t met;      /* keys with an expiry met in the current pass */
	uint64_t last_met; /* ... in the last whole pass (INFO) */
	uint64_t expired;  /* reaped so far (INFO) */
	unsigned turn;     /* the worker of the next slice */
};

struct slice {
	struct expire_cycle *ec;
	int64_t now;
	int nkeys;
	char *keys[SLICE_KEYS];
	uint32_t klen[SLICE_KEYS];
	bool wrapped;      /* the pass ended in this slice */
	uint64_t met;
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* st_scan visitor: note keys with an expiry, keep those past it. */
static int visit(void *arg, const char *key, uint32_t klen, const struct st_item *it)
{
	struct slice *s = arg;
	uint64_t data = ck_pr_load_64((uint64_t *)&it->data);
	if (!(st_data_vflags(data) & ST_V_EXPIRES) || st_data_vlen(data) < 8)
		return 0;
	s->met++;
	int64_t exp;
	memcpy(&exp, st_item_val(it), sizeof(exp));
	if (exp > s->now)
		return 0;
	char *k = malloc(klen ? klen : 1);
	if (!k)
		return 1;
	memcpy(k, key, klen);
	s->keys[s->nkeys] = k;
	s->klen[s->nkeys] = klen;
	return ++s->nkeys == SLICE_KEYS; /* full: the next slice goes on from here */
}

struct reap {
	struct cc_key k;
	bool reaped;
};

static int reap_body(struct txn *t, void *arg)
{
	struct reap *r = arg;
	return txn_reap_expired(t, r->k.p, r->k.len, &r->reaped);
}

static void reap_slice(struct worker *w, void *arg)
{
	struct slice *s = arg;
	struct expire_cycle *ec = s->ec;
	for (int i = 0; i < s->nkeys; i++) {
		struct reap r = { .k = { .p = s->keys[i], .len = s->klen[i],
					 .access = CC_KEY_READ | CC_KEY_WRITE } };
		const struct cc_txn tx = { .keys = &r.k, .nkeys = 1, .body = reap_body, .arg = &r };
		if (cc_run(w->ccw, &tx) == 0 && r.reaped) {
			ck_pr_inc_64(&ec->expired);
			notify_expired(w, s->keys[i], s->klen[i]); /* after its commit */
		}
		free(s->keys[i]);
	}
}

/* Wait ms, or until stopped; true when stopped. */
static bool pause_ms(struct expire_cycle *ec, uint64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&ec->mu);
	while (!ec->stop && pthread_cond_timedwait(&ec->cv, &ec->mu, &ts) != ETIMEDOUT)
		;
	bool stop = ec->stop;
	pthread_mutex_unlock(&ec->mu);
	return stop;
}

static void *cycle_main(void *arg)
{
	struct expire_cycle *ec = arg;
	struct node *n = ec->n;
	uint64_t idle = EXPIRE_IDLE_MIN_MS;
	uint64_t wait = EXPIRE_TICK_MS;
	while (!pause_ms(ec, wait)) {
		if (ck_pr_load_int(&ec->paused))
			continue;
		/* Scan until the pass ends, a slice of keys is due, or the
		 * tick's budget is spent. */
		struct slice s = { .ec = ec, .now = now_ms() };
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			st_scan(n->cc.region, &ec->cursor, SLICE_BUCKETS, visit, &s);
			clock_gettime(CLOCK_MONOTONIC, &t1);
		} while (ec->cursor != 0 && s.nkeys < SLICE_KEYS &&
			 (t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) <
				 TICK_BUDGET_NS);
		s.wrapped = ec->cursor == 0;
		if (s.nkeys) {
			struct worker *w = n->workers[ec->turn++ % (unsigned)n->nworkers];
			if (worker_call(w, reap_slice, &s) != 0) {
				for (int i = 0; i < s.nkeys; i++)
					free(s.keys[i]);
				break; /* the workers stop */
			}
		}
		ec->met += s.met;
		wait = EXPIRE_TICK_MS;
		if (s.nkeys == SLICE_KEYS)
			wait = 0; /* more are due: go on at once */
		if (s.wrapped) {
			ck_pr_store_64(&ec->last_met, ec->met);
			if (ec->met) {
				idle = EXPIRE_IDLE_MIN_MS;
			} else {
				wait = idle; /* none met in a whole pass */
				idle = idle * 2 < EXPIRE_IDLE_MAX_MS ? idle * 2 : EXPIRE_IDLE_MAX_MS;
			}
			ec->met = 0;
		}
	}
	return NULL;
}

int expire_cycle_start(struct node *n)
{
	struct expire_cycle *ec = calloc(1, sizeof(*ec));
	if (!ec)
		return -ENOMEM;
	ec->n = n;
	pthread_mutex_init(&ec->mu, NULL);
	pthread_cond_init(&ec->cv, NULL);
	int rc = pthread_create(&ec->thread, NULL, cycle_main, ec);
	if (rc) {
		pthread_cond_destroy(&ec->cv);
		pthread_mutex_destroy(&ec->mu);
		free(ec);
		return -rc;
	}
	n->expire = ec;
	return 0;
}

void expire_cycle_stop(struct node *n)
{
	struct expire_cycle *ec = n->expire;
	if (!ec)
		return;
	pthread_mutex_lock(&ec->mu);
	ec->stop = true;
	pthread_cond_signal(&ec->cv);
	pthread_mutex_unlock(&ec->mu);
	pthread_join(ec->thread, NULL);
	pthread_cond_destroy(&ec->cv);
	pthread_mutex_destroy(&ec->mu);
	free(ec);
	n->expire = NULL;
}

void expire_cycle_enable(struct node *n, bool on)
{
	struct expire_cycle *ec = n->expire;
	if (ec)
		ck_pr_store_int(&ec->paused, !on);
}

uint64_t expire_cycle_expiring(const struct node *n)
{
	const struct expire_cycle *ec = n->expire;
	return ec ? ck_pr_load_64((uint64_t *)&ec->last_met) : 0;
}

uint64_t expire_cycle_expired(const struct node *n)
{
	const struct expire_cycle *ec = n->expire;
	return ec ? ck_pr_load_64((uint64_t *)&ec->expired) : 0;
}
