/*
 * durable.c: group commit for persistence power (see durable.h for the
 * design and invariants (1)-(3)).
 *
 * A request's life:
 *   QUEUED   --durable_wait: its worker's ranges appended to d->q, the
 *              request to d->head..tail, the flusher signalled; the
 *              coroutine joins its worker's waiting list and parks. With
 *              the log, the worker queues them at the end of its pass
 *              (wal_round), or takes the round itself: then the steps
 *              below are its own, and it unparks the coroutines at once
 *   TAKEN    --flusher: takes the whole queue (ranges and requests) under
 *              d->lock, merges and persists the ranges without the lock
 *   DONE     --flusher: err and done stored (release), the worker's eventfd
 *              written; from here the flusher forgets it (invariant (2))
 *   WOKEN    --aux_poll on the worker's thread: unlinked from the waiting
 *              list, coroutine unparked; durable_wait returns err
 */
#include "cc/durable.h"

#include <ck_pr.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "cc/cc.h"
#include "cc/exec_internal.h"
#include "cc/node.h"
#include "cc/sched.h"

#define PAGE 4096ull

struct dreq {
	int worker;          /* worker id of the waiting coroutine */
	bool commit;         /* a commit point (counted in gc_commits) */
	void *handle;        /* sched_self of the parked coroutine */
	int err;             /* written by the flusher before done */
	int done;            /* 0 -> 1 by the flusher, release; read with acquire */
	struct dreq *qnext;  /* flusher queue (under d->lock, then the flusher's) */
	/* Journal rings (d->ring): the peers whose logs must hold our writes,
	 * served by the peer waiter (pnext: its queue); pending counts the
	 * parts not finished yet (own log, peers), the last sets done. */
	uint64_t peers;
	int pending;
	struct dreq *pnext;
	struct dreq *wnext;  /* worker's waiting list (invariant (3)) */
	bool linked;         /* on that list (worker's thread only) */
	bool handed;         /* the log's: queued to the flusher (wal_round) */
};

struct dworker {
	int efd;             /* eventfd: the flusher finished a round with our requests */
	struct dreq *waiting;
	bool ring;           /* queued a request this pass (worker's thread only) */
	int fresh;           /* the log's: waiting and not handed (worker's thread) */
	bool wanted;         /* the log's: kept them for the round in flight,
				which wakes us when it ends (d->want) */
};

struct durable {
	struct cc_node *n;
	pthread_t thread;
	bool started;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* under lock: what the next round persists */
	struct fab_range *q;
	size_t qn, qcap;
	uint64_t qwhole;        /* nodes whose whole region goes (fab_dirty overflow) */
	struct dreq *head, *tail;
	bool stop;

	int nworkers;
	struct dworker *w;

	/* The write-ahead log (st_region_is_wal): a round appends and syncs
	 * the log instead of flushing pages; everysec syncs on a timer. */
	bool wal, everysec;
	bool inline_flush;      /* each worker flushes at the end of its pass
				   (durable_ring), not the flusher */
	uint64_t last_sync_us;  /* flusher only */
	/* power's log rounds (wal_round), under lock: a round is claimed, by
	 * the flusher or by a worker syncing inline; the workers that kept
	 * requests back meanwhile, woken when it ends. */
	bool busy;
	uint64_t want;

	uint64_t rng;           /* shuffle(): flusher only */

	/* A cluster node's log (st_wal_ring): every node's writes go through
	 * that node's journal ring, reached by its slot (the own one too).
	 * The peer waiter is the thread that waits for peers' logs, so that
	 * the flusher, which peers wait for, never waits for one. */
	bool ring;
	/* Nodes this CPU does not write itself are waited for with a remote
	 * flush (fab_flush), FORD's READ behind the WRITEs:
	 * - a tcp cluster: each node's log is the standalone node's (every
	 *   write to its region is made by its process: its workers, or its
	 *   NIC thread for the peers), and its NIC answers a flush once its
	 *   log holds everything it applied before it (journal_sync);
	 * - a verbs cluster on persistent memory: no log; the NIC answers the
	 *   READ once the WRITEs before it on the queue pair are placed, in
	 *   the persistence domain. The own region is behind the NIC too
	 *   (not direct), so it is flushed the same way. */
	bool remote;
	struct st_jring_slot slot[FAB_MAX_NODES];
	uint64_t ring_epoch;    /* slots re-pointed since start (atomic) */
	pthread_t pw_thread;
	bool pw_started;
	pthread_cond_t pw_cond; /* under lock */
	struct dreq *pw_head, *pw_tail;
	/* ck_pr counters: flusher (or a worker's round) writes, anyone reads */
	uint64_t requests, syncs, pages, inline_rounds;
};

size_t durable_merge(struct fab_range *r, size_t n, uint64_t page)
{
	if (n == 0)
		return 0;
	/* Insertion sort: a round holds tens to a few thousand ranges, mostly
	 * in posting order already. */
	for (size_t i = 1; i < n; i++) {
		struct fab_range x = r[i];
		size_t j = i;
		while (j > 0 && (r[j - 1].node > x.node ||
				 (r[j - 1].node == x.node && r[j - 1].off > x.off))) {
			r[j] = r[j - 1];
			j--;
		}
		r[j] = x;
	}
	const uint64_t cap = UINT32_MAX & ~(page - 1);
	size_t k = 0;
	uint64_t lo = 0, hi = 0;
	uint16_t node = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t a = r[i].off & ~(page - 1);
		uint64_t e = (r[i].off + r[i].len + page - 1) & ~(page - 1);
		if (e == a)
			continue; /* empty range */
		if (k > 0 && r[i].node == node && a <= hi && (e > hi ? e : hi) - lo <= cap) {
			if (e > hi)
				hi = e;
			r[k - 1].len = (uint32_t)(hi - lo);
			continue;
		}
		node = r[i].node;
		lo = a;
		hi = e;
		r[k++] = (struct fab_range){ .node = node, .off = lo, .len = (uint32_t)(hi - lo) };
	}
	return k;
}

/* Persist one range of a node: the own region through storage (it knows
 * pmem from msync, and power-sim), a peer's through the fabric. */
static int persist_range(struct durable *d, uint16_t node, uint64_t off, uint64_t len)
{
	struct cc_node *n = d->n;
	ck_pr_add_64(&d->syncs, 1);
	ck_pr_add_64(&d->pages, (len + PAGE - 1) / PAGE);
	if (node == fab_self(n->fab))
		return st_region_persist_checked(n->region, off, len);
	return fab_persist(n->fab, node, off, len);
}

/*
 * The own region's ranges of a round: storage persists exactly their pages
 * with one device flush (st_region_persist_ranges). Measured here (ext4 on
 * a virtual disk): an msync costs ~250 us of device flush plus ~400 us per
 * scattered dirty page; one msync per range pays the flush per range, and
 * one over the span of the ranges writes back every dirty page in between
 * (locks released since, other transactions' in-flight pages: harmless
 * but slow).
 */
static int persist_own(struct durable *d, const struct fab_range *r, size_t n)
{
	uint64_t pages = 0;
	for (size_t i = 0; i < n; i++)
		pages += (r[i].len + PAGE - 1) / PAGE;
	ck_pr_add_64(&d->syncs, 1);
	ck_pr_add_64(&d->pages, pages);
	return st_region_persist_ranges(d->n->region, r, n);
}

/*
 * power-sim: a round's ranges reach the file in a random order, so that a
 * cut in the middle of a round keeps an arbitrary subset of them, as a
 * real power cut may (the kernel writes pages back in no promised order).
 * In offset order, the log area (at the region's end) would always go
 * last, and a missing wait between records, installs and marks would
 * never show. Flusher thread only.
 */
static void shuffle(struct durable *d, struct fab_range *r, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		d->rng ^= d->rng << 13;
		d->rng ^= d->rng >> 7;
		d->rng ^= d->rng << 17;
		size_t j = (size_t)(d->rng % i);
		struct fab_range x = r[i - 1];
		r[i - 1] = r[j];
		r[j] = x;
	}
}

/* Persist merged ranges r[0..n) (sorted by node, then offset) and the
 * whole regions of the nodes in `whole`; `flusher`: called by the flusher
 * thread (the only one that may shuffle). */
static int persist_all(struct durable *d, struct fab_range *r, size_t n, uint64_t whole,
		       bool flusher)
{
	int err = 0;
	for (unsigned nd = 0; whole && nd < FAB_MAX_NODES; nd++) {
		if (!(whole & (1ull << nd)))
			continue;
		uint64_t size = fab_region_size(d->n->fab, (uint16_t)nd);
		int rc = persist_range(d, (uint16_t)nd, 0, size);
		if (rc && !err)
			err = rc;
	}
	for (size_t i = 0; i < n;) {
		uint16_t nd = r[i].node;
		size_t j = i + 1;
		while (j < n && r[j].node == nd)
			j++;
		if (!(whole & (1ull << (nd & 63)))) {
			if (nd == fab_self(d->n->fab)) {
				if (flusher && st_region_is_sim(d->n->region))
					shuffle(d, r + i, j - i);
				int rc = persist_own(d, r + i, j - i);
				if (rc && !err)
					err = rc;
			} else {
				/* A shm peer's: one msync over their span, through
				 * the fabric's mapping of its file (each msync call
				 * flushes the device; the fabric holds no fd for
				 * sync_file_range). */
				uint64_t lo = r[i].off, hi = r[j - 1].off + r[j - 1].len;
				int rc = persist_range(d, nd, lo, hi - lo);
				if (rc && !err)
					err = rc;
			}
		}
		i = j;
	}
	return err;
}

static uint64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* everysec: wait for requests, but wake to sync the log once a second
 * (d->lock held). Returns with a request queued, or stop, or the second
 * up (then the caller syncs). */
static bool wait_round(struct durable *d)
{
	if (!d->everysec) {
		/* busy: a worker is syncing a round of the log itself */
		while ((!d->head || d->busy) && !d->stop)
			pthread_cond_wait(&d->cond, &d->lock);
		return false;
	}
	while (!d->head && !d->stop) {
		uint64_t due = d->last_sync_us + 1000000u, now = mono_us();
		if (now >= due)
			return true;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t ns = (uint64_t)ts.tv_nsec + (due - now) * 1000u;
		ts.tv_sec += (time_t)(ns / 1000000000u);
		ts.tv_nsec = (long)(ns % 1000000000u);
		pthread_cond_timedwait(&d->cond, &d->lock, &ts);
	}
	return false;
}

/* Write the eventfd of every worker in wmask: its loop wakes and unparks
 * the coroutines whose requests are done (aux_poll). */
static void wake_workers(struct durable *d, uint64_t wmask)
{
	for (int i = 0; i < d->nworkers && i < 64; i++) {
		if (!(wmask & (1ull << i)))
			continue;
		uint64_t one = 1;
		ssize_t k = write(d->w[i].efd, &one, sizeof(one));
		(void)k;
	}
}

static void *flusher_main(void *arg)
{
	struct durable *d = arg;
	struct cc_node *n = d->n;
	struct fab_range *cur = NULL;
	size_t curcap = 0;
	bool logged = false;
	pthread_setname_np(pthread_self(), "rckv-flusher"); /* top -H, perf, gdb */
	d->last_sync_us = mono_us();
	for (;;) {
		pthread_mutex_lock(&d->lock);
		bool tick = wait_round(d);
		if (tick) {
			pthread_mutex_unlock(&d->lock);
			(void)st_wal_flush(n->region, true); /* everysec's sync */
			d->last_sync_us = mono_us();
			continue;
		}
		if (!d->head) { /* stop, and nothing left */
			pthread_mutex_unlock(&d->lock);
			break;
		}
		/* Take the round: swap the range buffers, detach the requests. */
		struct fab_range *r = d->q;
		size_t nr = d->qn, rcap = d->qcap;
		uint64_t whole = d->qwhole;
		d->q = cur;
		d->qcap = curcap;
		d->qn = 0;
		d->qwhole = 0;
		cur = r;
		curcap = rcap;
		struct dreq *reqs = d->head;
		d->head = d->tail = NULL;
		d->busy = d->wal;
		pthread_mutex_unlock(&d->lock);

		int err;
		if (d->wal) {
			/* Every write of the requests' transactions was noted when it
			 * was made (fab_journal), before they queued: this record
			 * holds them all. */
			err = st_wal_flush(n->region, !d->everysec);
			if (!d->everysec)
				d->last_sync_us = mono_us();
		} else {
			size_t m = durable_merge(r, nr, PAGE);
			err = persist_all(d, r, m, whole, true);
		}
		if (err && !logged) {
			cc_log(n, CC_LOG_WARNING,
				"persistence power: a flush failed (%s): the commits waiting for it "
				"fail with an error",
				strerror(-err));
			logged = true;
		}

		/* Read what we need from the requests, then complete them: after
		 * its done flag a request is gone (invariant (2)). */
		uint64_t wmask = 0; /* threads <= 64 (config.c) */
		uint64_t nreq = 0, ncommit = 0;
		for (struct dreq *q = reqs; q; q = q->qnext) {
			if (q->worker >= 0 && q->worker < d->nworkers && q->worker < 64)
				wmask |= 1ull << q->worker;
			nreq++;
			ncommit += q->commit;
		}
		for (struct dreq *q = reqs; q;) {
			struct dreq *next = q->qnext;
			q->err = err;
			__atomic_store_n(&q->done, 1, __ATOMIC_RELEASE);
			q = next;
		}
		if (d->wal) { /* the round ends: wal_round may claim the next */
			pthread_mutex_lock(&d->lock);
			d->busy = false;
			wmask |= d->want;
			d->want = 0;
			pthread_mutex_unlock(&d->lock);
		}
		wake_workers(d, wmask);
		ck_pr_add_64(&d->requests, nreq);
		ck_pr_add_64(&n->gc_commits, ncommit);
		ck_pr_add_64(&n->gc_flushes, 1);
		if (d->everysec && mono_us() >= d->last_sync_us + 1000000u) {
			(void)st_wal_flush(n->region, true); /* busy: the second is up */
			d->last_sync_us = mono_us();
		}
	}
	if (d->wal)
		(void)st_wal_flush(n->region, true);
	free(cur);
	return NULL;
}

/* ---- journal rings (a cluster node's log) ---- */

/* Finish one part of q with err; true when it was the last part, and q is
 * done (after this call q may be gone: read what you need first). */
static bool finish_part(struct dreq *q, int err)
{
	if (err) {
		int none = 0;
		__atomic_compare_exchange_n(&q->err, &none, err, false, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED);
	}
	if (__atomic_sub_fetch(&q->pending, 1, __ATOMIC_ACQ_REL) != 0)
		return false;
	__atomic_store_n(&q->done, 1, __ATOMIC_RELEASE);
	return true;
}

/*
 * The flusher of a node whose log is fed through its journal ring. It
 * sleeps on the ring's kick word, which local waits (durable_ring) and
 * peers waiting for this log (st_jring_wait) both bump, so one wake-up
 * serves both; a round drains the ring, appends, syncs and publishes
 * (st_wal_flush). It waits for nothing else: peers' logs are the peer
 * waiter's.
 */
static void *ring_flusher_main(void *arg)
{
	struct durable *d = arg;
	struct cc_node *n = d->n;
	struct st_jring *ring = st_wal_ring(n->region);
	bool logged = false;
	pthread_setname_np(pthread_self(), "rckv-flusher"); /* top -H, perf, gdb */
	d->last_sync_us = mono_us();
	for (;;) {
		uint32_t seen = st_jring_kicks(ring);
		pthread_mutex_lock(&d->lock);
		struct dreq *reqs = d->head;
		d->head = d->tail = NULL;
		bool stop = d->stop;
		pthread_mutex_unlock(&d->lock);
		uint64_t now = mono_us();
		bool tick = d->everysec && now >= d->last_sync_us + 1000000u;
		if (!reqs && !tick && !st_jring_wanted(ring)) {
			if (stop)
				break;
			uint64_t ms = 1000;
			if (d->everysec)
				ms = (d->last_sync_us + 1000000u - now) / 1000u + 1;
			st_jring_sleep(ring, seen, (int)ms);
			continue;
		}
		bool sync = !d->everysec || tick;
		int err = st_wal_flush(n->region, sync);
		if (sync)
			d->last_sync_us = mono_us();
		if (err && !logged) {
			cc_log(n, CC_LOG_WARNING,
			       "persistence power: a log flush failed (%s): the commits waiting for "
			       "it fail with an error",
			       strerror(-err));
			logged = true;
		}
		uint64_t wmask = 0, nreq = 0, ncommit = 0;
		for (struct dreq *q = reqs; q;) {
			struct dreq *next = q->qnext;
			int wk = q->worker;
			nreq++;
			ncommit += q->commit;
			if (finish_part(q, err) && wk >= 0 && wk < 64)
				wmask |= 1ull << wk;
			q = next;
		}
		wake_workers(d, wmask);
		if (reqs) {
			ck_pr_add_64(&d->requests, nreq);
			ck_pr_add_64(&n->gc_commits, ncommit);
			ck_pr_add_64(&n->gc_flushes, 1);
		}
	}
	(void)st_wal_flush(n->region, true);
	return NULL;
}

/* How long a commit waits for a peer's log before it fails (the peer is
 * alive but its log does not move: a stuck disk). */
#define PEER_LOG_TIMEOUT_MS 30000

/*
 * The peer waiter: takes every queued request, and for each peer any of
 * them names, waits until that peer's log is durable up to the ring's
 * tail as read now, which is past every write the requests made there
 * (they were noted before the requests queued).
 */
static void *peer_waiter_main(void *arg)
{
	struct durable *d = arg;
	pthread_setname_np(pthread_self(), "rckv-peer-wait"); /* top -H, perf, gdb */
	for (;;) {
		pthread_mutex_lock(&d->lock);
		while (!d->pw_head && !d->stop)
			pthread_cond_wait(&d->pw_cond, &d->lock);
		struct dreq *reqs = d->pw_head;
		d->pw_head = d->pw_tail = NULL;
		pthread_mutex_unlock(&d->lock);
		if (!reqs)
			break;
		uint64_t mask = 0;
		for (struct dreq *q = reqs; q; q = q->pnext)
			mask |= q->peers;
		int errs[FAB_MAX_NODES] = { 0 };
		for (unsigned nd = 0; nd < FAB_MAX_NODES; nd++) {
			if (!(mask & (1ull << nd)))
				continue;
			struct st_jring *j = __atomic_load_n(&d->slot[nd].ring, __ATOMIC_ACQUIRE);
			if (j)
				errs[nd] = st_jring_wait(j, st_jring_tail(j), PEER_LOG_TIMEOUT_MS);
		}
		uint64_t wmask = 0;
		for (struct dreq *q = reqs; q;) {
			struct dreq *next = q->pnext;
			int wk = q->worker, err = 0;
			for (unsigned nd = 0; nd < FAB_MAX_NODES && !err; nd++)
				if (q->peers & (1ull << nd))
					err = errs[nd];
			if (finish_part(q, err) && wk >= 0 && wk < 64)
				wmask |= 1ull << wk;
			q = next;
		}
		wake_workers(d, wmask);
	}
	return NULL;
}

int durable_attach_peer(struct cc_node *n, uint16_t node, const char *region_path,
			char *err, size_t errlen)
{
	struct durable *d = n->durable;
	if (node >= FAB_MAX_NODES) {
		snprintf(err, errlen, "node %u: no such node", node);
		return -EINVAL;
	}
	char path[PATH_MAX + 16];
	st_jring_path(region_path, path, sizeof(path));
	if (d && d->ring &&
	    st_jring_is(__atomic_load_n(&d->slot[node].ring, __ATOMIC_ACQUIRE), path))
		return 0; /* attached to this run's ring already */
	struct st_jring *j = NULL;
	int rc = st_jring_open(path, &j);
	if (rc == -ENOENT) {
		if (d && d->ring)
			st_jring_slot_set(&d->slot[node], NULL);
		return 0; /* the peer keeps no log */
	}
	if (rc) {
		snprintf(err, errlen, "node %u's journal ring %s: %s", node, path, strerror(-rc));
		return rc;
	}
	if (!d || !d->ring) {
		st_jring_close(j);
		snprintf(err, errlen,
			 "node %u keeps a write-ahead log (persistence power) but this node does "
			 "not: its log would miss this node's writes; give every node the same "
			 "persistence and power-log",
			 node);
		return -EINVAL;
	}
	st_jring_slot_set(&d->slot[node], j);
	__atomic_add_fetch(&d->ring_epoch, 1, __ATOMIC_RELEASE);
	struct fab_journal fj;
	st_jring_slot_journal(&d->slot[node], &fj);
	fab_set_journal(n->fab, node, &fj);
	return 0;
}

/*
 * The index's kick-out (storage/index.c invariant (7)) persists a moved
 * slot word before it overwrites the old one: 8 bytes, only once the index
 * is about half full, so synchronously on the worker's thread rather than
 * through a round.
 */
static int index_persist(void *arg, struct fab_batch *b, uint16_t node, uint64_t off,
			 uint64_t len)
{
	struct durable *d = arg;
	if (d->remote && !fab_node_direct(d->n->fab, node)) {
		/* b's endpoint made the write: a flush there covers it */
		fab_flush(b, node);
		return fab_exec(b);
	}
	return persist_range(d, node, off, len);
}

/* ---- the workers' side ---- */

static int aux_fd(void *arg, int worker_id)
{
	struct durable *d = arg;
	return worker_id >= 0 && worker_id < d->nworkers ? d->w[worker_id].efd : -1;
}

/* On worker worker_id's thread (fab_worker_poll): wake the coroutines
 * whose requests are done. */
static int aux_poll(void *arg, int worker_id)
{
	struct durable *d = arg;
	if (worker_id < 0 || worker_id >= d->nworkers)
		return 0;
	struct dworker *dw = &d->w[worker_id];
	uint64_t v;
	ssize_t k = read(dw->efd, &v, sizeof(v));
	(void)k;
	struct cc_worker *w = d->n->workers ? ck_pr_load_ptr(&d->n->workers[worker_id]) : NULL;
	int woken = 0;
	for (struct dreq **pp = &dw->waiting; *pp;) {
		struct dreq *q = *pp;
		if (!__atomic_load_n(&q->done, __ATOMIC_ACQUIRE)) {
			pp = &q->wnext;
			continue;
		}
		*pp = q->wnext;
		q->linked = false;
		if (w)
			sched_unpark(w->sched, q->handle);
		woken++;
	}
	return woken;
}

/* Append rq to the flusher's queue (d->lock held). */
static void queue_req_locked(struct durable *d, struct dreq *rq)
{
	rq->qnext = NULL;
	if (d->tail)
		d->tail->qnext = rq;
	else
		d->head = rq;
	d->tail = rq;
}

/* Append the worker's noted ranges to the queue (d->lock held). */
static int queue_ranges_locked(struct durable *d, struct fab_dirty *fd)
{
	if (d->qn + (size_t)fd->n > d->qcap) {
		size_t cap = d->qcap ? d->qcap : 1024;
		while (cap < d->qn + (size_t)fd->n)
			cap *= 2;
		struct fab_range *p = realloc(d->q, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		d->q = p;
		d->qcap = cap;
	}
	memcpy(d->q + d->qn, fd->r, (size_t)fd->n * sizeof(fd->r[0]));
	d->qn += (size_t)fd->n;
	d->qwhole |= fd->overflow;
	return 0;
}

static int park(struct durable *d, struct cc_worker *w, struct dreq *rq, bool ring);

/*
 * durable_wait_nodes with journal rings: the own log through the flusher
 * (if our writes there are not durable yet), the peers' through the peer
 * waiter; the request is done when both parts are.
 */
static int ring_wait(struct durable *d, struct txn *t, uint64_t nodes, bool commit)
{
	struct cc_worker *w = t->ccw;
	const uint16_t self = fab_self(t->node->fab);
	bool own = false;
	uint64_t peers = 0;
	/* A peer that restarted since the commit began has a new ring, and
	 * what we wrote there went to its old one: not in its log. (The own
	 * ring never changes.) */
	if ((nodes & ~(1ull << self)) &&
	    __atomic_load_n(&d->ring_epoch, __ATOMIC_ACQUIRE) != t->ring_epoch)
		return -EHOSTDOWN;
	for (unsigned nd = 0; nd < FAB_MAX_NODES; nd++) {
		if (!(nodes & (1ull << nd)))
			continue;
		struct st_jring_slot *sl = &d->slot[nd];
		struct st_jring *j = __atomic_load_n(&sl->ring, __ATOMIC_ACQUIRE);
		if (!j)
			continue; /* keeps no log (or not attached) */
		if (st_jring_durable(j) >= st_jring_tail(j))
			continue; /* everything noted there is in its log already */
		if (nd == self)
			own = true;
		else
			peers |= 1ull << nd;
	}
	if (!own && !peers)
		return 0;
	if (!sched_in_coro(w->sched)) {
		int rc = own ? st_wal_flush(t->node->region, !d->everysec) : 0;
		for (unsigned nd = 0; rc == 0 && nd < FAB_MAX_NODES; nd++)
			if (peers & (1ull << nd)) {
				struct st_jring *j = __atomic_load_n(&d->slot[nd].ring, __ATOMIC_ACQUIRE);
				rc = j ? st_jring_wait(j, st_jring_tail(j), PEER_LOG_TIMEOUT_MS) : 0;
			}
		return rc;
	}
	struct dreq rq = { .worker = w->worker_id, .commit = commit, .peers = peers,
			   .pending = own + (peers != 0) };
	rq.handle = sched_self(w->sched);
	pthread_mutex_lock(&d->lock);
	if (own) {
		if (d->tail)
			d->tail->qnext = &rq;
		else
			d->head = &rq;
		d->tail = &rq;
	}
	if (peers) {
		if (d->pw_tail)
			d->pw_tail->pnext = &rq;
		else
			d->pw_head = &rq;
		d->pw_tail = &rq;
		pthread_cond_signal(&d->pw_cond);
	}
	pthread_mutex_unlock(&d->lock);
	return park(d, w, &rq, own);
}

/*
 * durable_wait_nodes' peers under remote flushes: one fab_flush per peer,
 * all in one batch (one round trip, every peer's sync in parallel). The
 * flush must travel the connection our writes took: a break since the
 * commit began (t->ring_epoch) means a peer may have restarted and lost
 * them, and the wait fails.
 */
static int remote_wait(struct txn *t, uint64_t peers)
{
	if (!durable_flushes_count(t))
		return -EHOSTDOWN;
	(void)durable_post_flushes(t, peers);
	int rc = fab_exec(&t->batch);
	if (rc == 0 && !durable_flushes_count(t))
		rc = -EHOSTDOWN;
	return rc;
}

/* Of `nodes`, those a remote flush waits for: attached and not written
 * by this CPU (tcp: the peers; verbs: every node, the own one too). */
static uint64_t flushed_nodes(const struct durable *d, uint64_t nodes)
{
	if (!d || !d->remote)
		return 0;
	nodes &= fab_attached_nodes(d->n->fab);
	for (unsigned nd = 0; nd < FAB_MAX_NODES; nd++)
		if ((nodes & (1ull << nd)) && fab_node_direct(d->n->fab, (uint16_t)nd))
			nodes &= ~(1ull << nd);
	return nodes;
}

uint64_t durable_post_flushes(struct txn *t, uint64_t nodes)
{
	nodes = flushed_nodes(t->node->durable, nodes);
	for (unsigned nd = 0; nd < FAB_MAX_NODES; nd++)
		if (nodes & (1ull << nd))
			fab_flush(&t->batch, (uint16_t)nd);
	return nodes;
}

bool durable_flushes_count(const struct txn *t)
{
	return fab_worker_breaks(t->ccw->fw) == t->ring_epoch;
}

int durable_wait(struct txn *t, bool commit)
{
	return durable_wait_nodes(t, ~0ull, commit);
}

static int own_wait(struct durable *d, struct cc_node *n, struct cc_worker *w, bool commit);

int durable_wait_nodes(struct txn *t, uint64_t nodes, bool commit)
{
	struct durable *d = t->node->durable;
	struct cc_worker *w = t->ccw;
	t->durable_waited = true;
	if (d && d->ring)
		return ring_wait(d, t, nodes, commit);
	if (d && d->remote) {
		const uint64_t self = 1ull << fab_self(t->node->fab);
		uint64_t far = flushed_nodes(d, nodes);
		int rc = far ? remote_wait(t, far) : 0;
		if (rc == 0 && commit && (far & self))
			ck_pr_add_64(&t->node->gc_commits, 1);
		if (rc || !(nodes & self) || (far & self))
			return rc;
	}
	return own_wait(d, t->node, w, commit);
}

/* durable_wait_nodes for the node's own region (its log, or its pages). */
static int own_wait(struct durable *d, struct cc_node *n, struct cc_worker *w, bool commit)
{
	struct fab_dirty *fd = fab_worker_dirty(w->fw);
	if (!d || (!d->wal && !fd))
		return 0;
	if (d->wal && !sched_in_coro(w->sched))
		return st_wal_flush(n->region, !d->everysec);
	if (!sched_in_coro(w->sched)) {
		/* No coroutine to park (a test driving transactions from a
		 * plain thread): persist here. Concurrent with the flusher is
		 * fine: persists are idempotent, power-sim serializes copies. */
		size_t m = durable_merge(fd->r, (size_t)fd->n, PAGE);
		int rc = persist_all(d, fd->r, m, fd->overflow, false);
		fd->n = 0;
		fd->overflow = 0;
		return rc;
	}
	struct dreq rq = { .worker = w->worker_id, .commit = commit };
	rq.handle = sched_self(w->sched);
	if (d->inline_flush)
		goto wait; /* durable_ring serves it, on this thread */
	if (d->wal) {
		d->w[w->worker_id].fresh++;
		goto wait; /* wal_round, at the end of the pass */
	}
	pthread_mutex_lock(&d->lock);
	int rc = queue_ranges_locked(d, fd);
	if (rc == 0)
		queue_req_locked(d, &rq);
	pthread_mutex_unlock(&d->lock);
	if (rc)
		return rc;
	if (fd) {
		fd->n = 0;
		fd->overflow = 0;
	}
wait:
	return park(d, w, &rq, true);
}

/* Park the calling coroutine until rq is done; ring: wake the flusher at
 * the end of the worker's pass (durable_ring). */
static int park(struct durable *d, struct cc_worker *w, struct dreq *rq, bool ring)
{
	struct dworker *dw = &d->w[w->worker_id];
	if (ring)
		dw->ring = true;
	rq->wnext = dw->waiting;
	dw->waiting = rq;
	rq->linked = true;
	while (!__atomic_load_n(&rq->done, __ATOMIC_ACQUIRE))
		sched_park(w->sched);
	/* Done before aux_poll saw it: unlink it ourselves, the list must
	 * never keep a request whose stack frame is gone. */
	if (rq->linked)
		for (struct dreq **pp = &dw->waiting; *pp; pp = &(*pp)->wnext)
			if (*pp == rq) {
				*pp = rq->wnext;
				break;
			}
	return rq->err;
}

/* ---- start and stop ---- */

/* The own log's journal (fab_journal); arg is the region, which outlives
 * the fabric (a tcp node's NIC thread notes its peers' writes until
 * fab_close, after durable_stop). */
static int journal_lock(void *arg) { return st_wal_lock(arg); }
static void journal_unlock(void *arg) { st_wal_unlock(arg); }
static void journal_note(void *arg, uint64_t off, const void *src, uint32_t len)
{
	st_wal_note(arg, off, src, len);
}
/* A peer's remote flush (tcp's NIC, fab_flush): what the log promises for
 * everything noted so far, power's sync, or power-everysec's write (its
 * promise to a kill -9, as for the own commits). */
static int journal_sync(void *arg) { return st_wal_flush(arg, true); }
static int journal_write(void *arg) { return st_wal_flush(arg, false); }

/* The worker's own round, on its thread: everything appended so far (by
 * any worker) written, and synced when `sync`; then its waiters that were
 * not handed to the flusher. */
static bool inline_round(struct durable *d, struct cc_node *n, int worker, bool sync)
{
	struct dworker *dw = &d->w[worker];
	int err = st_wal_flush(n->region, sync);
	struct cc_worker *w = ck_pr_load_ptr(&n->workers[worker]);
	uint64_t nreq = 0, ncommit = 0;
	for (struct dreq **pp = &dw->waiting; *pp;) {
		struct dreq *q = *pp;
		if (q->handed) { /* the flusher's: aux_poll wakes it */
			pp = &q->wnext;
			continue;
		}
		*pp = q->wnext;
		nreq++;
		ncommit += q->commit;
		q->err = err;
		q->linked = false;
		__atomic_store_n(&q->done, 1, __ATOMIC_RELEASE);
		if (w)
			sched_unpark(w->sched, q->handle);
	}
	dw->fresh = 0;
	ck_pr_add_64(&d->requests, nreq);
	ck_pr_add_64(&n->gc_commits, ncommit);
	ck_pr_add_64(&n->gc_flushes, 1);
	return nreq > 0;
}

/*
 * power's log round, at the end of a worker's pass with requests waiting
 * (dw->fresh). One round runs at a time (d->busy): the flusher's or a
 * worker's own. The worker either syncs its requests on its own thread,
 * as Redis's event loop does, or queues them for the flusher and goes on:
 * - at least power-worker-sync-min (n->durable_worker_sync_min, default 8)
 *   waiting: a throughput-bound load, where the
 *   handoff costs more than it overlaps. The flusher's thread switches and
 *   its smaller rounds (requests that arrive during its fdatasync go to
 *   the next one) cost CPU on a saturated host: redis-benchmark SET -c 50
 *   -P 1 spent 18-21 us of server CPU per request through the flusher,
 *   13.9-14.8 on the worker, redis-server appendfsync always 13.6-14.4.
 *   When a round is running, the worker keeps them and is woken when it
 *   ends (d->want), to sync them then.
 * - fewer: a latency-bound load, where the worker runs the next
 *   transactions during the sync (ycsb-t on one node, 8 clients, 2.7
 *   commits per sync: 12,400 txn/s through the flusher, 10,100 on the
 *   worker). They are queued at once, running round or not: keeping them
 *   until the round ends would put two thread wake-ups between every two
 *   rounds (measured: 9,400-11,000 txn/s against 13,700-16,700).
 */
static bool wal_round(struct durable *d, struct cc_node *n, int worker)
{
	struct dworker *dw = &d->w[worker];
	dw->wanted = false;
	if (dw->fresh == 0)
		return false;
	pthread_mutex_lock(&d->lock);
	const int min = d->n->durable_worker_sync_min;
	bool many = min > 0 && dw->fresh >= min;
	if (d->busy && many) {
		d->want |= 1ull << (worker & 63); /* threads <= 64 (config.c) */
		pthread_mutex_unlock(&d->lock);
		dw->ring = true; /* decide at the pass its wake-up starts */
		dw->wanted = true;
		return false;
	}
	if (!many) {
		for (struct dreq *q = dw->waiting; q; q = q->wnext) {
			if (q->handed)
				continue;
			q->handed = true;
			queue_req_locked(d, q);
		}
		dw->fresh = 0;
		pthread_cond_signal(&d->cond);
		pthread_mutex_unlock(&d->lock);
		return false;
	}
	d->busy = true;
	pthread_mutex_unlock(&d->lock);
	bool woke = inline_round(d, n, worker, true);
	ck_pr_add_64(&d->inline_rounds, 1);
	pthread_mutex_lock(&d->lock);
	d->busy = false;
	uint64_t wmask = d->want & ~(1ull << (worker & 63));
	d->want = 0;
	if (d->head)
		pthread_cond_signal(&d->cond); /* handed meanwhile by another worker */
	pthread_mutex_unlock(&d->lock);
	wake_workers(d, wmask);
	return woke;
}

bool durable_ring(struct cc_node *n, int worker)
{
	struct durable *d = n->durable;
	if (!d || worker < 0 || worker >= d->nworkers || !d->w[worker].ring)
		return false;
	struct dworker *dw = &d->w[worker];
	dw->ring = false;
	if (d->ring) {
		st_jring_kick(st_wal_ring(n->region)); /* ring_flusher_main sleeps on it */
		return false;
	}
	if (d->inline_flush)
		return inline_round(d, n, worker, !d->everysec);
	if (d->wal)
		return wal_round(d, n, worker);
	pthread_mutex_lock(&d->lock);
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
	return false;
}

bool durable_pass_due(const struct cc_node *n, int worker)
{
	const struct durable *d = n->durable;
	if (!d || worker < 0 || worker >= d->nworkers)
		return false;
	const struct dworker *dw = &d->w[worker];
	return dw->ring && !dw->wanted;
}

bool durable_ordered(const struct cc_node *n)
{
	return n->durable && n->durable->wal;
}

bool durable_per_node(const struct cc_node *n)
{
	return n->durable && (n->durable->ring || n->durable->remote);
}

bool durable_early_release(const struct cc_node *n)
{
	return durable_ordered(n) && !durable_per_node(n);
}

int durable_wait_reads(struct txn *t)
{
	return t->durable_waited ? 0 : durable_wait_seen(t->node, t->ccw);
}

int durable_wait_seen(struct cc_node *n, struct cc_worker *w)
{
	if (!durable_early_release(n) || !st_wal_behind(n->region))
		return 0;
	return own_wait(n->durable, n, w, false);
}

uint64_t durable_epoch(const struct txn *t)
{
	const struct durable *d = t->node->durable;
	if (!d)
		return 0;
	if (d->remote)
		return fab_worker_breaks(t->ccw->fw);
	return __atomic_load_n(&d->ring_epoch, __ATOMIC_ACQUIRE);
}

int durable_start(struct cc_node *n, char *err, size_t errlen)
{
	struct durable *d = calloc(1, sizeof(*d));
	if (!d) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	d->n = n;
	d->wal = st_region_is_wal(n->region);
	d->everysec = d->wal && n->durable_everysec;
	/* everysec: the round is a write() only, cheaper on the worker's own
	 * thread at the end of its pass than handed to the flusher and back
	 * (measured, redis-benchmark SET -c 50: 10-11 us of CPU per request
	 * against 13-18, 20-30% more requests per second). power keeps the
	 * flusher: its fdatasync then overlaps the worker's next pass (ycsb-t
	 * with 8 clients: 15,100 txn/s against 10,300 inline). */
	d->ring = st_wal_ring(n->region) != NULL;
	d->remote = !d->ring && n->durable_remote;
	d->inline_flush = d->everysec && !d->ring;
	d->rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
	d->nworkers = n->nworkers;
	d->w = calloc((size_t)d->nworkers, sizeof(*d->w));
	if (!d->w) {
		free(d);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (int i = 0; i < d->nworkers; i++)
		d->w[i].efd = -1;
	int rc = 0;
	for (int i = 0; i < d->nworkers; i++) {
		d->w[i].efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (d->w[i].efd < 0) {
			rc = -errno;
			snprintf(err, errlen, "persistence power: eventfd: %s", strerror(errno));
			goto fail;
		}
	}
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	pthread_cond_init(&d->pw_cond, NULL);
	if (d->ring) {
		/* The own writes go through the own ring too (its slot), so the
		 * log has one order of everyone's writes. */
		const uint16_t self = fab_self(n->fab);
		st_jring_slot_set(&d->slot[self], st_wal_ring(n->region));
		struct fab_journal fj;
		st_jring_slot_journal(&d->slot[self], &fj);
		fab_set_journal(n->fab, self, &fj);
		if ((rc = -pthread_create(&d->pw_thread, NULL, peer_waiter_main, d)) != 0) {
			snprintf(err, errlen, "persistence power: cannot start the peer waiter: %s",
				 strerror(-rc));
			goto fail;
		}
		d->pw_started = true;
	}
	if ((rc = -pthread_create(&d->thread, NULL, d->ring ? ring_flusher_main : flusher_main,
				  d)) != 0) {
		snprintf(err, errlen, "persistence power: cannot start the flusher thread: %s",
			 strerror(-rc));
		goto fail;
	}
	d->started = true;
	if (d->wal && !d->ring) { /* a ring's journal is set above */
		/* Order is the log's (storage/wal.c invariant (1)): no page
		 * flushes, so no ranges to track, and the index's kick-out
		 * needs no persister. */
		fab_set_journal(n->fab, fab_self(n->fab),
				&(struct fab_journal){ .lock = journal_lock, .note = journal_note,
						       .unlock = journal_unlock,
						       .sync = d->everysec ? journal_write : journal_sync,
						       .arg = n->region });
	} else if (!d->wal) {
		st_region_set_persister(n->region, index_persist, d);
		if (!d->remote) /* else nothing is persisted by ranges */
			fab_track_writes(n->fab);
	}
	fab_set_aux(n->fab, &(struct fab_aux){ .fd = aux_fd, .poll = aux_poll, .arg = d });
	n->durable = d;
	return 0;
fail:
	if (d->pw_started) {
		pthread_mutex_lock(&d->lock);
		d->stop = true;
		pthread_cond_signal(&d->pw_cond);
		pthread_mutex_unlock(&d->lock);
		pthread_join(d->pw_thread, NULL);
	}
	if (d->ring)
		fab_set_journal(n->fab, fab_self(n->fab), NULL);
	for (int i = 0; i < d->nworkers; i++)
		if (d->w[i].efd >= 0)
			close(d->w[i].efd);
	free(d->w);
	free(d);
	return rc;
}

void durable_get_stats(const struct cc_node *n, struct durable_stats *out)
{
	memset(out, 0, sizeof(*out));
	struct durable *d = n->durable;
	out->rounds = ck_pr_load_64((uint64_t *)&n->gc_flushes);
	out->commits = ck_pr_load_64((uint64_t *)&n->gc_commits);
	if (!d)
		return;
	out->requests = ck_pr_load_64(&d->requests);
	out->syncs = ck_pr_load_64(&d->syncs);
	out->pages = ck_pr_load_64(&d->pages);
	out->inline_rounds = ck_pr_load_64(&d->inline_rounds);
}

void durable_stop(struct cc_node *n)
{
	struct durable *d = n->durable;
	if (!d)
		return;
	st_region_set_persister(n->region, NULL, NULL);
	pthread_mutex_lock(&d->lock);
	d->stop = true;
	pthread_cond_signal(&d->cond);
	pthread_cond_signal(&d->pw_cond);
	pthread_mutex_unlock(&d->lock);
	if (d->ring)
		st_jring_kick(st_wal_ring(n->region));
	pthread_join(d->thread, NULL);
	if (d->pw_started)
		pthread_join(d->pw_thread, NULL);
	if (d->ring) {
		/* No writer is left in this process; the fabric keeps the
		 * slots' addresses until it closes, right after this. */
		const uint16_t self = fab_self(n->fab);
		for (unsigned nd = 0; nd < FAB_MAX_NODES; nd++) {
			fab_set_journal(n->fab, (uint16_t)nd, NULL);
			st_jring_slot_clear(&d->slot[nd], nd == self);
		}
	}
	struct durable_stats st;
	durable_get_stats(n, &st);
	cc_log(n, CC_LOG_NOTICE,
		"group commit: %" PRIu64 " rounds for %" PRIu64 " commits (%.2f per round), %" PRIu64
		" waits, %" PRIu64 " device flushes of %" PRIu64 " pages",
		st.rounds, st.commits, st.rounds ? (double)st.commits / (double)st.rounds : 0.0,
		st.requests, st.syncs, st.pages);
	/* The fabric keeps pointers to d (fab_set_aux); workers are gone, so
	 * nobody polls it any more. */
	fab_set_aux(n->fab, &(struct fab_aux){ 0 });
	for (int i = 0; i < d->nworkers; i++)
		close(d->w[i].efd);
	pthread_cond_destroy(&d->cond);
	pthread_cond_destroy(&d->pw_cond);
	pthread_mutex_destroy(&d->lock);
	free(d->q);
	free(d->w);
	free(d);
	n->durable = NULL;
}
