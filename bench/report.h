/*
 * report.h: the figures of a result, the final table and the JSON.
 *
 * Where each figure comes from:
 *  - throughput: measured operations / measured seconds (client side);
 *  - latency: the client's histogram (hist.h), in microseconds;
 *  - commits, aborts, retries: INFO deltas (txn_committed, txn_aborts,
 *    txn_retries summed over the nodes) when the server has them (rckv);
 *    for Redis, commits are the client's count of successful operations
 *    and aborts its count of EXECs answered null or with an error;
 *  - verbs and round trips per transaction: INFO fabric deltas,
 *    (reads + writes + cas + faa) / fabric_txns and round_trips /
 *    fabric_txns (rckv only); RPCs likewise (fabric_rpcs);
 *  - the stage breakdown: INFO cc_stage_<stage> deltas (usec, verbs,
 *    rpcs), summed over the nodes, per txn_committed (rckv only);
 *  - server CPU: used_cpu_user + used_cpu_sys deltas, summed over the
 *    nodes (from /proc for a local server whose INFO lacks them), also as
 *    a percentage of one core over the measured time.
 * Unknown figures are NaN: "-" in the table, null in JSON.
 *
 * Threads: main thread only.
 */
#ifndef RCKV_BENCH_REPORT_H
#define RCKV_BENCH_REPORT_H

#include <stdio.h>

#include "bench/config.h"
#include "bench/json.h"
#include "bench/run.h"
#include "bench/target.h"

struct bench_figures {
	double throughput;     /* per second */
	double p50, p90, p99, p999, max, min, mean; /* microseconds */
	double commits, aborts, abort_rate, retries;
	bool commits_from_info;
	double verbs_per_txn, round_trips_per_txn, rpcs_per_txn;
	/* RCC's latency breakdown, per committed transaction (its aborted
	 * attempts included): time in each stage's round trips (us), its
	 * one-sided verbs and RPCs (rckv; NaN elsewhere) */
	double stage_us[BENCH_STAGES], stage_verbs[BENCH_STAGES], stage_rpcs[BENCH_STAGES];
	double cpu_s, cpu_percent;
};

void bench_figures(const struct bench_config *cfg, const struct bench_result *r,
		   struct bench_figures *f);

/* The final table for one target, or two side by side with their ratio
 * (a / b) when b is non-NULL. */
void bench_report_table(FILE *out, const struct bench_config *cfg, const struct bench_target *ta,
			const struct bench_result *ra, const struct bench_target *tb,
			const struct bench_result *rb);

/*
 * bench_report_json - one JSON object: config, the figures of ra, and
 * with tb/rb a "compare" object (the same figures) and "ratio" (a / b).
 * point (may be NULL) adds "sweep": {name: value, ...} for sweep lines.
 * pretty: indented (a --json file) or one line (sweep lines).
 */
void bench_report_json(FILE *out, bool pretty, const struct bench_config *cfg,
		       const struct bench_target *ta, const struct bench_result *ra,
		       const struct bench_target *tb, const struct bench_result *rb,
		       const char *const *point_names, const char *const *point_values,
		       int npoint);

#endif
