/*
 * expire: active expiry (server/expire.h says what and why), and the
 * collection of orphaned collection parts (server/coll.h). A thread of
 * its own paces the work and sleeps between slices; it scans a bounded
 * part of the region itself (st_scan is lock-free), and only when it found
 * keys past their time does it hand them to a worker's coroutine
 * (worker_call, taking turns over the workers), which reaps them, one
 * transaction per key. A slice that finds nothing wakes no worker: a
 * worker woken polls for a while (busy-poll-us) before it sleeps again.
 *
 * Orphans: the same walk meets the parts of bucketed collections
 * (TXN_T_PART items). A part is garbage when no root holds its gen any
 * more (coll.h invariant (1)); only a transaction can say so
 * (coll_gc_gen), and waking a worker for every live part at every pass
 * would keep an idle node busy. So the walk notes the gens of the
 * bucketed roots it meets (live, this pass and the one before), and only
 * a part whose gen it did not see is a candidate, handed to a worker
 * with the keys due, one transaction per gen. A part met before its root
 * in the first pass is checked once for nothing; after that a live
 * collection costs no wake. A root on another node (RENAME moved it
 * there) is never seen here: its parts are checked once per pass, a
 * transaction per gen. When a command drops a bucketed root
 * (expire_cycle_poke: DEL, UNLINK), the cycle forgets what it saw and
 * goes back to its short pace, so the orphans go within a pass or two
 * rather than after the idle back-off.
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
#include "server/coll.h"
#include "server/notify.h"
#include "server/worker.h"
#include "storage/st.h"

#define EXPIRE_TICK_MS 100       /* between slices while keys expire (Redis: hz 10) */
#define EXPIRE_IDLE_MIN_MS 1000  /* after a pass that met no expiring key ... */
#define EXPIRE_IDLE_MAX_MS 16000 /* ... doubling up to this */
#define SLICE_BUCKETS 4096       /* index buckets per st_scan call */
#define TICK_BUDGET_NS 1000000   /* scanning per tick: 1% of a core at most */
#define SLICE_KEYS 64            /* keys a slice reaps at most (then it stops early) */
#define SLICE_PARTS 256          /* orphan candidates a slice hands over at most */

/* A set of gens (open addressing, 0 is no gen): the bucketed roots a pass
 * met. Only the cycle's thread touches it. */
struct genset {
	uint64_t *t;
	size_t cap, n;
};

static bool genset_has(const struct genset *g, uint64_t gen)
{
	if (!g->cap)
		return false;
	for (size_t i = gen & (g->cap - 1); g->t[i]; i = (i + 1) & (g->cap - 1))
		if (g->t[i] == gen)
			return true;
	return false;
}

static void genset_add(struct genset *g, uint64_t gen)
{
	if (genset_has(g, gen))
		return;
	if (2 * (g->n + 1) > g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 256;
		uint64_t *t = calloc(cap, sizeof(*t));
		if (!t)
			return; /* a gen not noted: its parts are checked, no harm */
		for (size_t i = 0; i < g->cap; i++)
			if (g->t[i]) {
				size_t j = g->t[i] & (cap - 1);
				while (t[j])
					j = (j + 1) & (cap - 1);
				t[j] = g->t[i];
			}
		free(g->t);
		g->t = t;
		g->cap = cap;
	}
	size_t j = gen & (g->cap - 1);
	while (g->t[j])
		j = (j + 1) & (g->cap - 1);
	g->t[j] = gen;
	g->n++;
}

static void genset_clear(struct genset *g)
{
	free(g->t);
	memset(g, 0, sizeof(*g));
}

struct part_ref {
	uint64_t gen;
	uint16_t slot;
	uint32_t id;
};

struct expire_cycle {
	struct node *n;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	int paused;        /* DEBUG SET-ACTIVE-EXPIRE 0 */
	uint64_t cursor;   /* st_scan's, across slices */
	uint64_t met;      /* keys with an expiry met in the current pass */
	uint64_t expiring; /* keys with an expiry met in the current pass */
	uint64_t last_met; /* ... in the last whole pass (INFO keyspace) */
	uint64_t expired;  /* reaped so far (INFO) */
	uint64_t collected;/* orphan parts deleted so far (INFO) */
	unsigned turn;     /* the worker of the next slice */
	struct genset live, live_prev; /* bucketed roots met this pass, the pass before */
	bool poked;        /* expire_cycle_poke: a root went; under mu */
};

struct slice {
	struct expire_cycle *ec;
	int64_t now;
	int nkeys;
	char *keys[SLICE_KEYS];
	uint32_t klen[SLICE_KEYS];
	bool wrapped;      /* the pass ended in this slice */
	uint64_t met;
	int nparts;
	struct part_ref parts[SLICE_PARTS];
	uint64_t collected;
};

static bool is_root_type(uint8_t t)
{
	return t == TXN_T_HASH || t == TXN_T_SET || t == TXN_T_LIST || t == TXN_T_ZSET;
}

/* Parts and roots, for the orphan collection (file comment). Returns 1
 * when the slice has no room for another candidate. */
static int visit_coll(struct slice *s, const char *key, uint32_t klen, const struct st_item *it,
		      uint64_t data)
{
	const uint8_t t = (uint8_t)((st_data_vflags(data) & ST_V_TYPE_MASK) >> ST_V_TYPE_SHIFT);
	struct part_ref p;
	if (t == TXN_T_PART && coll_part_parse(key, klen, &p.slot, &p.gen, &p.id)) {
		if (genset_has(&s->ec->live, p.gen) || genset_has(&s->ec->live_prev, p.gen))
			return 0;
		s->parts[s->nparts++] = p;
		return s->nparts == SLICE_PARTS;
	}
	if (is_root_type(t)) {
		/* read without a transaction: a torn value only makes a wrong
		 * hint (a part checked for nothing, or collected a pass later) */
		uint32_t vlen = st_data_vlen(data);
		const char *v = st_item_val(it);
		uint64_t gen;
		if ((st_data_vflags(data) & ST_V_EXPIRES) && vlen >= 8) {
			int64_t exp;
			memcpy(&exp, v, sizeof(exp));
			if (exp && exp <= s->now)
				return 0; /* gone to every reader: its parts are orphans */
			v += 8;
			vlen -= 8;
		}
		if (coll_root_gen(v, vlen, &gen)) /* bucketed, or a chunked list */
			genset_add(&s->ec->live, gen);
	}
	return 0;
}

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
	if ((st_data_vflags(data) & ST_V_TYPE_MASK) && visit_coll(s, key, klen, it, data))
		return 1; /* full: the next slice goes on from here */
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

struct gc {
	uint16_t slot;
	uint64_t gen;
	int n;
	uint32_t ids[SLICE_PARTS];
	int collected;
};

static int gc_body(struct txn *t, void *arg)
{
	struct gc *g = arg;
	return coll_gc_gen(t, g->slot, g->gen, g->ids, g->n, &g->collected);
}

static int cmp_part(const void *a, const void *b)
{
	const struct part_ref *x = a, *y = b;
	if (x->gen != y->gen)
		return x->gen < y->gen ? -1 : 1;
	return (x->slot > y->slot) - (x->slot < y->slot);
}

/* The candidates of a slice, one transaction per gen (coll_gc_gen). */
static void collect_parts(struct worker *w, struct slice *s)
{
	qsort(s->parts, (size_t)s->nparts, sizeof(s->parts[0]), cmp_part);
	for (int i = 0; i < s->nparts;) {
		int j = i;
		while (j < s->nparts && s->parts[j].gen == s->parts[i].gen &&
		       s->parts[j].slot == s->parts[i].slot)
			j++;
		struct gc *g = calloc(1, sizeof(*g));
		struct cc_key *keys = calloc((size_t)(j - i + 1), sizeof(*keys));
		char *names = malloc((size_t)(j - i + 1) * PL_PART_KEYLEN);
		if (!g || !keys || !names) {
			free(g);
			free(keys);
			free(names);
			return; /* the next pass tries again */
		}
		g->slot = s->parts[i].slot;
		g->gen = s->parts[i].gen;
		g->n = j - i;
		for (int k = 0; k < g->n; k++) {
			g->ids[k] = s->parts[i + k].id;
			coll_part_key(names + k * PL_PART_KEYLEN, g->slot, g->gen, g->ids[k]);
			keys[k] = (struct cc_key){ .p = names + k * PL_PART_KEYLEN,
						   .len = PL_PART_KEYLEN,
						   .access = CC_KEY_READ | CC_KEY_WRITE };
		}
		coll_part_key(names + g->n * PL_PART_KEYLEN, g->slot, g->gen, COLL_OWNER_ID);
		keys[g->n] = (struct cc_key){ .p = names + g->n * PL_PART_KEYLEN,
					      .len = PL_PART_KEYLEN, .access = CC_KEY_READ };
		const struct cc_txn tx = { .keys = keys, .nkeys = g->n + 1, .body = gc_body,
					   .arg = g };
		if (cc_run(w->ccw, &tx) == 0)
			s->collected += (uint64_t)g->collected;
		free(g);
		free(keys);
		free(names);
		i = j;
	}
}

static void reap_slice(struct worker *w, void *arg)
{
	struct slice *s = arg;
	struct expire_cycle *ec = s->ec;
	if (s->nparts)
		collect_parts(w, s);
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
	struct slice *s = malloc(sizeof(*s)); /* a few KiB: not on the stack */
	if (!s)
		return NULL;
	while (!pause_ms(ec, wait)) {
		if (ck_pr_load_int(&ec->paused))
			continue;
		pthread_mutex_lock(&ec->mu);
		bool poked = ec->poked;
		ec->poked = false;
		pthread_mutex_unlock(&ec->mu);
		if (poked) { /* a root went: trust no gen seen, hurry */
			genset_clear(&ec->live);
			genset_clear(&ec->live_prev);
			idle = EXPIRE_IDLE_MIN_MS;
		}
		/* Scan until the pass ends, a slice of keys or parts is due,
		 * or the tick's budget is spent. */
		memset(s, 0, sizeof(*s));
		s->ec = ec;
		s->now = now_ms();
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			st_scan(n->cc.region, &ec->cursor, SLICE_BUCKETS, visit, s);
			clock_gettime(CLOCK_MONOTONIC, &t1);
		} while (ec->cursor != 0 && s->nkeys < SLICE_KEYS && s->nparts < SLICE_PARTS &&
			 (t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) <
				 TICK_BUDGET_NS);
		s->wrapped = ec->cursor == 0;
		if (s->nkeys || s->nparts) {
			struct worker *w = n->workers[ec->turn++ % (unsigned)n->nworkers];
			if (worker_call(w, reap_slice, s) != 0) {
				for (int i = 0; i < s->nkeys; i++)
					free(s->keys[i]);
				break; /* the workers stop */
			}
			ck_pr_add_64(&ec->collected, s->collected);
		}
		/* Orphans collected count as met: the pace stays short while
		 * there are more; live parts checked for nothing do not. */
		ec->met += s->met + s->collected;
		ec->expiring += s->met;
		wait = EXPIRE_TICK_MS;
		if (s->nkeys == SLICE_KEYS || s->nparts == SLICE_PARTS)
			wait = 0; /* more are due: go on at once */
		if (s->wrapped) {
			ck_pr_store_64(&ec->last_met, ec->expiring);
			ec->expiring = 0;
			genset_clear(&ec->live_prev);
			ec->live_prev = ec->live;
			memset(&ec->live, 0, sizeof(ec->live));
			if (ec->met) {
				idle = EXPIRE_IDLE_MIN_MS;
			} else {
				wait = idle; /* none met in a whole pass */
				idle = idle * 2 < EXPIRE_IDLE_MAX_MS ? idle * 2 : EXPIRE_IDLE_MAX_MS;
			}
			ec->met = 0;
		}
	}
	free(s);
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
	genset_clear(&ec->live);
	genset_clear(&ec->live_prev);
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

void expire_cycle_poke(struct node *n)
{
	struct expire_cycle *ec = n->expire;
	if (!ec)
		return;
	pthread_mutex_lock(&ec->mu);
	ec->poked = true;
	pthread_cond_signal(&ec->cv);
	pthread_mutex_unlock(&ec->mu);
}

uint64_t expire_cycle_collected(const struct node *n)
{
	const struct expire_cycle *ec = n->expire;
	return ec ? ck_pr_load_64((uint64_t *)&ec->collected) : 0;
}

uint64_t expire_cycle_expired(const struct node *n)
{
	const struct expire_cycle *ec = n->expire;
	return ec ? ck_pr_load_64((uint64_t *)&ec->expired) : 0;
}
