/*
 * info.h: the server-side figures of a run, from INFO.
 *
 * rckv counts transactions, CC aborts and retries (section stats) and the
 * fabric's verbs and round trips (section fabric); Redis has neither, and
 * both have used_cpu_* (section cpu). A run takes a snapshot of every node
 * before and after its measured period and reports the difference, summed
 * over the nodes; per-transaction ratios are taken from the summed deltas
 * (the cumulative cc_*_per_txn ratios of INFO cc would mix in whatever ran
 * before).
 *
 * Threads: plain data; bench_info_fetch uses the caller's connection.
 */
#ifndef RCKV_BENCH_INFO_H
#define RCKV_BENCH_INFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

/* rckv's stages (INFO cc_stage_<stage>, cc/txn.h enum cc_stage), in order. */
#define BENCH_STAGES 6
extern const char *const bench_stage_names[BENCH_STAGES];

struct bench_info {
	bool has_txn;    /* txn_committed and friends were present (rckv) */
	bool has_stages; /* every cc_stage_<stage> line was present (rckv) */
	bool has_fabric; /* fabric_* were present (rckv) */
	bool has_cpu;    /* used_cpu_sys and used_cpu_user were present */
	uint64_t txn_committed, txn_aborts, txn_retries, txn_timeouts;
	uint64_t fab_txns, fab_reads, fab_writes, fab_cas, fab_faa, fab_round_trips, fab_rpcs;
	/* By stage, the current protocol's: time in its round trips (us),
	 * one-sided verbs, RPCs (INFO cc_stage_<stage>'s usec, verbs, rpcs) */
	uint64_t stage_usec[BENCH_STAGES], stage_verbs[BENCH_STAGES], stage_rpcs[BENCH_STAGES];
	char stages[96];    /* cc_stages: what went by RPC, "" for Redis */
	uint64_t commands;  /* total_commands_processed */
	double cpu_s;       /* used_cpu_sys + used_cpu_user, seconds */
	long pid;           /* process_id (0 if absent) */
	char version[32];   /* redis_version */
	char server[32];    /* server_name ("rckv"), "" for Redis */
	char cc[32];        /* cc_protocol, "" for Redis */
};

/* Parse the text of an INFO reply ("name:value" lines, '#' headers).
 * Fields not present keep zero and their has_* flag false. */
void bench_info_parse(const char *text, size_t len, struct bench_info *out);

/*
 * bench_info_fetch - INFO server stats cpu cc fabric on c, parsed.
 * Returns 0, or -1 with err filled (I/O error or error reply).
 */
int bench_info_fetch(redisContext *c, struct bench_info *out, char *err, size_t errlen);

/* d = after - before for the counters (flags and strings from after). */
void bench_info_delta(const struct bench_info *before, const struct bench_info *after,
		      struct bench_info *d);

/* acc += x for the counters; flags are and-ed (a figure is known only if
 * every node reported it), strings kept from the first. */
void bench_info_add(struct bench_info *acc, const struct bench_info *x, bool first);

/* Total fabric verbs (READ + WRITE + CAS + FAA). */
static inline uint64_t bench_info_verbs(const struct bench_info *i)
{
	return i->fab_reads + i->fab_writes + i->fab_cas + i->fab_faa;
}

/*
 * bench_proc_cpu - CPU seconds (user + system) of a local process from
 * /proc/<pid>/stat, for servers whose INFO lacks used_cpu_*.
 * Returns 0, or -errno.
 */
int bench_proc_cpu(long pid, double *seconds);

#endif
