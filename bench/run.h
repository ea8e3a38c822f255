/*
 * run.h: one measured run of a workload against a target.
 *
 * --threads client threads each own --clients connections, and keep
 * --pipeline operations in flight on each (an operation is one command,
 * one MULTI/EXEC transaction for ycsb-t, a GET then a SET for ycsb-f's
 * read-modify-write, or one MSET batch when loading). A thread drives its
 * connections with poll() over non-blocking sockets, hiredis formatting
 * the commands and parsing the replies; a new operation is issued as soon
 * as one completes (a closed loop). Latency runs from the moment an
 * operation's commands are queued on its connection (they are written in
 * the same pass of the loop) to the moment its last reply is read.
 *
 * Phases: warm-up (--warmup seconds, nothing recorded), then measured
 * (--duration seconds, or until --operations operations have completed),
 * then stop. INFO snapshots of every node frame the measured phase.
 * Once a second the main thread prints a progress line (a live line on a
 * terminal, plain lines otherwise) from per-thread interval histograms.
 *
 * Determinism: each connection draws its keys from its own random stream,
 * seeded by --seed and its (thread, connection) number, so each
 * connection's sequence of keys repeats under the same seed; how
 * connections interleave (and ycsb-d/e's insert ids, taken from a shared
 * counter) depends on timing.
 *
 * Threads: bench_run is called by the main thread; it starts and joins
 * the workers itself.
 */
#ifndef RCKV_BENCH_RUN_H
#define RCKV_BENCH_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "bench/config.h"
#include "bench/hist.h"
#include "bench/info.h"
#include "bench/oltp.h"
#include "bench/target.h"

struct bench_result {
	double seconds;        /* measured wall time */
	uint64_t ops;          /* measured operations (transactions, MSET batches) */
	uint64_t keys;         /* load: keys written */
	uint64_t errors;       /* operations that got an error reply */
	uint64_t failed;       /* ycsb-t: EXEC answered null or an error */
	uint64_t reads, updates, inserts, scans, rmws; /* operations by kind */
	uint64_t scripts;      /* OLTP transactions (scripts) */
	uint64_t user_aborts;  /* OLTP: transactions that rolled themselves back */
	struct bench_oltp_stats oltp; /* OLTP: per transaction type, and the delta */
	char first_error[256]; /* the first error reply seen, for the user */
	struct bench_hist *hist; /* measured latencies, ns */
	bool have_info;        /* INFO deltas below are valid */
	struct bench_info info; /* server deltas over the measured phase, summed */
	int runs;              /* runs merged into this result */
};

/* Returns 0, or -ENOMEM. */
int bench_result_init(struct bench_result *r);
void bench_result_free(struct bench_result *r);
/* dst += src (seconds, counts, histogram, INFO deltas). */
void bench_result_merge(struct bench_result *dst, const struct bench_result *src);

/*
 * bench_run - run cfg's workload (cfg->workload; BW_LOAD loads
 * cfg->records keys) against t, prepared with bench_target_prepare, and
 * fill res (initialised by the caller). label prefixes the progress line.
 * Returns 0, or -1 with err filled: a connection failed or broke, a load
 * MSET got an error reply, or INFO failed.
 */
int bench_run(const struct bench_config *cfg, struct bench_target *t, struct bench_result *res,
	      const char *label, char *err, size_t errlen);

/* Monotonic clock in nanoseconds. */
uint64_t bench_now_ns(void);

#endif
