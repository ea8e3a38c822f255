/*
 * config.h: rckv-bench's configuration: what a run does, parsed from the
 * command line, echoed whole into the --json output so that a result
 * says exactly how it was obtained.
 *
 * Threads: filled by main before any thread starts; read-only afterwards.
 */
#ifndef RCKV_BENCH_CONFIG_H
#define RCKV_BENCH_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bench/json.h"

enum bench_workload {
	BW_LOAD,
	BW_YCSB_T,
	BW_YCSB_A,
	BW_YCSB_B,
	BW_YCSB_C,
	BW_YCSB_D,
	BW_YCSB_E,
	BW_YCSB_F,
	BW_BANK,
	BW_SMALLBANK, /* the OLTP workloads: Lua scripts (oltp.h) */
	BW_TPCC,
	BW_TATP,
};

/* bank: every account's balance at load, and the largest transfer. */
#define BENCH_BANK_BALANCE "1000"
#define BENCH_BANK_MAX_AMOUNT 10

enum bench_load_mode {
	BL_AUTO,   /* load when sampled keys are missing or have another size */
	BL_ALWAYS,
	BL_NEVER,
};

#define BENCH_MAX_SWEEPS 3
#define BENCH_MAX_SWEEP_VALUES 64 /* cc-stages=all: 2^6 hybrids */

/* One swept parameter: --sweep name=v1,v2,... */
struct bench_sweep {
	char name[32];
	int nvalues;
	char values[BENCH_MAX_SWEEP_VALUES][32];
};

struct bench_config {
	enum bench_workload workload;
	const char *workload_name;

	/* target */
	char host[256];
	int port;
	char cluster_file[512]; /* "" unless --cluster */
	bool compare;
	char compare_host[256];
	int compare_port;

	/* client shape */
	int threads;     /* client threads */
	int clients;     /* connections per thread */
	int pipeline;    /* operations in flight per connection */

	/* workload */
	int ops;              /* operations per transaction (ycsb-t) */
	double write_ratio;   /* ycsb-t */
	double zipf;          /* theta */
	int zipf_head;        /* ranks drawn exactly (zipf.h) */
	uint64_t records;
	int value_size;
	int nodes_per_txn;    /* ycsb-t, bank */
	bool nodes_per_txn_set; /* given on the command line; else main picks it
				 * from the target (2 where it has 2+ nodes, else 1) */
	int scan_max;         /* ycsb-e: scan lengths are uniform in 1..scan_max */
	bool balances;        /* load: every value is BENCH_BANK_BALANCE (bank's load) */

	/* the OLTP workloads (oltp.h) */
	uint64_t accounts;     /* smallbank: customers */
	uint64_t hot_accounts; /* smallbank: the hot set; 0 for 4% of the accounts */
	double hot_pct;        /* smallbank: percent of accounts drawn from the hot set */
	int warehouses;        /* tpcc */
	int items;             /* tpcc: items (and stock rows per warehouse) */
	int customers;         /* tpcc: customers per district (and initial orders) */
	uint64_t subscribers;  /* tatp */

	/* measurement */
	double warmup;        /* seconds */
	double duration;      /* seconds; used when operations == 0 */
	uint64_t operations;  /* measured operations, instead of a duration */
	uint64_t seed;
	int rounds;           /* runs per target, alternating with --compare */

	/* server side */
	char cc[32];          /* CONFIG SET cc before each run; "" to leave it */
	/* CONFIG SET cc-stages before each run, "" to leave it: onesided, rpc,
	 * a list (lock=rpc,...), or RCC's bit code, a 0/1 digit per stage in
	 * bench_stage_names' order, 1 = RPC (010000: lock by RPC) */
	char cc_stages[96];

	/* load */
	enum bench_load_mode load;
	int batch;            /* keys per MSET */
	int load_pipeline;    /* MSETs in flight per connection */

	/* output */
	char json_path[512];  /* "" for none */
	bool quiet;           /* no progress line */
	int timeout_ms;       /* connect and control-command timeout */

	int nsweeps;
	struct bench_sweep sweeps[BENCH_MAX_SWEEPS];
};

/*
 * bench_config_parse - fill cfg from argv (defaults first). Prints usage
 * on --help and returns 1; returns 0 on success, or -1 with a message in
 * err for a bad option or value.
 */
int bench_config_parse(struct bench_config *cfg, int argc, char **argv, char *err, size_t errlen);

/* The usage text. */
void bench_usage(FILE *f);

/*
 * bench_config_set - set one parameter by its option name (without the
 * dashes), as a sweep does: zipf, write-ratio, nodes-per-txn, ops,
 * threads, clients, pipeline, cc. Returns 0, or -1 with err filled.
 */
int bench_config_set(struct bench_config *cfg, const char *name, const char *value, char *err,
		     size_t errlen);

/* Whether the workload runs MULTI/EXEC transactions (ycsb-t, bank): its
 * keys come from the keyspace grouped by node (keys.h). */
static inline bool bench_config_is_txn(const struct bench_config *cfg)
{
	return cfg->workload == BW_YCSB_T || cfg->workload == BW_BANK;
}

/* Whether the workload runs Lua scripts (smallbank, tpcc, tatp). */
static inline bool bench_config_is_oltp(const struct bench_config *cfg)
{
	return cfg->workload == BW_SMALLBANK || cfg->workload == BW_TPCC ||
	       cfg->workload == BW_TATP;
}

/* Write the configuration as a JSON object under key. */
void bench_config_json(const struct bench_config *cfg, struct bench_json *j, const char *key);

#endif
