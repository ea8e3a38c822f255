/*
 * exec.c: the executor of a worker (cc/exec.h): transaction lifecycle,
 * retries with randomized exponential backoff, timestamps, the per-worker
 * pool of accesses, and the node's in-flight count used by quiesce.
 */
#include "cc/exec.h"

#include <ck_pr.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cc/cache.h"
#include "cc/cc.h"
#include "cc/durable.h"
#include "cc/exec_internal.h"
#include "cc/sched.h"
#include "cc/switch.h"
#include "cc/node.h"

/* Timestamps (cc.h): clock:48 | node:6 | rec:10. */
#define TS_EPOCH_US 1735689600000000ull
#define TS_LOW_BITS 16

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000ull;
}

/* Timestamps carry real time for the protocols that order by them
 * (timestamp, mvcc: a transaction that starts after another committed must
 * see it), so cc_ts_next reads the clock every time. A transaction's age
 * (prio_ts: its lock-owner word, wait-die and wound-wait priority) and
 * silo's versions need uniqueness, not freshness: cc_ts_unique reuses the
 * last reading up to CLOCK_REUSE times between the worker's wake-ups
 * (cc_worker_tick); a clock read costs about what a GET's whole lookup
 * does. A reused reading is behind real time, never ahead, so a stamp of
 * either kind orders before every fresh one taken after it. */
#define CLOCK_REUSE 32

void cc_worker_tick(struct cc_worker *ccw)
{
	ccw->clock_reuse = 0;
}

bool cc_worker_pass_end(struct cc_worker *ccw)
{
	return durable_ring(ccw->node, ccw->worker_id);
}

bool cc_worker_pass_due(const struct cc_worker *ccw)
{
	return durable_pass_due(ccw->node, ccw->worker_id);
}

static uint64_t ts_make(struct txn *t, uint64_t us)
{
	struct cc_worker *ccw = t->ccw;
	uint64_t clock = us > ccw->ts_clock ? us : ccw->ts_clock;
	/* The record's clock part strictly grows: unique per (node, rec). */
	if (clock <= ccw->rec_clock[t->rec])
		clock = ccw->rec_clock[t->rec] + 1;
	ccw->rec_clock[t->rec] = clock;
	ccw->ts_clock = clock;
	uint64_t node = fab_self(t->node->fab) & 63u;
	return (clock << TS_LOW_BITS) | (node << 10) | ((uint64_t)t->rec & 1023u);
}

/* How far ahead of the clock a fresh stamp may be before cc_ts_next waits
 * for the clock: more is a peer's skewed clock seen (cc_ts_observe), which
 * the protocols order by as RCC 4.4 says, not time to wait out. */
#define AHEAD_WAIT_MAX_US 1000

uint64_t cc_ts_next(struct txn *t)
{
	struct cc_worker *ccw = t->ccw;
	ccw->clock_us = now_us() - TS_EPOCH_US;
	ccw->clock_reuse = CLOCK_REUSE;
	uint64_t ts = ts_make(t, ccw->clock_us);
	/* A stamp is ahead of the clock when the worker's stamps came faster
	 * than one per microsecond and record (ts_make keeps them unique by
	 * counting on). Handing it out would let a transaction that begins on
	 * another worker after this one committed take a smaller stamp, and
	 * under timestamp or mvcc read before it: a stale read in real time
	 * (tests/unit/test_cc.c, two nodes). So wait until the clock has
	 * passed it: a stamp is then never later than the moment it was
	 * handed out. */
	uint64_t clock = ts >> TS_LOW_BITS;
	if (clock > ccw->clock_us && clock - ccw->clock_us <= AHEAD_WAIT_MAX_US &&
	    sched_in_coro(ccw->sched))
		sched_sleep(ccw->sched, (clock - ccw->clock_us) * 1000ull);
	return ts;
}

uint64_t cc_ts_unique(struct txn *t)
{
	struct cc_worker *ccw = t->ccw;
	if (ccw->clock_reuse == 0)
		return cc_ts_next(t);
	ccw->clock_reuse--;
	return ts_make(t, ccw->clock_us);
}

void cc_ts_observe(struct txn *t, uint64_t ts)
{
	uint64_t clock = (ts >> TS_LOW_BITS) + 1; /* the next stamps order after ts */
	if (clock > t->ccw->ts_clock && clock < (1ull << 48))
		t->ccw->ts_clock = clock;
}

int cc_begin_fresh_ts(struct txn *t)
{
	t->start_ts = cc_ts_next(t);
	t->owner = cc_owner_word(fab_self(t->node->fab), t->start_ts);
	return CC_OK;
}

int cc_wait(struct txn *t, int round)
{
	uint64_t now = sched_now_ns();
	if (round == 0)
		t->wait_since = now;
	else if (now - t->wait_since > (uint64_t)CC_WAIT_MAX_MS * 1000000ull)
		return cc_abort_with(t, CC_CAUSE_LOCK);
	/* 2 us, doubling to 256 us: a holder usually finishes within a few
	 * round trips. The wait is counted (INFO cc_lock_waits). */
	uint64_t ns = 2000ull << (round < 7 ? round : 7);
	t->ccw->stats.lock_waits++;
	sched_sleep(t->ccw->sched, ns);
	return CC_OK;
}

/* Transaction records: worker w owns records r with r % nworkers == w. */
static int rec_get(struct cc_worker *ccw)
{
	for (;;) {
		if (ccw->nrec_free)
			return ccw->rec_free[--ccw->nrec_free];
		sched_sleep(ccw->sched, 50000); /* every record busy: wait for one */
	}
}

static void rec_put(struct cc_worker *ccw, int rec)
{
	ccw->rec_free[ccw->nrec_free++] = rec;
}

int cc_abort_with(struct txn *t, int cause)
{
	t->cause = cause;
	return CC_ABORT;
}

static void waiter_fn(void *ctx, uint64_t ns)
{
	struct cc_worker *ccw = ctx;
	sched_sleep(ccw->sched, ns);
}

static void *waiter_self(void *ctx)
{
	struct cc_worker *ccw = ctx;
	return sched_self(ccw->sched);
}

static void waiter_park(void *ctx)
{
	struct cc_worker *ccw = ctx;
	sched_park(ccw->sched);
}

static void waiter_unpark(void *ctx, void *handle)
{
	struct cc_worker *ccw = ctx;
	sched_unpark(ccw->sched, handle);
}

static void waiter_waited(void *ctx, uint64_t ns)
{
	struct cc_worker *ccw = ctx;
	uint64_t ms = ns / 1000000u, th = ck_pr_load_64(&ccw->node->limits.fabric_wait_ms);
	if (th && ms >= th && ccw->node->on_fabric_wait)
		ccw->node->on_fabric_wait(ccw->node, ms);
}

void cc_batch_init(struct fab_batch *b, struct cc_worker *ccw, struct fab_stats *stats)
{
	/* The wait is timed only while someone listens (two clock reads an
	 * exec otherwise). */
	bool timed = ck_pr_load_64(&ccw->node->limits.fabric_wait_ms) != 0;
	fab_batch_init(b, ccw->fw,
		       (struct fab_waiter){ .wait = waiter_fn, .ctx = ccw,
					    .self = waiter_self, .park = waiter_park,
					    .unpark = waiter_unpark,
					    .waited = timed ? waiter_waited : NULL },
		       stats);
}

/* The address cache's bound (cc_limits; 0 before the server set it, as
 * in a unit test's node: the default of the option). */
static size_t cache_entries(const struct cc_node *n)
{
	uint64_t v = ck_pr_load_64((uint64_t *)&n->limits.addr_cache_entries);
	return v ? (size_t)v : CC_ADDR_CACHE_DEFAULT;
}

struct cc_worker *cc_worker_create(struct cc_node *n, int id, struct sched *sched,
				   struct fab_worker *fw)
{
	if (id < 0 || id >= n->nworkers || !n->workers)
		return NULL;
	cc_quiesce_setup(); /* before this worker's first cc_enter */
	struct cc_worker *ccw = calloc(1, sizeof(*ccw));
	if (!ccw)
		return NULL;
	ccw->node = n;
	ccw->worker_id = id;
	ccw->sched = sched;
	ccw->fw = fw;
	ccw->rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)id << 32) ^ now_us();
	ccw->cache = cc_cache_create(cache_entries(ccw->node));
	ccw->place_rec = pl_reader_get(&n->place);
	if (!ccw->cache || !ccw->place_rec) {
		if (ccw->cache)
			cc_cache_destroy(ccw->cache);
		pl_reader_put(&n->place, ccw->place_rec);
		free(ccw);
		return NULL;
	}
	char *base = st_region_base(n->region);
	for (int r = ST_TXN_STATES - 1; r >= 0; r--) {
		if (r % n->nworkers != id % n->nworkers)
			continue;
		ccw->rec_free[ccw->nrec_free++] = r;
		/* Words 1..7 of our records (maat's latch, txn id and interval)
		 * may name a transaction of a process that died with them: no
		 * transaction of this one is that, nor holds their latch. */
		memset(base + st_txn_state_off(n->layout, (unsigned)r) + 8, 0, ST_TXN_BYTES - 8);
	}
	ck_pr_store_ptr(&n->workers[id], ccw);
	return ccw;
}

struct cc_stats *cc_worker_stats(struct cc_worker *ccw)
{
	return &ccw->stats;
}

uint64_t cc_worker_inflight(const struct cc_worker *ccw)
{
	return ck_pr_load_64((uint64_t *)&ccw->inflight);
}

void cc_worker_destroy(struct cc_worker *ccw)
{
	if (!ccw)
		return;
	struct cc_node *n = ccw->node;
	if (n->workers && n->workers[ccw->worker_id] == ccw)
		ck_pr_store_ptr(&n->workers[ccw->worker_id], NULL);
	pl_reader_put(&n->place, ccw->place_rec);
	struct cc_access *a;
	while ((a = ccw->free_acc)) {
		ccw->free_acc = a->hnext;
		free(a->key);
		free(a->img);
		free(a->wval);
		free(a);
	}
	free(ccw->acc);
	free(ccw->bk);
	free(ccw->tab);
	while (ccw->nscratch)
		free(ccw->scratch[--ccw->nscratch]);
	while (ccw->nundo_spare)
		free(ccw->undo_spare[--ccw->nundo_spare]);
	cc_cache_destroy(ccw->cache);
	free(ccw);
}

static uint64_t rng_next(struct cc_worker *ccw)
{
	uint64_t x = ccw->rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return ccw->rng = x;
}

void cc_enter(struct cc_worker *ccw)
{
	struct cc_node *n = ccw->node;
	for (;;) {
		/* This worker's own counter: no cache line shared with the other
		 * workers on the path of every transaction. */
		ck_pr_store_64(&ccw->inflight, ccw->inflight + 1);
		/* inflight is visible before we read quiesce: our fence, or the
		 * quiescer's membarrier (cc/switch.h). */
		if (cc_enter_light)
			ck_pr_barrier();
		else
			ck_pr_fence_memory();
		if (!ck_pr_load_int(&n->quiesce)) {
			/* The placement map stays valid until cc_leave. */
			ck_epoch_begin(ccw->place_rec, NULL);
			return;
		}
		ck_pr_store_64(&ccw->inflight, ccw->inflight - 1);
		sched_sleep(ccw->sched, 200000); /* a switch takes milliseconds */
	}
}

void cc_leave(struct cc_worker *ccw)
{
	ck_epoch_end(ccw->place_rec, NULL);
	ck_pr_fence_store(); /* the transaction's effects precede the count */
	ck_pr_store_64(&ccw->inflight, ccw->inflight - 1);
}

/* Field by field: a txn holds a batch of FAB_BATCH_MAX ops (kilobytes) that
 * must not be cleared for every transaction. The access arrays are taken
 * from the worker's spare pair and given back by txn_release: several
 * transactions of one worker run at once (each on its coroutine), so a
 * transaction owns its arrays while it runs. */
void cc_cache_sync(struct cc_worker *ccw)
{
	uint64_t fe = ck_pr_load_64(&ccw->node->flush_epoch);
	if (fe != ccw->cache_epoch) { /* a flush voided every cached address */
		cc_cache_clear(ccw->cache);
		ccw->cache_epoch = fe;
	}
	size_t want = cache_entries(ccw->node);
	if (want != cc_cache_max(ccw->cache)) /* CONFIG SET addr-cache-entries */
		(void)cc_cache_resize(ccw->cache, want);
}

static void txn_begin(struct cc_worker *ccw, struct txn *t, int rec, uint64_t prio_ts)
{
	struct cc_node *n = ccw->node;
	cc_cache_sync(ccw);
	t->node = n;
	t->ccw = ccw;
	t->proto = ck_pr_load_ptr(&n->proto);
	t->rec = rec;
	t->prio_ts = prio_ts;
	t->owner = cc_owner_word(fab_self(n->fab), prio_ts);
	t->wait_since = 0;
	t->start_ts = 0; /* protocols that order by start time call cc_txn_start_ts */
	t->cts = 0;
	t->cause = CC_CAUSE_OTHER;
	t->fatal = 0;
	t->unknown = 0;
	t->unknown_noted = 0;
	t->now_ms = 0; /* txn_now_ms: read at its first use */
	t->rand_n = 0; /* txn_rand: every attempt draws the same sequence */
	t->changes = 0;
	t->uniq_seq = 0; /* txn_unique: the same values in every attempt */
	t->reached = 0;
	t->breaks = fab_worker_breaks(ccw->fw);
	t->durable_waited = false;
	t->single_read = false;
	t->single_write = false;
	t->sp_gen = 0;
	t->pdata = NULL;
	t->undo.slot = -1;
	t->undo.phase = UNDO_NONE;
	t->undo.nodes = 0;
	t->undo.buf = NULL;
	t->undo.cap = 0;
	t->undo.ext = NULL;
	t->undo.next = t->undo.ext_cap = 0;
	memset(&t->fstats, 0, sizeof(t->fstats));
	t->acc = ccw->acc;
	t->acc_cap = ccw->acc_cap;
	t->nacc = 0;
	t->tab = ccw->tab;
	t->tab_mask = ccw->tab_mask;
	ccw->acc = NULL;
	ccw->acc_cap = 0;
	t->bk = ccw->bk;
	t->bk_cap = ccw->bk_cap;
	t->nbk = 0;
	ccw->bk = NULL;
	ccw->bk_cap = 0;
	ccw->tab = NULL;
	ccw->tab_mask = 0;
	cc_batch_init(&t->batch, ccw, &t->fstats);
	t->batch.twosided = (uint8_t)ck_pr_load_32(&ccw->node->rpc_stages);
	t->batch.tag = CC_STAGE_READ;
}

/* Big, but only the pages a lookup touches become resident (malloc maps
 * blocks this large lazily). */
struct st_item *cc_scratch_get(struct cc_worker *ccw)
{
	if (ccw->nscratch)
		return ccw->scratch[--ccw->nscratch];
	return malloc(ST_SLAB_BYTES);
}

void cc_scratch_put(struct cc_worker *ccw, struct st_item *buf)
{
	if (ccw->nscratch < (int)(sizeof(ccw->scratch) / sizeof(ccw->scratch[0])))
		ccw->scratch[ccw->nscratch++] = buf;
	else
		free(buf);
}

uint64_t cc_txn_start_ts(struct txn *t)
{
	if (!t->start_ts)
		t->start_ts = cc_ts_next(t);
	return t->start_ts;
}

/* The longest backoff sleep between two attempts. */
#define BACKOFF_MAX_NS (50ull * 1000 * 1000)

/* A fetch round, its round trips counted in the protocol's line. */
static int fetch_counted(struct txn *t, const struct cc_key *keys, int nkeys)
{
	uint64_t rt0 = t->fstats.round_trips;
	int rc = txn_fetch(t, keys, nkeys);
	int pi = cc_protocol_index(t->proto);
	t->ccw->stats.proto[pi].fetch_round_trips += t->fstats.round_trips - rt0;
	return rc;
}

int cc_fetch_more(struct txn *t, const struct cc_key *keys, int nkeys)
{
	if (nkeys <= 0)
		return CC_OK;
	return fetch_counted(t, keys, nkeys);
}

int cc_wait_lease(struct cc_worker *ccw, uint64_t *deadline)
{
	struct cc_node *n = ccw->node;
	if (!ck_pr_load_64(&n->lease_until_ns))
		return CC_OK;
	for (;;) {
		if (ck_pr_load_32(&n->config_refuse))
			return CC_ENOTSERVING;
		uint64_t now = sched_now_ns();
		if (now < ck_pr_load_64(&n->lease_until_ns))
			return CC_OK;
		if (!*deadline) {
			long long ms = (long long)ck_pr_load_64(&n->limits.txn_timeout_ms);
			*deadline = now + (uint64_t)(ms > 0 ? ms : 1) * 1000000ull;
		} else if (now >= *deadline) {
			return CC_ENOTSERVING;
		}
		sched_sleep(ccw->sched, 5ull * 1000 * 1000);
	}
}

/*
 * After a fabric failure in a replicated cluster: wait, until the
 * transaction's txn-timeout (*deadline, set here if not yet), for the
 * node's configuration to move past `config`. True if it did.
 */
static bool wait_config(struct cc_worker *ccw, uint64_t config, uint64_t *deadline)
{
	struct cc_node *n = ccw->node;
	uint64_t now = sched_now_ns();
	if (!*deadline) {
		long long ms = (long long)ck_pr_load_64(&n->limits.txn_timeout_ms);
		*deadline = now + (uint64_t)(ms > 0 ? ms : 1) * 1000000ull;
	}
	/* Or the lease changed: our own ran out (fab_set_lease failed the
	 * operations) and a new one came, as good as a new configuration; or
	 * it runs out now, and the next attempt waits for one, or says why
	 * this node cannot serve (wait_lease). */
	const bool lapsed = now >= ck_pr_load_64(&n->lease_until_ns);
	while (ck_pr_load_64(&n->config_epoch) == config) {
		if (lapsed != (sched_now_ns() >= ck_pr_load_64(&n->lease_until_ns)))
			return true;
		if (sched_now_ns() >= *deadline)
			return false;
		sched_sleep(ccw->sched, 10ull * 1000 * 1000);
	}
	return true;
}

static int run(struct cc_worker *ccw, const struct cc_txn *tx, struct cc_ollp *ollp)
{
	struct cc_node *n = ccw->node;
	struct cc_stats *st = &ccw->stats;
	uint64_t deadline = 0;
	uint64_t backoff_ns = 2000;
	struct txn t;
	/* The record and the age are the transaction's, not an attempt's: a
	 * retry keeps its priority (wait-die and wound-wait: an old
	 * transaction is not starved by younger ones). */
	int rec = rec_get(ccw);
	uint64_t prio_ts = 0;
	int rc;

	/* When the attempt began, from the second on: a clock read on the
	 * retry path only (it costs a GET a few percent). */
	uint64_t began = 0;
	t.first_ts = 0; /* kept across attempts (cc.h) */

	bool new_owner = true;
	for (int attempt = 0;; attempt++) {
		const uint64_t lease = ck_pr_load_64(&n->lease_until_ns);
		if (lease && (rc = cc_wait_lease(ccw, &deadline)) != CC_OK) {
			rec_put(ccw, rec);
			return rc;
		}
		const uint64_t config = ck_pr_load_64(&n->config_epoch);
		cc_enter(ccw);
		if (lease && ck_pr_load_32(&n->config_refuse)) {
			/* Refused while it waited to enter: a quiesce that drains
			 * the node for good (a shutdown) lets nothing new in. */
			cc_leave(ccw);
			rec_put(ccw, rec);
			return CC_ENOTSERVING;
		}
		txn_begin(ccw, &t, rec, prio_ts);
		if (new_owner)
			t.prio_ts = prio_ts = cc_ts_unique(&t);
		new_owner = false;
		t.owner = cc_owner_word(fab_self(n->fab), prio_ts);
		t.attempt = attempt;
		t.decl = tx;
		t.ollp = ollp;
		int pi = cc_protocol_index(t.proto);
		rc = t.proto->begin ? t.proto->begin(&t) : CC_OK;
		struct cc_proto_stats *ps = &st->proto[pi];
		/* Fetch. One key gains nothing from a batch, and keeps the
		 * single-key paths (an absent GET needs no placeholder). */
		if (rc == CC_OK && tx->nkeys > 1) {
			rc = fetch_counted(&t, tx->keys, tx->nkeys);
			ps->fetches++;
		}
		/* Execute. */
		if (rc == CC_OK)
			rc = tx->body(&t, tx->arg);
		if (rc == CC_OK && t.fatal)
			rc = t.fatal; /* a peer failed mid-transaction: abort all of it */
		if (rc == CC_OK) {
			prim_stage(&t, CC_STAGE_LOCK);
			rc = t.proto->commit(&t); /* commit */
		}
		if (rc == CC_OK) {
			/* What it read may be a write the log does not hold
			 * yet (durable_early_release). */
			int drc = durable_wait_reads(&t);
			if (tx->changes)
				*tx->changes = t.changes;
			txn_after_commit(&t);
			if (t.proto->committed)
				t.proto->committed(&t);
			cc_leave(ccw);
			st->txn_committed++;
			fab_stats_add(&st->fab, &t.fstats);
			st->fab_txns++;
			ps->commits++;
			fab_stats_add(&ps->fab, &t.fstats);
			txn_release(&t);
			rec_put(ccw, rec);
			return drc ? CC_EUNKNOWN : 0;
		}
		prim_stage(&t, CC_STAGE_RELEASE);
		t.proto->abort(&t);
		txn_after_abort(&t);
		fab_stats_add(&ps->fab, &t.fstats); /* an attempt's verbs count too */
		/* The abort's releases failed: nodes will release this owner
		 * word's locks later (undo_locks_pending), so no retry may take
		 * locks under it. The client hears of the failed node. */
		if (rc > 0 && t.fatal)
			rc = t.fatal;
		if (rc < 0) { /* an error, not a CC abort: no retry */
			cc_leave(ccw);
			txn_release(&t);
			st->txn_aborts++;
			if (rc == CC_EFAB && lease && wait_config(ccw, config, &deadline)) {
				/* A node failed and the configuration moved past it
				 * (a failover): nothing was written; run again on
				 * the new map, under a new owner word, since the
				 * old one's locks may still wait for a release. */
				st->txn_retries++;
				new_owner = true;
				continue;
			}
			if (rc != CC_EALONE) /* the body's choice, not a failure */
				ps->errors++;
			rec_put(ccw, rec);
			return rc;
		}
		/* A cached address may have gone stale: a reused block shows up as
		 * STALE, or as a LOCK conflict on another key's lock word (the
		 * 2PL waiters check the block before they die or wait on its
		 * holder: lock2pl.h). Drop the transaction's entries, so the
		 * retry resolves them anew. */
		if (t.cause == CC_CAUSE_STALE || t.cause == CC_CAUSE_LOCK)
			txn_forget_addresses(&t);

		cc_leave(ccw);
		txn_release(&t);
		st->txn_aborts++;
		int cause = t.cause < CC_CAUSES ? t.cause : CC_CAUSE_OTHER;
		st->aborts_by_cause[cause]++;
		ps->aborts_by_cause[cause]++;

		uint64_t now = sched_now_ns();
		if (!deadline) {
			long long ms = (long long)ck_pr_load_64(&n->limits.txn_timeout_ms);
			deadline = now + (uint64_t)(ms > 0 ? ms : 1) * 1000000ull;
		} else if (now >= deadline) {
			st->txn_timeouts++;
			rec_put(ccw, rec);
			return CC_ETIMEOUT;
		}
		st->txn_retries++;
		if (t.cause == CC_CAUSE_OLLP)
			continue; /* no conflict to spread out from: rerun at once */
		/* Randomized exponential backoff: half fixed, half jitter, so
		 * conflicting coroutines spread out instead of colliding again.
		 * Exponential in the attempt's own length too: transactions
		 * that abort each other (no-wait, each upgrading a lock the
		 * other shares) and restart less than an attempt apart collide
		 * again, for ever if every attempt takes longer than a fixed
		 * cap (slow fabric round trips, a busy worker). */
		uint64_t grown = began ? (now - began) << (attempt < 7 ? attempt + 1 : 8) : 0;
		uint64_t window = backoff_ns > grown ? backoff_ns : grown;
		if (window > BACKOFF_MAX_NS)
			window = BACKOFF_MAX_NS;
		uint64_t sleep = window / 2 + rng_next(ccw) % (window / 2 + 1);
		if (sleep > deadline - now) /* the last attempt, at txn-timeout */
			sleep = deadline - now;
		sched_sleep(ccw->sched, sleep);
		began = sched_now_ns();
		if (backoff_ns < 1000000)
			backoff_ns *= 2;
	}
}

int cc_run(struct cc_worker *ccw, const struct cc_txn *tx)
{
	struct cc_ollp ollp = { 0 };
	int rc = run(ccw, tx, &ollp);
	for (int i = 0; i < ollp.n; i++)
		free((void *)ollp.keys[i].p);
	free(ollp.keys);
	return rc;
}
