/*
 * oltp.h: the OLTP workloads of the papers (SmallBank, TPC-C, TATP) as
 * plain Redis Lua scripts, the same text for rckv and redis-server.
 *
 * A workload is a table of transaction types, each a Lua script with its
 * share of the mix, and five functions: setup (per target: where rows
 * go), load (the initial database), next (one transaction's KEYS and
 * ARGV), and the consistency check around a point's runs (check_begin
 * before, check_end after). smallbank.c, tpcc.c and tatp.c each define
 * one; their file comments give the row layouts.
 *
 * Calling a script: SCRIPT LOAD on every node when the target is
 * prepared, then EVALSHA; a NOSCRIPT reply (a node restarted, SCRIPT
 * FLUSH) reruns the same call as EVAL with the script's text (run.c).
 * KEYS hold what a transaction knows before it runs; keys computed
 * inside (TPC-C's new order id) are reached undeclared, which rckv
 * serves with another fetch round.
 *
 * What a script replies (every script keeps to it):
 *  - an integer: the transaction committed; the integer is its delta
 *    (SmallBank: money added to the bank; TPC-C Payment: the amount paid;
 *    TATP: call-forwarding rows added), 0 when it has none;
 *  - an error starting with BENCH_OLTP_USER_ABORT: the transaction
 *    rolled itself back (SendPayment without funds, TPC-C's unused item,
 *    TATP's missing row), as the benchmarks specify. It returns before its
 *    first write, so redis-server, which keeps a script's partial writes,
 *    and rckv, which keeps none, agree;
 *  - any other error: the transaction did not commit (counted as an
 *    error, the first one shown).
 * The check of a workload that has one relates the database before and
 * after to the sum of the committed deltas, counted over every phase of
 * the run (warm-up and drain included). A connection lost in a run makes
 * it inconclusive (its transactions in flight may or may not have
 * committed), and rckv-bench says so.
 *
 * Threads: setup, load, the checks and the reports run on the main
 * thread; next and the append/classify helpers on the workers, reading
 * the per-target state, which is read-only during a run.
 */
#ifndef RCKV_BENCH_OLTP_H
#define RCKV_BENCH_OLTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <hiredis/hiredis.h>

#include "bench/config.h"
#include "bench/hist.h"
#include "bench/json.h"
#include "bench/rng.h"
#include "client/rckv.h"

#define BENCH_OLTP_MAX_TYPES 8
#define BENCH_OLTP_MAX_KEYS 48
#define BENCH_OLTP_MAX_ARGS 64
#define BENCH_OLTP_BUF 4096 /* bytes of KEYS and ARGV text per call */
#define BENCH_OLTP_USER_ABORT "USERABORT"

/* One transaction's call: its type and its KEYS and ARGV, kept until the
 * reply so that a NOSCRIPT can rerun it as EVAL. */
struct bench_oltp_call {
	int type;
	int nkeys, nargs;
	uint16_t koff[BENCH_OLTP_MAX_KEYS], klen[BENCH_OLTP_MAX_KEYS];
	uint16_t aoff[BENCH_OLTP_MAX_ARGS], alen[BENCH_OLTP_MAX_ARGS];
	int used;
	char buf[BENCH_OLTP_BUF];
};

/* Append a KEYS or an ARGV entry, printf-style. Overflowing the call's
 * limits is a bug in the workload: it aborts with a message. */
void bench_oltp_key(struct bench_oltp_call *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void bench_oltp_arg(struct bench_oltp_call *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Pipelined MSETs for loading: put() queues a key and its value, sends
 * full batches and keeps a few in flight. */
struct bench_oltp_loader;
int bench_oltp_put(struct bench_oltp_loader *l, const char *key, const char *val);
/* put() with a printf-formatted key. */
int bench_oltp_putf(struct bench_oltp_loader *l, const char *val, const char *keyfmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Read helpers for the checks, on a blocking connection. */
/* MGET of n keys (split in pipelined batches); vals[i] gets a malloc'd
 * copy of the value or NULL for an absent key. Returns 0 or -1 with err. */
int bench_oltp_mget(redisContext *c, char **keys, size_t n, char **vals, char *err,
		    size_t errlen);
void bench_oltp_free_vals(char **vals, size_t n);

/* n keys named by name(st, i, buf, cap) (at most BENCH_OLTP_KEY_MAX bytes
 * each), read with bench_oltp_mget: what a check sums or counts. */
#define BENCH_OLTP_KEY_MAX 64
struct bench_oltp_read {
	size_t n;
	char **keys, **vals;            /* vals[i]: the value, or NULL if absent */
};
int bench_oltp_read_named(redisContext *c, size_t n,
			  void (*name)(const void *st, size_t i, char *buf, size_t cap),
			  const void *st, struct bench_oltp_read *rd, char *err, size_t errlen);
void bench_oltp_read_free(struct bench_oltp_read *rd);

struct bench_oltp_ops {
	const char *name;
	int ntypes;
	const char *const *type_names;
	const int *mix;                 /* percent per type; they sum to 100 */
	const char *const *scripts;     /* Lua text per type */
	const bool *delta_counts;       /* whose replies the check sums */
	size_t state_size;              /* the per-target state below */
	/* Where rows go on this target (map), and what the loaded database
	 * is: sig gets a line that differs when another load is needed. */
	int (*setup)(void *st, const struct bench_config *cfg, const struct rckv_map *map,
		     char *sig, size_t siglen, char *err, size_t errlen);
	int (*load)(void *st, const struct bench_config *cfg, struct bench_oltp_loader *l,
		    char *err, size_t errlen);
	/* Fill call (type already chosen) from rng; now is the Unix time. */
	void (*next)(const void *st, const struct bench_config *cfg, struct bench_rng *rng,
		     long now, struct bench_oltp_call *call);
	/* NULL when the workload has no check. begin returns a base figure;
	 * end prints its findings to out and returns 0 (passed), 1 (failed)
	 * or -1 with err (could not check). */
	const char *check_desc;
	int (*check_begin)(void *st, const struct bench_config *cfg, redisContext *c,
			   int64_t *base, char *err, size_t errlen);
	int (*check_end)(void *st, const struct bench_config *cfg, redisContext *c, int64_t base,
			 int64_t delta, FILE *out, char *err, size_t errlen);
};

extern const struct bench_oltp_ops bench_smallbank, bench_tpcc, bench_tatp;

/* The workload of cfg, or NULL when it is not an OLTP workload. */
const struct bench_oltp_ops *bench_oltp_of(const struct bench_config *cfg);

/* What a worker counts, per transaction type; merged into the result. */
struct bench_oltp_stats {
	uint64_t txns[BENCH_OLTP_MAX_TYPES];        /* measured, replied */
	uint64_t commits[BENCH_OLTP_MAX_TYPES];
	uint64_t user_aborts[BENCH_OLTP_MAX_TYPES];
	uint64_t errors[BENCH_OLTP_MAX_TYPES];
	struct bench_hist *hist[BENCH_OLTP_MAX_TYPES]; /* measured latency, ns */
	char first_error[BENCH_OLTP_MAX_TYPES][128];   /* the type's first error reply */
	int64_t delta;     /* committed deltas of every phase (see above) */
	uint64_t noscript; /* EVALSHA answered NOSCRIPT: rerun as EVAL */
};

/* Returns 0 or -ENOMEM; free with bench_oltp_stats_free. */
int bench_oltp_stats_init(struct bench_oltp_stats *s, int ntypes);
void bench_oltp_stats_free(struct bench_oltp_stats *s);
/* dst += src; allocates dst's histograms the first time. Returns 0 or
 * -ENOMEM. */
int bench_oltp_stats_merge(struct bench_oltp_stats *dst, const struct bench_oltp_stats *src);

struct bench_target;

/*
 * bench_oltp_prepare - set up t for cfg's OLTP workload: the workload's
 * placement on t's map, then SCRIPT LOAD of every script on every node.
 * Returns 0, or -1 with err filled (a server without scripting says so
 * here).
 */
int bench_oltp_prepare(struct bench_target *t, const struct bench_config *cfg, char *err,
		       size_t errlen);
void bench_oltp_free(struct bench_target *t);

/* Whether t holds this workload's database as cfg would load it (a
 * marker key written after a complete load). Returns 1, 0 or -1. */
int bench_oltp_loaded(struct bench_target *t, const struct bench_config *cfg, char *err,
		      size_t errlen);

/* FLUSHALL, then load the workload's database and the marker. Returns 0
 * or -1 with err filled. */
int bench_oltp_load(struct bench_target *t, const struct bench_config *cfg, char *err,
		    size_t errlen);

/* Draw the next transaction into call: its type by the mix, then its
 * inputs. */
void bench_oltp_next(const struct bench_target *t, const struct bench_config *cfg,
		     struct bench_rng *rng, struct bench_oltp_call *call);

/* Queue call on c: EVALSHA, or EVAL with the text when eval is set. */
void bench_oltp_append(const struct bench_target *t, const struct bench_oltp_call *call,
		       redisContext *c, bool eval);

enum bench_oltp_outcome { BO_COMMIT, BO_USER_ABORT, BO_ERROR, BO_NOSCRIPT };

/* What a reply says (see above); *delta gets a commit's integer. */
enum bench_oltp_outcome bench_oltp_classify(const redisReply *r, int64_t *delta);

/*
 * The check around a point: begin before its runs (the base figure is
 * kept in t), end after them with the summed deltas of the runs' results.
 * end prints one line per finding to out; returns 0 (passed or no check),
 * 1 (failed) or -1 with err (could not check).
 */
int bench_oltp_check_begin(struct bench_target *t, const struct bench_config *cfg, char *err,
			   size_t errlen);
int bench_oltp_check_end(struct bench_target *t, const struct bench_config *cfg,
			 const struct bench_oltp_stats *s, FILE *out, char *err, size_t errlen);

/* Per transaction type: share, counts and latency, for one or two
 * targets. */
void bench_oltp_report_table(FILE *out, const struct bench_oltp_ops *ops, const char *tag,
			     const struct bench_oltp_stats *s, double seconds);
void bench_oltp_report_json(struct bench_json *j, const struct bench_oltp_ops *ops,
			    const struct bench_oltp_stats *s, double seconds);

#endif
