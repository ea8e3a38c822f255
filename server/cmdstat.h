/*
 * cmdstat: per-command statistics, Redis 7.0's INFO commandstats (calls,
 * usec, usec_per_call, rejected_calls, failed_calls) and INFO latencystats
 * (p50, p99, p99.9 of each command's latency).
 *
 * Threads: each worker owns a struct cmdstat and writes it with plain
 * stores (the hot path takes no lock and no atomic read-modify-write);
 * INFO on any worker sums every worker's with relaxed loads, and CONFIG
 * RESETSTAT zeroes them with atomic stores, as struct srv_stats (node.h):
 * a count may be a few operations old, or survive a reset by one.
 */
#ifndef RCKV_SRV_CMDSTAT_H
#define RCKV_SRV_CMDSTAT_H

#include <stdbool.h>
#include <stdint.h>

#include "resp/resp.h"

struct node;
struct srv_sbuf;
struct cmdstat;

/* For one worker; NULL if out of memory. */
struct cmdstat *cmdstat_create(void);
void cmdstat_free(struct cmdstat *s);

/*
 * cmdstat_call - count one call of the command with id `id` (cmd_id) that
 * took ns nanoseconds; failed: it replied an error; hist: record ns in the
 * command's latency histogram too (latency-tracking). Owner worker.
 */
void cmdstat_call(struct cmdstat *s, int id, uint64_t ns, bool failed, bool hist);
/* A call refused before it ran (arity, NOAUTH, OOM, Pub/Sub context). */
void cmdstat_reject(struct cmdstat *s, int id);

/* The INFO sections' lines (without their "# ..." header), summed over the
 * node's workers. Any worker. */
void cmdstat_info_commands(struct node *n, struct srv_sbuf *b);
void cmdstat_info_latency(struct node *n, struct srv_sbuf *b);
/* LATENCY HISTOGRAM [name ...]: Redis 7.0's map of command -> calls and
 * cumulative counts at doubling bounds (us); no names: every command with
 * calls; a container's name: its subcommands. Any worker. */
void cmdstat_reply_histogram(struct node *n, struct resp_w *out, int argc,
			     const struct resp_arg *argv);
/* CONFIG RESETSTAT. Any worker. */
void cmdstat_reset(struct node *n);

#endif
