/*
 * run.c: client threads, their connections and the measured phase
 * (run.h).
 *
 * A worker's connection holds a ring of pending stages, oldest first:
 * replies arrive in the order the commands were sent, so the reply at
 * hand always belongs to the ring's head. An operation has one stage
 * pending at a time (ycsb-f's read-modify-write sends its SET only when
 * its GET has answered), so a ring of --pipeline entries never overflows.
 *
 * Shared fields of struct run are written with GCC __atomic builtins
 * (phase: main thread, release; budget and next_batch: any worker;
 * failed/connected/finished: workers) and read the same way. A worker's
 * interval histogram is guarded by its mutex (the worker records, the
 * main thread drains it once a second); everything else in a worker is
 * the worker's own until it is joined.
 */
#include "bench/run.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/sds.h>

#include "bench/keys.h"
#include "bench/oltp.h"
#include "bench/rng.h"

enum { P_CONNECT, P_WARMUP, P_MEASURE, P_STOP };
enum { K_READ, K_UPDATE, K_INSERT, K_SCAN, K_RMW, K_TXN, K_MSET, K_SCRIPT, K_NKINDS };

#define POLL_MS 20          /* how soon a worker notices a phase change */
#define READ_CHUNK 65536
#define TICK_NS 1000000000ull /* progress once a second */

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
			       .tv_nsec = (long)(ns % 1000000000ull) };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

struct pending {
	uint64_t t0;       /* when the operation's first stage was sent, ns */
	uint64_t id;       /* record (ycsb-f: the key to write back; load: keys in batch) */
	uint32_t replies;  /* replies still due for this stage */
	uint8_t kind;      /* K_* */
	uint8_t stage;     /* ycsb-f read-modify-write: 0 GET, 1 SET */
	uint8_t measured;  /* operations/load mode: issued inside the measured phase */
	uint8_t error;     /* an error reply (not EXEC's) */
	uint8_t failed;    /* ycsb-t: EXEC answered null or an error */
	uint8_t eval;      /* K_SCRIPT: sent as EVAL after a NOSCRIPT */
};

struct wconn {
	redisContext *c;
	struct bench_addr *addr;
	struct pending *q;  /* ring of cap entries */
	struct bench_oltp_call *calls; /* K_SCRIPT: the call of q[i] in calls[i] */
	int cap, head, len;
	int outstanding;    /* operations in flight */
	struct bench_rng rng;
};

struct run;

struct worker {
	struct run *run;
	int index;
	pthread_t tid;
	int nconns;
	struct wconn *conns;
	struct pollfd *pfds;
	struct bench_zipf zipf;   /* own copy: ycsb-d/e grow it */
	char *value;              /* value_size bytes, stamped before each write */
	uint64_t stamp;
	const char **argv;
	size_t *argvlen;
	char (*keys)[BENCH_KEY_LEN + 1];
	uint64_t *ids;
	uint64_t batch;           /* load: the batch take() reserved */
	int exhausted;            /* no more operations to issue (operations/load mode) */
	char *rbuf;

	struct bench_hist *hist;  /* measured latencies */
	pthread_mutex_t lock;     /* guards ihist */
	struct bench_hist *ihist; /* since the last progress line */
	uint64_t done;            /* operations completed (atomic, for progress) */
	uint64_t done_keys;       /* load: keys written (atomic, for progress) */
	uint64_t m_ops, m_keys, m_errors, m_failed, m_kind[K_NKINDS];
	const struct bench_oltp_ops *oltp; /* the OLTP workload, or NULL */
	struct bench_oltp_stats ost;       /* its per-type counts */
	uint64_t last_ns;         /* completion of the last measured operation */
	char first_error[256];
	char errmsg[512];         /* fatal error, read by main after join */
};

struct run {
	const struct bench_config *cfg;
	struct bench_target *t;
	int phase;
	int64_t budget;           /* operations mode: measured operations left to issue */
	uint64_t next_batch;      /* load: next MSET batch */
	uint64_t nbatches;
	uint64_t window;          /* operations in flight at most (ycsb-d/e) */
	int failed, connected, finished;
	struct worker *w;
};

static void wfail(struct worker *w, const char *fmt, ...)
{
	va_list ap;

	if (w->errmsg[0])
		return;
	va_start(ap, fmt);
	vsnprintf(w->errmsg, sizeof(w->errmsg), fmt, ap);
	va_end(ap);
	__atomic_store_n(&w->run->failed, 1, __ATOMIC_RELEASE);
}

static struct pending *ring_push(struct wconn *wc)
{
	struct pending *p = &wc->q[(wc->head + wc->len) % wc->cap];
	wc->len++;
	memset(p, 0, sizeof(*p));
	return p;
}

/* May this worker issue one more operation? Sets *measured. */
static int take(struct worker *w, uint8_t *measured)
{
	struct run *run = w->run;
	const struct bench_config *cfg = run->cfg;
	int ph = __atomic_load_n(&run->phase, __ATOMIC_ACQUIRE);

	*measured = 0;
	if (ph == P_STOP || w->exhausted || __atomic_load_n(&run->failed, __ATOMIC_RELAXED))
		return 0;
	if (cfg->workload == BW_LOAD) {
		w->batch = __atomic_fetch_add(&run->next_batch, 1, __ATOMIC_RELAXED);
		if (w->batch >= run->nbatches) {
			w->exhausted = 1;
			return 0;
		}
		*measured = 1;
		return 1;
	}
	if (cfg->operations && ph == P_MEASURE) {
		if (__atomic_fetch_sub(&run->budget, 1, __ATOMIC_RELAXED) <= 0) {
			w->exhausted = 1;
			return 0;
		}
		*measured = 1;
	}
	return 1;
}

/* A fresh value: the first bytes carry a counter so that writes differ. */
static const char *stamp_value(struct worker *w)
{
	static const char hex[] = "0123456789abcdef";
	uint64_t x = ++w->stamp ^ ((uint64_t)w->index << 48);
	int n = w->run->cfg->value_size < 16 ? w->run->cfg->value_size : 16;

	for (int i = 0; i < n; i++, x >>= 4)
		w->value[i] = hex[x & 15];
	return w->value;
}

static void append2(struct wconn *wc, const char *cmd, const char *key)
{
	const char *argv[2] = { cmd, key };
	size_t len[2] = { strlen(cmd), BENCH_KEY_LEN };
	redisAppendCommandArgv(wc->c, 2, argv, len);
}

static void append_set(struct worker *w, struct wconn *wc, const char *key)
{
	const char *argv[3] = { "SET", key, stamp_value(w) };
	size_t len[3] = { 3, BENCH_KEY_LEN, (size_t)w->run->cfg->value_size };
	redisAppendCommandArgv(wc->c, 3, argv, len);
}

/* The number of records reads may pick from in ycsb-d/e: loaded plus
 * inserted, minus the inserts that may still be in flight. */
static uint64_t visible_records(struct worker *w)
{
	struct run *run = w->run;
	uint64_t top = __atomic_load_n(&run->t->next_insert, __ATOMIC_RELAXED);
	uint64_t recs = run->cfg->records;
	return top > recs + run->window ? top - run->window : recs;
}

static uint64_t insert_id(struct worker *w)
{
	return __atomic_fetch_add(&w->run->t->next_insert, 1, __ATOMIC_RELAXED);
}

static void issue(struct worker *w, struct wconn *wc, uint8_t measured)
{
	const struct bench_config *cfg = w->run->cfg;
	struct bench_target *t = w->run->t;
	struct pending *p = ring_push(wc);
	char key[BENCH_KEY_LEN + 1];
	double u;

	p->measured = measured;
	p->replies = 1;
	switch (cfg->workload) {
	case BW_LOAD: {
		uint64_t first = w->batch * (uint64_t)cfg->batch;
		uint64_t n = cfg->records - first < (uint64_t)cfg->batch ? cfg->records - first
									 : (uint64_t)cfg->batch;
		w->argv[0] = "MSET";
		w->argvlen[0] = 4;
		for (uint64_t i = 0; i < n; i++) {
			bench_key(w->keys[i], first + i);
			w->argv[1 + 2 * i] = w->keys[i];
			w->argvlen[1 + 2 * i] = BENCH_KEY_LEN;
			w->argv[2 + 2 * i] = cfg->balances ? BENCH_BANK_BALANCE : w->value;
			w->argvlen[2 + 2 * i] = cfg->balances ? strlen(BENCH_BANK_BALANCE)
							      : (size_t)cfg->value_size;
		}
		stamp_value(w);
		redisAppendCommandArgv(wc->c, (int)(1 + 2 * n), w->argv, w->argvlen);
		p->kind = K_MSET;
		p->id = n;
		break;
	}
	case BW_YCSB_T:
		bench_txn_keys(&t->ks, &wc->rng, t->nodes_per_txn, cfg->ops, w->ids, NULL);
		redisAppendCommand(wc->c, "MULTI");
		for (int i = 0; i < cfg->ops; i++) {
			bench_key(key, w->ids[i]);
			if (bench_rng_double(&wc->rng) < cfg->write_ratio)
				append_set(w, wc, key);
			else
				append2(wc, "GET", key);
		}
		redisAppendCommand(wc->c, "EXEC");
		p->kind = K_TXN;
		p->replies = (uint32_t)cfg->ops + 2;
		break;
	case BW_BANK: {
		/* a transfer: what leaves one account enters the other */
		char amount[8];
		bench_txn_keys(&t->ks, &wc->rng, t->nodes_per_txn, 2, w->ids, NULL);
		snprintf(amount, sizeof(amount), "%d",
			 1 + (int)bench_rng_below(&wc->rng, BENCH_BANK_MAX_AMOUNT));
		bench_key(key, w->ids[0]);
		redisAppendCommand(wc->c, "MULTI");
		redisAppendCommand(wc->c, "DECRBY %s %s", key, amount);
		bench_key(key, w->ids[1]);
		redisAppendCommand(wc->c, "INCRBY %s %s", key, amount);
		redisAppendCommand(wc->c, "EXEC");
		p->kind = K_TXN;
		p->replies = 4;
		break;
	}
	case BW_YCSB_A:
	case BW_YCSB_B:
	case BW_YCSB_C: {
		double reads = cfg->workload == BW_YCSB_A ? 0.5 : cfg->workload == BW_YCSB_B ? 0.95 : 1.0;
		bench_key(key, bench_zipf_next(&w->zipf, &wc->rng));
		if (bench_rng_double(&wc->rng) < reads) {
			append2(wc, "GET", key);
			p->kind = K_READ;
		} else {
			append_set(w, wc, key);
			p->kind = K_UPDATE;
		}
		break;
	}
	case BW_YCSB_D:
	case BW_YCSB_E:
		u = bench_rng_double(&wc->rng);
		if (u < 0.95) {
			uint64_t n = visible_records(w);
			bench_zipf_grow(&w->zipf, n);
			uint64_t rank = bench_zipf_next(&w->zipf, &wc->rng);
			if (cfg->workload == BW_YCSB_D) {
				/* "latest": rank 0 is the newest record */
				bench_key(key, n - 1 - rank);
				append2(wc, "GET", key);
				p->kind = K_READ;
			} else {
				/* a short run of the keyspace from a position drawn from
				 * the request distribution; neither server orders keys,
				 * so SCAN's cursor stands for the start key */
				char cur[24], cnt[24];
				snprintf(cur, sizeof(cur), "%llu", (unsigned long long)rank);
				snprintf(cnt, sizeof(cnt), "%llu",
					 1 + (unsigned long long)bench_rng_below(&wc->rng,
										 (uint64_t)cfg->scan_max));
				redisAppendCommand(wc->c, "SCAN %s COUNT %s", cur, cnt);
				p->kind = K_SCAN;
			}
		} else {
			bench_key(key, insert_id(w));
			append_set(w, wc, key);
			p->kind = K_INSERT;
		}
		break;
	case BW_SMALLBANK:
	case BW_TPCC:
	case BW_TATP: {
		/* the call lives in the slot of its pending entry, for NOSCRIPT */
		struct bench_oltp_call *call = &wc->calls[p - wc->q];
		bench_oltp_next(t, cfg, &wc->rng, call);
		bench_oltp_append(t, call, wc->c, false);
		p->kind = K_SCRIPT;
		break;
	}
	case BW_YCSB_F:
		p->id = bench_zipf_next(&w->zipf, &wc->rng);
		bench_key(key, p->id);
		append2(wc, "GET", key);
		p->kind = bench_rng_double(&wc->rng) < 0.5 ? K_READ : K_RMW;
		break;
	}
	wc->outstanding++;
	p->t0 = bench_now_ns();
}

static void top_up(struct worker *w, struct wconn *wc)
{
	int depth = w->run->cfg->workload == BW_LOAD ? w->run->cfg->load_pipeline
						     : w->run->cfg->pipeline;
	uint8_t measured;

	while (wc->outstanding < depth && take(w, &measured))
		issue(w, wc, measured);
}

static int flush(struct worker *w, struct wconn *wc)
{
	int done = 0;

	if (sdslen(wc->c->obuf) == 0)
		return 0;
	if (redisBufferWrite(wc->c, &done) != REDIS_OK) {
		wfail(w, "%s:%d: write: %s", wc->addr->host, wc->addr->port, wc->c->errstr);
		return -1;
	}
	return 0;
}

static void complete(struct worker *w, struct wconn *wc, const struct pending *p, uint64_t now)
{
	struct run *run = w->run;
	uint64_t lat = now - p->t0;
	int measured;

	wc->outstanding--;
	if (run->cfg->operations || run->cfg->workload == BW_LOAD)
		measured = p->measured;
	else
		measured = __atomic_load_n(&run->phase, __ATOMIC_ACQUIRE) == P_MEASURE;
	pthread_mutex_lock(&w->lock);
	bench_hist_record(w->ihist, lat);
	pthread_mutex_unlock(&w->lock);
	__atomic_add_fetch(&w->done, 1, __ATOMIC_RELAXED);
	if (p->kind == K_MSET)
		__atomic_add_fetch(&w->done_keys, p->id, __ATOMIC_RELAXED);
	if (!measured)
		return;
	if (p->kind == K_SCRIPT) {
		const struct bench_oltp_call *call = &wc->calls[p - wc->q];
		w->ost.txns[call->type]++;
		if (p->error)
			w->ost.errors[call->type]++;
		else if (p->failed)
			w->ost.user_aborts[call->type]++;
		else
			w->ost.commits[call->type]++;
		bench_hist_record(w->ost.hist[call->type], lat);
	}
	bench_hist_record(w->hist, lat);
	w->m_ops++;
	w->m_kind[p->kind]++;
	w->m_errors += p->error;
	w->m_failed += p->failed;
	if (p->kind == K_MSET)
		w->m_keys += p->id;
	w->last_ns = now;
}

static void complete(struct worker *w, struct wconn *wc, const struct pending *p, uint64_t now);

/*
 * A script's reply (oltp.h): a commit adds its delta in every phase (the
 * check sums them all); a NOSCRIPT reruns the same call as EVAL, as the
 * same operation; a user abort or an error did not commit.
 */
static int on_script_reply(struct worker *w, struct wconn *wc, const redisReply *r,
			   uint64_t now)
{
	struct pending *p = &wc->q[wc->head];
	const struct bench_oltp_call *call = &wc->calls[wc->head];
	int64_t delta;

	switch (bench_oltp_classify(r, &delta)) {
	case BO_NOSCRIPT:
		if (!p->eval) {
			struct pending done = *p;
			int from = wc->head;
			wc->head = (wc->head + 1) % wc->cap;
			wc->len--;
			struct pending *q = ring_push(wc);
			int to = (int)(q - wc->q);
			*q = done;
			q->eval = 1;
			if (to != from)
				wc->calls[to] = wc->calls[from];
			bench_oltp_append(w->run->t, &wc->calls[to], wc->c, true);
			w->ost.noscript++;
			return 0;
		}
		/* EVAL cannot answer NOSCRIPT: count it as the error it is */
		/* fall through */
	case BO_ERROR:
		if (!w->first_error[0])
			snprintf(w->first_error, sizeof(w->first_error), "%s", r->str);
		if (!w->ost.first_error[call->type][0])
			snprintf(w->ost.first_error[call->type], sizeof(w->ost.first_error[0]), "%s",
				 r->str);
		p->error = 1;
		break;
	case BO_USER_ABORT:
		p->failed = 1;
		break;
	case BO_COMMIT:
		if (w->oltp->delta_counts[call->type])
			w->ost.delta += delta;
		break;
	}
	/* complete() finds the call through the entry's slot: pop after it */
	complete(w, wc, p, now);
	wc->head = (wc->head + 1) % wc->cap;
	wc->len--;
	return 0;
}

static int on_reply(struct worker *w, struct wconn *wc, const redisReply *r, uint64_t now)
{
	struct pending *p;

	if (wc->len == 0) {
		wfail(w, "%s:%d: a reply nobody asked for", wc->addr->host, wc->addr->port);
		return -1;
	}
	p = &wc->q[wc->head];
	if (p->kind == K_SCRIPT)
		return on_script_reply(w, wc, r, now);
	p->replies--;
	if (r->type == REDIS_REPLY_ERROR) {
		if (!w->first_error[0])
			snprintf(w->first_error, sizeof(w->first_error), "%s", r->str);
		if (p->kind == K_MSET) {
			wfail(w, "%s:%d: MSET: %s", wc->addr->host, wc->addr->port, r->str);
			return -1;
		}
		if (p->kind == K_TXN && p->replies == 0)
			p->failed = 1;
		else
			p->error = 1;
	} else if (p->kind == K_TXN && p->replies == 0 && r->type != REDIS_REPLY_ARRAY) {
		p->failed = 1; /* EXEC's null array: the transaction did not run */
	}
	if (p->replies)
		return 0;
	struct pending done = *p;
	wc->head = (wc->head + 1) % wc->cap;
	wc->len--;
	if (done.kind == K_RMW && done.stage == 0 && !done.error) {
		/* the read has answered: now the write, same operation */
		struct pending *q = ring_push(wc);
		char key[BENCH_KEY_LEN + 1];
		*q = done;
		q->stage = 1;
		q->replies = 1;
		bench_key(key, done.id);
		append_set(w, wc, key);
		return 0;
	}
	complete(w, wc, &done, now);
	return 0;
}

static int read_replies(struct worker *w, struct wconn *wc)
{
	redisContext *c = wc->c;

	for (int i = 0; i < 8; i++) {
		ssize_t n = read(c->fd, w->rbuf, READ_CHUNK);
		if (n > 0) {
			if (redisReaderFeed(c->reader, w->rbuf, (size_t)n) != REDIS_OK) {
				wfail(w, "%s:%d: reader: %s", wc->addr->host, wc->addr->port,
				      c->reader->errstr);
				return -1;
			}
			if (n < READ_CHUNK)
				break;
			continue;
		}
		if (n == 0) {
			wfail(w, "%s:%d: the server closed the connection", wc->addr->host,
			      wc->addr->port);
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		wfail(w, "%s:%d: read: %s", wc->addr->host, wc->addr->port, strerror(errno));
		return -1;
	}
	uint64_t now = bench_now_ns();
	for (;;) {
		void *reply = NULL;
		if (redisReaderGetReply(c->reader, &reply) != REDIS_OK) {
			wfail(w, "%s:%d: protocol error: %s", wc->addr->host, wc->addr->port,
			      c->reader->errstr);
			return -1;
		}
		if (!reply)
			return 0;
		int rc = on_reply(w, wc, reply, now);
		freeReplyObject(reply);
		if (rc)
			return -1;
	}
}

static int worker_connect(struct worker *w)
{
	const struct bench_config *cfg = w->run->cfg;
	struct bench_target *t = w->run->t;
	int depth = cfg->workload == BW_LOAD ? cfg->load_pipeline : cfg->pipeline;
	char why[512];

	for (int i = 0; i < w->nconns; i++) {
		struct wconn *wc = &w->conns[i];
		int k = (w->index * cfg->clients + i) % t->naddrs;

		wc->addr = &t->addrs[k];
		wc->cap = depth;
		wc->q = calloc((size_t)depth, sizeof(struct pending));
		if (w->oltp)
			wc->calls = calloc((size_t)depth, sizeof(struct bench_oltp_call));
		if (!wc->q || (w->oltp && !wc->calls)) {
			wfail(w, "out of memory");
			return -1;
		}
		bench_rng_seed(&wc->rng, cfg->seed, ((uint64_t)w->index << 32) | (uint64_t)i);
		wc->c = rckv_connect(wc->addr->host, wc->addr->port, cfg->timeout_ms, why,
				     sizeof(why));
		if (!wc->c) {
			wfail(w, "%s", why);
			return -1;
		}
		/* non-blocking from here: poll() decides when to read and write;
		 * hiredis treats EAGAIN as "later" only without REDIS_BLOCK */
		int fl = fcntl(wc->c->fd, F_GETFL);
		if (fl < 0 || fcntl(wc->c->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
			wfail(w, "fcntl: %s", strerror(errno));
			return -1;
		}
		wc->c->flags &= ~REDIS_BLOCK;
		w->pfds[i].fd = wc->c->fd;
	}
	return 0;
}

#define DRAIN_NS (10ull * 1000 * 1000 * 1000) /* replies awaited after the stop */

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct run *run = w->run;

	if (worker_connect(w))
		goto out;
	__atomic_add_fetch(&run->connected, 1, __ATOMIC_RELEASE);
	while (__atomic_load_n(&run->phase, __ATOMIC_ACQUIRE) == P_CONNECT)
		sleep_ns(1000000);
	uint64_t drain_until = 0;
	for (;;) {
		int busy = 0;

		if (__atomic_load_n(&run->failed, __ATOMIC_ACQUIRE))
			break;
		/* Stopped: what is in flight is answered before the connections
		 * close, so nothing of this run still executes on the server
		 * afterwards (bank sums the balances then). */
		bool stopping = __atomic_load_n(&run->phase, __ATOMIC_ACQUIRE) == P_STOP;
		if (stopping && !drain_until)
			drain_until = bench_now_ns() + DRAIN_NS;
		for (int i = 0; i < w->nconns; i++) {
			struct wconn *wc = &w->conns[i];
			top_up(w, wc);
			busy |= wc->outstanding > 0;
			if (flush(w, wc))
				goto out;
			w->pfds[i].events = (short)(POLLIN | (sdslen(wc->c->obuf) ? POLLOUT : 0));
			w->pfds[i].revents = 0;
		}
		if (!busy && (w->exhausted || stopping))
			break; /* operations or load mode, or stopped: all done */
		if (stopping && bench_now_ns() > drain_until) {
			wfail(w, "%d connections still waited for replies %.0f s after the run "
			      "stopped", w->nconns, DRAIN_NS / 1e9);
			break;
		}
		int n = poll(w->pfds, (nfds_t)w->nconns, POLL_MS);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			wfail(w, "poll: %s", strerror(errno));
			goto out;
		}
		for (int i = 0; i < w->nconns && n > 0; i++) {
			struct wconn *wc = &w->conns[i];
			short re = w->pfds[i].revents;
			if (!re)
				continue;
			if (re & (POLLIN | POLLERR | POLLHUP)) {
				if (read_replies(w, wc))
					goto out;
			}
			if ((re & POLLOUT) && flush(w, wc))
				goto out;
		}
	}
out:
	__atomic_add_fetch(&run->finished, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void worker_free(struct worker *w)
{
	for (int i = 0; w->conns && i < w->nconns; i++) {
		if (w->conns[i].c)
			redisFree(w->conns[i].c);
		free(w->conns[i].q);
		free(w->conns[i].calls);
	}
	bench_oltp_stats_free(&w->ost);
	free(w->conns);
	free(w->pfds);
	free(w->value);
	free(w->argv);
	free(w->argvlen);
	free(w->keys);
	free(w->ids);
	free(w->rbuf);
	free(w->hist);
	free(w->ihist);
	pthread_mutex_destroy(&w->lock);
}

static int worker_init(struct worker *w, struct run *run, int index)
{
	const struct bench_config *cfg = run->cfg;
	struct bench_rng vr;
	size_t nargs = (size_t)(1 + 2 * cfg->batch);

	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->lock, NULL);
	w->run = run;
	w->index = index;
	w->nconns = cfg->clients;
	w->conns = calloc((size_t)w->nconns, sizeof(*w->conns));
	w->pfds = calloc((size_t)w->nconns, sizeof(*w->pfds));
	w->value = malloc((size_t)cfg->value_size);
	w->argv = calloc(nargs, sizeof(*w->argv));
	w->argvlen = calloc(nargs, sizeof(*w->argvlen));
	w->keys = calloc((size_t)cfg->batch, sizeof(*w->keys));
	w->ids = calloc(BENCH_TXN_MAX_OPS, sizeof(*w->ids));
	w->rbuf = malloc(READ_CHUNK);
	w->hist = bench_hist_new();
	w->ihist = bench_hist_new();
	if (!w->conns || !w->pfds || !w->value || !w->argv || !w->argvlen || !w->keys || !w->ids ||
	    !w->rbuf || !w->hist || !w->ihist)
		return -1;
	/* printable, seeded: the same bytes under the same --seed */
	bench_rng_seed(&vr, cfg->seed, 0xfa1000u + (uint64_t)index);
	for (int i = 0; i < cfg->value_size; i++)
		w->value[i] = (char)('a' + bench_rng_below(&vr, 26));
	w->oltp = bench_oltp_of(cfg);
	if (w->oltp && bench_oltp_stats_init(&w->ost, w->oltp->ntypes))
		return -1;
	if (cfg->workload != BW_LOAD && !bench_config_is_txn(cfg) && !w->oltp)
		w->zipf = run->t->zipf;
	return 0;
}

/* Sum the workers' completions and drain their interval histograms. */
static uint64_t gather(struct run *run, struct bench_hist *into, uint64_t *keys)
{
	uint64_t done = 0;

	*keys = 0;
	for (int i = 0; i < run->cfg->threads; i++) {
		struct worker *w = &run->w[i];
		done += __atomic_load_n(&w->done, __ATOMIC_RELAXED);
		*keys += __atomic_load_n(&w->done_keys, __ATOMIC_RELAXED);
		pthread_mutex_lock(&w->lock);
		bench_hist_merge(into, w->ihist);
		bench_hist_reset(w->ihist);
		pthread_mutex_unlock(&w->lock);
	}
	return done;
}

struct progress {
	bool on, tty, printed;
	uint64_t last_ns, last_done, last_keys;
	bool have_info;
	struct bench_info last_info;
	struct bench_hist *h;
};

static void progress_tick(struct run *run, struct progress *pg, const char *label, uint64_t start,
			  uint64_t now)
{
	const struct bench_config *cfg = run->cfg;
	uint64_t keys, done = gather(run, pg->h, &keys);
	double dt = (double)(now - pg->last_ns) / 1e9;
	double rate = dt > 0 ? (double)(done - pg->last_done) / dt : 0;
	int ph = __atomic_load_n(&run->phase, __ATOMIC_RELAXED);
	char line[320], ab[48] = "";

	if (!pg->on)
		goto reset;
	if (cfg->workload == BW_LOAD) {
		double krate = dt > 0 ? (double)(keys - pg->last_keys) / dt : 0;
		snprintf(line, sizeof(line),
			 "%s %6.1fs  load  %llu/%llu keys (%.0f%%)  %.0f keys/s  MSET p50 %.1f us  p99 %.1f us",
			 label, (double)(now - start) / 1e9, (unsigned long long)keys,
			 (unsigned long long)cfg->records, 100.0 * (double)keys / (double)cfg->records,
			 krate, bench_hist_percentile(pg->h, 50) / 1e3,
			 bench_hist_percentile(pg->h, 99) / 1e3);
	} else {
		if (run->t->is_rckv) {
			struct bench_info now_info, d;
			char why[256];
			if (bench_target_snapshot(run->t, &now_info, why, sizeof(why)) == 0) {
				if (pg->have_info) {
					bench_info_delta(&pg->last_info, &now_info, &d);
					uint64_t att = d.txn_committed + d.txn_aborts;
					if (d.has_txn)
						snprintf(ab, sizeof(ab), "  aborts %5.2f%%",
							 att ? 100.0 * (double)d.txn_aborts / (double)att
							     : 0.0);
				}
				pg->last_info = now_info;
				pg->have_info = true;
			}
		}
		if (!ab[0])
			snprintf(ab, sizeof(ab), "  aborts     -");
		snprintf(line, sizeof(line), "%s %6.1fs  %-7s %9.0f %s/s  p50 %8.1f us  p99 %8.1f us%s",
			 label, (double)(now - start) / 1e9, ph == P_WARMUP ? "warmup" : "run", rate,
			 bench_config_is_txn(cfg) || bench_config_is_oltp(cfg) ? "txn" : "ops",
			 bench_hist_percentile(pg->h, 50) / 1e3,
			 bench_hist_percentile(pg->h, 99) / 1e3, ab);
	}
	if (pg->tty)
		fprintf(stderr, "\r%s\033[K", line);
	else
		fprintf(stderr, "%s\n", line);
	fflush(stderr);
	pg->printed = true;
reset:
	bench_hist_reset(pg->h);
	pg->last_ns = now;
	pg->last_done = done;
	pg->last_keys = keys;
}

void bench_result_free(struct bench_result *r)
{
	bench_oltp_stats_free(&r->oltp);
	free(r->hist);
	memset(r, 0, sizeof(*r));
}

int bench_result_init(struct bench_result *r)
{
	memset(r, 0, sizeof(*r));
	r->hist = bench_hist_new();
	return r->hist ? 0 : -ENOMEM;
}

void bench_result_merge(struct bench_result *dst, const struct bench_result *src)
{
	dst->seconds += src->seconds;
	dst->ops += src->ops;
	dst->keys += src->keys;
	dst->errors += src->errors;
	dst->failed += src->failed;
	dst->reads += src->reads;
	dst->updates += src->updates;
	dst->inserts += src->inserts;
	dst->scans += src->scans;
	dst->rmws += src->rmws;
	dst->scripts += src->scripts;
	dst->user_aborts += src->user_aborts;
	bench_oltp_stats_merge(&dst->oltp, &src->oltp);
	if (!dst->first_error[0])
		memcpy(dst->first_error, src->first_error, sizeof(dst->first_error));
	bench_hist_merge(dst->hist, src->hist);
	if (src->have_info) {
		bench_info_add(&dst->info, &src->info, !dst->have_info);
		dst->have_info = true;
	}
	dst->runs += src->runs;
}

int bench_run(const struct bench_config *cfg, struct bench_target *t, struct bench_result *res,
	      const char *label, char *err, size_t errlen)
{
	struct run run = { .cfg = cfg, .t = t, .phase = P_CONNECT };
	struct progress pg = { 0 };
	struct bench_info info0, info1;
	uint64_t start, t0 = 0, t1 = 0, deadline;
	int started = 0, rc = -1;

	run.nbatches = (cfg->records + (uint64_t)cfg->batch - 1) / (uint64_t)cfg->batch;
	run.window = (uint64_t)cfg->threads * (uint64_t)cfg->clients * (uint64_t)cfg->pipeline;
	run.w = calloc((size_t)cfg->threads, sizeof(*run.w));
	pg.h = bench_hist_new();
	if (!run.w || !pg.h) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (int i = 0; i < cfg->threads; i++) {
		if (worker_init(&run.w[i], &run, i)) {
			worker_free(&run.w[i]);
			snprintf(err, errlen, "out of memory");
			goto stop;
		}
		if (pthread_create(&run.w[i].tid, NULL, worker_main, &run.w[i])) {
			worker_free(&run.w[i]);
			snprintf(err, errlen, "cannot start a thread");
			goto stop;
		}
		started++;
	}
	/* every connection up (or a failure), within the connect timeout */
	deadline = bench_now_ns() + (uint64_t)cfg->timeout_ms * 1000000ull * 2;
	while (__atomic_load_n(&run.connected, __ATOMIC_ACQUIRE) < cfg->threads &&
	       !__atomic_load_n(&run.failed, __ATOMIC_ACQUIRE)) {
		if (bench_now_ns() > deadline) {
			snprintf(err, errlen, "%s: connections not up within the timeout", t->name);
			goto stop;
		}
		sleep_ns(2000000);
	}
	if (__atomic_load_n(&run.failed, __ATOMIC_ACQUIRE))
		goto stop;

	pg.on = !cfg->quiet;
	pg.tty = isatty(STDERR_FILENO);
	if (pg.on && t->is_rckv && cfg->workload != BW_LOAD &&
	    bench_target_snapshot(t, &pg.last_info, err, errlen) == 0)
		pg.have_info = true;
	start = bench_now_ns();
	pg.last_ns = start;
	if (cfg->warmup > 0 && cfg->workload != BW_LOAD) {
		__atomic_store_n(&run.phase, P_WARMUP, __ATOMIC_RELEASE);
	} else {
		if (bench_target_snapshot(t, &info0, err, errlen))
			goto stop;
		t0 = bench_now_ns();
		run.budget = (int64_t)cfg->operations;
		__atomic_store_n(&run.phase, P_MEASURE, __ATOMIC_RELEASE);
	}
	uint64_t next_tick = start + TICK_NS;
	for (;;) {
		uint64_t now = bench_now_ns();
		int ph = __atomic_load_n(&run.phase, __ATOMIC_RELAXED);

		if (__atomic_load_n(&run.failed, __ATOMIC_ACQUIRE))
			goto stop;
		if (ph == P_WARMUP && now >= start + (uint64_t)(cfg->warmup * 1e9)) {
			if (bench_target_snapshot(t, &info0, err, errlen))
				goto stop;
			t0 = bench_now_ns();
			run.budget = (int64_t)cfg->operations;
			__atomic_store_n(&run.phase, P_MEASURE, __ATOMIC_RELEASE);
			continue;
		}
		if (ph == P_MEASURE && !cfg->operations && cfg->workload != BW_LOAD &&
		    now >= t0 + (uint64_t)(cfg->duration * 1e9)) {
			if (bench_target_snapshot(t, &info1, err, errlen))
				goto stop;
			t1 = bench_now_ns();
			__atomic_store_n(&run.phase, P_STOP, __ATOMIC_RELEASE);
			break;
		}
		if (ph == P_MEASURE && __atomic_load_n(&run.finished, __ATOMIC_ACQUIRE) == cfg->threads) {
			/* operations or load mode: every worker drained */
			if (bench_target_snapshot(t, &info1, err, errlen))
				goto stop;
			t1 = 0;
			break;
		}
		if (now >= next_tick) {
			progress_tick(&run, &pg, label, start, now);
			next_tick += TICK_NS;
			if (next_tick < now)
				next_tick = now + TICK_NS;
			continue;
		}
		uint64_t wake = next_tick;
		if (ph == P_WARMUP)
			wake = start + (uint64_t)(cfg->warmup * 1e9);
		else if (ph == P_MEASURE && !cfg->operations && cfg->workload != BW_LOAD)
			wake = t0 + (uint64_t)(cfg->duration * 1e9);
		if (wake > next_tick)
			wake = next_tick;
		uint64_t nap = wake > now ? wake - now : 0;
		if (nap > 50000000ull)
			nap = 50000000ull; /* notice finished workers and failures */
		sleep_ns(nap ? nap : 100000);
	}
	/* A run shorter than a tick, or whose tick came late (a busy host),
	 * still shows one line. */
	if (!pg.printed)
		progress_tick(&run, &pg, label, start, bench_now_ns());
	rc = 0;
stop:
	__atomic_store_n(&run.phase, P_STOP, __ATOMIC_RELEASE);
	for (int i = 0; i < started; i++)
		pthread_join(run.w[i].tid, NULL);
	if (pg.printed && pg.tty)
		fputc('\n', stderr);
	/* a worker's failure is the cause of whatever the main thread saw */
	for (int i = 0; i < started; i++) {
		if (run.w[i].errmsg[0]) {
			snprintf(err, errlen, "%s", run.w[i].errmsg);
			rc = -1;
			break;
		}
	}
	if (rc == 0) {
		struct bench_result r;
		if (bench_result_init(&r)) {
			snprintf(err, errlen, "out of memory");
			rc = -1;
			goto done;
		}
		uint64_t last = 0;
		for (int i = 0; i < started; i++) {
			struct worker *w = &run.w[i];
			bench_hist_merge(r.hist, w->hist);
			r.ops += w->m_ops;
			r.keys += w->m_keys;
			r.errors += w->m_errors;
			r.failed += w->m_failed;
			r.reads += w->m_kind[K_READ];
			r.updates += w->m_kind[K_UPDATE];
			r.inserts += w->m_kind[K_INSERT];
			r.scans += w->m_kind[K_SCAN];
			r.rmws += w->m_kind[K_RMW];
			r.scripts += w->m_kind[K_SCRIPT];
			if (w->oltp && bench_oltp_stats_merge(&r.oltp, &w->ost)) {
				snprintf(err, errlen, "out of memory");
				rc = -1;
			}
			for (int k = 0; w->oltp && k < w->oltp->ntypes; k++)
				r.user_aborts += w->ost.user_aborts[k];
			if (!r.first_error[0] && w->first_error[0])
				snprintf(r.first_error, sizeof(r.first_error), "%s", w->first_error);
			if (w->last_ns > last)
				last = w->last_ns;
		}
		if (!t1)
			t1 = last > t0 ? last : bench_now_ns();
		r.seconds = (double)(t1 - t0) / 1e9;
		bench_info_delta(&info0, &info1, &r.info);
		r.have_info = true;
		r.runs = 1;
		bench_result_merge(res, &r);
		bench_result_free(&r);
	}
done:
	for (int i = 0; i < started; i++)
		worker_free(&run.w[i]);
out:
	free(run.w);
	free(pg.h);
	return rc;
}
