/*
 * config.c: rckv-bench's command line (config.h).
 */
#include "bench/config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench/info.h"
#include "bench/keys.h"
#include "bench/zipf.h"

static const struct {
	const char *name;
	enum bench_workload w;
} workloads[] = {
	{ "load", BW_LOAD },       { "ycsb-t", BW_YCSB_T }, { "ycsb-a", BW_YCSB_A },
	{ "ycsb-b", BW_YCSB_B },   { "ycsb-c", BW_YCSB_C }, { "ycsb-d", BW_YCSB_D },
	{ "ycsb-e", BW_YCSB_E },   { "ycsb-f", BW_YCSB_F }, { "bank", BW_BANK },
	{ "smallbank", BW_SMALLBANK }, { "tpcc", BW_TPCC }, { "tatp", BW_TATP },
};
#define NWORKLOADS (sizeof(workloads) / sizeof(workloads[0]))

/* YCSB's core workloads use its ZIPFIAN_CONSTANT; RCBench's YCSB-T 0.2. */
#define ZIPF_CORE_DEFAULT 0.99
#define ZIPF_TXN_DEFAULT 0.2

void bench_usage(FILE *f)
{
	fputs(
"usage: rckv-bench [--host H --port P | --cluster FILE] <workload> [options]\n"
"\n"
"workloads:\n"
"  ycsb-t     transactions: MULTI, --ops GET/SET, EXEC (RCBench's YCSB-T)\n"
"  ycsb-a     50% GET, 50% SET             ycsb-b  95% GET, 5% SET\n"
"  ycsb-c     100% GET                     ycsb-d  95% GET of recent keys, 5% insert\n"
"  ycsb-e     95% SCAN, 5% insert          ycsb-f  50% GET, 50% GET then SET\n"
"  bank       transfers: MULTI, DECRBY, INCRBY, EXEC between 2 accounts on\n"
"             --nodes-per-txn nodes; the total is checked before and after\n"
"  load       populate --records keys with pipelined MSET\n"
"\n"
"OLTP workloads (Lua scripts: SCRIPT LOAD, EVALSHA; a load starts with FLUSHALL):\n"
"  smallbank  the six SmallBank transactions, mix 15/15/15/25/15/15; checks the\n"
"             total of the balances against the committed deltas\n"
"  tpcc       TPC-C: NewOrder, Payment, OrderStatus, Delivery, StockLevel, mix\n"
"             45/43/4/4/4; checks consistency conditions 1-5\n"
"  tatp       the seven TATP transactions, mix 35/10/35/2/14/2/2; checks the\n"
"             count of call-forwarding rows against the committed inserts and deletes\n"
"\n"
"target:\n"
"  --host H, --port P     server (default 127.0.0.1:6379)\n"
"  --cluster FILE         rckv cluster file: node addresses; connections spread over nodes\n"
"  --compare HOST:PORT    run the same workload against a second server, alternating\n"
"  --cc NAME              CONFIG SET cc NAME on rckv targets before each run\n"
"  --cc-stages MODES      CONFIG SET cc-stages MODES on rckv targets before each run:\n"
"                         onesided, rpc, lock=rpc,..., or a bit code of 6 digits, one\n"
"                         per stage read,lock,validate,log,commit,release (1 = RPC)\n"
"\n"
"workload options:\n"
"  --records N            keyspace size (default 1M; k/m/g suffixes are x1000)\n"
"  --value-size N         bytes per value (default 1000; bank: balances of " BENCH_BANK_BALANCE ")\n"
"  --zipf THETA           request skew, 0 <= theta < 1 (ycsb-t, bank 0.2, others 0.99)\n"
"  --zipf-head N          Zipf ranks drawn exactly (default 256; 2 = YCSB's generator)\n"
"  --ops N                operations per transaction (ycsb-t, default 10)\n"
"  --write-ratio F        fraction of SETs in a transaction (ycsb-t, default 0.2)\n"
"  --nodes-per-txn N      nodes each transaction touches (ycsb-t, bank: default 2 where\n"
"                         the target has 2 or more nodes, else 1)\n"
"  --scan-max N           longest SCAN COUNT (ycsb-e, default 100)\n"
"  --accounts N           smallbank: customers (default 100k)\n"
"  --hot-accounts N       smallbank: the hot set (default 4% of the accounts)\n"
"  --hot-pct P            smallbank: percent of accounts drawn from it (default 90)\n"
"  --warehouses N         tpcc: warehouses, spread over the nodes (default 1)\n"
"  --items N              tpcc: items and stock rows per warehouse (default 10000)\n"
"  --customers N          tpcc: customers (and initial orders) per district (default 300)\n"
"  --subscribers N        tatp: subscribers (default 10000)\n"
"\n"
"client:\n"
"  --threads N            client threads (default 1)\n"
"  --clients N            connections per thread (default 8)\n"
"  --pipeline N           operations in flight per connection (default 1)\n"
"\n"
"measurement:\n"
"  --warmup S             seconds before measuring (default 2)\n"
"  --duration S           measured seconds (default 10)\n"
"  -n, --operations N     measure N operations instead of a duration\n"
"  --rounds N             runs per target, averaged (default 1; 2 with --compare)\n"
"  --seed N               random seed (default 1)\n"
"  --load auto|always|never  populate before running (default auto: when sampled\n"
"                         keys are missing)\n"
"  --batch N              keys per MSET when loading (default 100)\n"
"  --load-pipeline N      MSETs in flight per connection when loading (default 4)\n"
"\n"
"output:\n"
"  --json FILE            write the result as JSON (with --sweep: one line per point)\n"
"  --sweep NAME=V1,V2,..  run once per value; NAME is zipf, write-ratio, nodes-per-txn,\n"
"                         ops, threads, clients, pipeline, cc or cc-stages (repeatable:\n"
"                         all combinations, the first given outermost); cc-stages takes\n"
"                         bit codes, onesided, rpc, or all: every one of the 64 hybrids,\n"
"                         then printed ranked by throughput (RCC's enumeration)\n"
"  --quiet                no progress line\n"
"  --timeout MS           connect and control timeout (default 10000)\n",
	      f);
}

/* A count with an optional k/m/g suffix (powers of 1000). */
static int parse_count(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	double mult = 1;

	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s)
		return -1;
	if (*end == 'k' || *end == 'K')
		mult = 1e3, end++;
	else if (*end == 'm' || *end == 'M')
		mult = 1e6, end++;
	else if (*end == 'g' || *end == 'G')
		mult = 1e9, end++;
	if (*end || !isfinite(v))
		return -1;
	v *= mult;
	if (v < (double)min || v > (double)max || v != floor(v))
		return -1;
	*out = (uint64_t)v;
	return 0;
}

static int parse_int(const char *s, int min, int max, int *out)
{
	uint64_t v;

	if (parse_count(s, (uint64_t)(min < 0 ? 0 : min), (uint64_t)max, &v))
		return -1;
	*out = (int)v;
	return 0;
}

static int parse_double(const char *s, double min, double max, double *out)
{
	char *end;

	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= min && v <= max))
		return -1;
	*out = v;
	return 0;
}

static int parse_hostport(const char *s, char *host, size_t hostcap, int *port)
{
	const char *colon = strrchr(s, ':');
	size_t hl;

	if (!colon || colon == s)
		return -1;
	hl = (size_t)(colon - s);
	if (s[0] == '[' && hl >= 2 && s[hl - 1] == ']')
		s++, hl -= 2;
	if (hl >= hostcap)
		return -1;
	memcpy(host, s, hl);
	host[hl] = '\0';
	return parse_int(colon + 1, 1, 65535, port);
}

int bench_config_set(struct bench_config *cfg, const char *name, const char *value, char *err,
		     size_t errlen)
{
	int bad = 0;

	if (!strcmp(name, "zipf"))
		bad = parse_double(value, 0, 0.999999, &cfg->zipf);
	else if (!strcmp(name, "write-ratio"))
		bad = parse_double(value, 0, 1, &cfg->write_ratio);
	else if (!strcmp(name, "nodes-per-txn"))
		bad = parse_int(value, 1, RCKV_MAX_NODES, &cfg->nodes_per_txn);
	else if (!strcmp(name, "ops"))
		bad = parse_int(value, 1, BENCH_TXN_MAX_OPS, &cfg->ops);
	else if (!strcmp(name, "threads"))
		bad = parse_int(value, 1, 256, &cfg->threads);
	else if (!strcmp(name, "clients"))
		bad = parse_int(value, 1, 4096, &cfg->clients);
	else if (!strcmp(name, "pipeline"))
		bad = parse_int(value, 1, 4096, &cfg->pipeline);
	else if (!strcmp(name, "cc")) {
		if (strlen(value) >= sizeof(cfg->cc) || !value[0])
			bad = 1;
		else
			strcpy(cfg->cc, value);
	} else if (!strcmp(name, "cc-stages")) {
		/* a list is the server's to judge; a bit code is ours */
		size_t n = strlen(value);
		bool code = n == BENCH_STAGES && strspn(value, "01") == n;
		if (!n || n >= sizeof(cfg->cc_stages) ||
		    (!code && strspn(value, "0123456789") == n))
			bad = 1;
		else
			strcpy(cfg->cc_stages, value);
	} else {
		snprintf(err, errlen,
			 "cannot sweep '%s' (zipf, write-ratio, nodes-per-txn, ops, threads, "
			 "clients, pipeline, cc, cc-stages)",
			 name);
		return -1;
	}
	if (bad) {
		snprintf(err, errlen, "bad value '%s' for %s", value, name);
		return -1;
	}
	return 0;
}

static int parse_sweep(struct bench_config *cfg, const char *arg, char *err, size_t errlen)
{
	const char *eq = strchr(arg, '=');
	struct bench_sweep *sw;
	struct bench_config probe = *cfg;

	if (cfg->nsweeps == BENCH_MAX_SWEEPS) {
		snprintf(err, errlen, "at most %d --sweep options", BENCH_MAX_SWEEPS);
		return -1;
	}
	if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof(sw->name) || !eq[1]) {
		snprintf(err, errlen, "--sweep wants NAME=V1,V2,... (got '%s')", arg);
		return -1;
	}
	sw = &cfg->sweeps[cfg->nsweeps];
	memset(sw, 0, sizeof(*sw));
	memcpy(sw->name, arg, (size_t)(eq - arg));
	for (int i = 0; i < cfg->nsweeps; i++) {
		if (!strcmp(cfg->sweeps[i].name, sw->name)) {
			snprintf(err, errlen, "--sweep %s given twice", sw->name);
			return -1;
		}
	}
	const char *p = eq + 1;
	if (!strcmp(sw->name, "cc-stages") && !strcmp(p, "all")) {
		/* RCC's enumeration: every bit code, pure one-sided first */
		for (int code = 0; code < 1 << BENCH_STAGES; code++) {
			for (int s = 0; s < BENCH_STAGES; s++)
				sw->values[code][s] = (code >> (BENCH_STAGES - 1 - s)) & 1 ? '1' : '0';
			sw->values[code][BENCH_STAGES] = '\0';
		}
		sw->nvalues = 1 << BENCH_STAGES;
		cfg->nsweeps++;
		return 0;
	}
	while (*p) {
		size_t len = strcspn(p, ",");
		if (sw->nvalues == BENCH_MAX_SWEEP_VALUES || len == 0 ||
		    len >= sizeof(sw->values[0])) {
			snprintf(err, errlen, "--sweep %s: empty, too long or too many values (at most %d)",
				 sw->name, BENCH_MAX_SWEEP_VALUES);
			return -1;
		}
		memcpy(sw->values[sw->nvalues], p, len);
		sw->values[sw->nvalues][len] = '\0';
		/* validate now rather than after the first points have run */
		if (bench_config_set(&probe, sw->name, sw->values[sw->nvalues], err, errlen))
			return -1;
		sw->nvalues++;
		p += len;
		if (*p == ',')
			p++;
	}
	cfg->nsweeps++;
	return 0;
}

static int set_str(char *dst, size_t cap, const char *v, const char *what, char *err,
		   size_t errlen)
{
	if (strlen(v) >= cap) {
		snprintf(err, errlen, "%s too long", what);
		return -1;
	}
	strcpy(dst, v);
	return 0;
}

enum {
	O_HOST = 256, O_PORT, O_CLUSTER, O_COMPARE, O_CC, O_RECORDS, O_VALUE_SIZE, O_ZIPF,
	O_ZIPF_HEAD, O_OPS, O_WRITE_RATIO, O_NODES_PER_TXN, O_SCAN_MAX, O_THREADS, O_CLIENTS,
	O_PIPELINE, O_WARMUP, O_DURATION, O_ROUNDS, O_SEED, O_LOAD, O_BATCH, O_LOAD_PIPELINE,
	O_JSON, O_SWEEP, O_QUIET, O_TIMEOUT, O_CC_STAGES, O_ACCOUNTS, O_HOT_ACCOUNTS, O_HOT_PCT,
	O_WAREHOUSES, O_ITEMS, O_CUSTOMERS, O_SUBSCRIBERS,
};

static const struct option longopts[] = {
	{ "host", required_argument, 0, O_HOST },
	{ "port", required_argument, 0, O_PORT },
	{ "cluster", required_argument, 0, O_CLUSTER },
	{ "compare", required_argument, 0, O_COMPARE },
	{ "cc", required_argument, 0, O_CC },
	{ "cc-stages", required_argument, 0, O_CC_STAGES },
	{ "records", required_argument, 0, O_RECORDS },
	{ "value-size", required_argument, 0, O_VALUE_SIZE },
	{ "zipf", required_argument, 0, O_ZIPF },
	{ "zipf-head", required_argument, 0, O_ZIPF_HEAD },
	{ "ops", required_argument, 0, O_OPS },
	{ "write-ratio", required_argument, 0, O_WRITE_RATIO },
	{ "nodes-per-txn", required_argument, 0, O_NODES_PER_TXN },
	{ "scan-max", required_argument, 0, O_SCAN_MAX },
	{ "threads", required_argument, 0, O_THREADS },
	{ "clients", required_argument, 0, O_CLIENTS },
	{ "pipeline", required_argument, 0, O_PIPELINE },
	{ "warmup", required_argument, 0, O_WARMUP },
	{ "duration", required_argument, 0, O_DURATION },
	{ "operations", required_argument, 0, 'n' },
	{ "rounds", required_argument, 0, O_ROUNDS },
	{ "seed", required_argument, 0, O_SEED },
	{ "load", required_argument, 0, O_LOAD },
	{ "batch", required_argument, 0, O_BATCH },
	{ "load-pipeline", required_argument, 0, O_LOAD_PIPELINE },
	{ "json", required_argument, 0, O_JSON },
	{ "sweep", required_argument, 0, O_SWEEP },
	{ "quiet", no_argument, 0, O_QUIET },
	{ "timeout", required_argument, 0, O_TIMEOUT },
	{ "accounts", required_argument, 0, O_ACCOUNTS },
	{ "hot-accounts", required_argument, 0, O_HOT_ACCOUNTS },
	{ "hot-pct", required_argument, 0, O_HOT_PCT },
	{ "warehouses", required_argument, 0, O_WAREHOUSES },
	{ "items", required_argument, 0, O_ITEMS },
	{ "customers", required_argument, 0, O_CUSTOMERS },
	{ "subscribers", required_argument, 0, O_SUBSCRIBERS },
	{ "help", no_argument, 0, 'h' },
	{ 0, 0, 0, 0 },
};

static const char *optname(int c)
{
	for (const struct option *o = longopts; o->name; o++)
		if (o->val == c)
			return o->name;
	return "?";
}

int bench_config_parse(struct bench_config *cfg, int argc, char **argv, char *err, size_t errlen)
{
	bool zipf_set = false, rounds_set = false, host_set = false;
	const char *not_bank = NULL; /* an option that bank refuses */
	int c;

	memset(cfg, 0, sizeof(*cfg));
	strcpy(cfg->host, "127.0.0.1");
	cfg->port = 6379;
	cfg->threads = 1;
	cfg->clients = 8;
	cfg->pipeline = 1;
	cfg->ops = 10;
	cfg->write_ratio = 0.2;
	cfg->zipf_head = BENCH_ZIPF_HEAD_DEFAULT;
	cfg->records = 1000000;
	cfg->value_size = 1000;
	cfg->nodes_per_txn = 2;
	cfg->scan_max = 100;
	cfg->warmup = 2;
	cfg->duration = 10;
	cfg->seed = 1;
	cfg->rounds = 1;
	cfg->load = BL_AUTO;
	cfg->batch = 100;
	cfg->load_pipeline = 4;
	cfg->timeout_ms = 10000;
	cfg->accounts = 100000;
	cfg->hot_pct = 90;
	cfg->warehouses = 1;
	cfg->items = 10000;
	cfg->customers = 300;
	cfg->subscribers = 10000;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":hn:", longopts, NULL)) != -1) {
		const char *a = optarg;
		int bad = 0;

		switch (c) {
		case 'h':
			bench_usage(stdout);
			return 1;
		case O_HOST:
			bad = set_str(cfg->host, sizeof(cfg->host), a, "--host", err, errlen);
			if (bad)
				return -1;
			host_set = true;
			break;
		case O_PORT:
			bad = parse_int(a, 1, 65535, &cfg->port);
			host_set = true;
			break;
		case O_CLUSTER:
			if (set_str(cfg->cluster_file, sizeof(cfg->cluster_file), a, "--cluster", err,
				    errlen))
				return -1;
			break;
		case O_COMPARE:
			cfg->compare = true;
			bad = parse_hostport(a, cfg->compare_host, sizeof(cfg->compare_host),
					     &cfg->compare_port);
			break;
		case O_CC:
		case O_CC_STAGES:
		case O_ZIPF:
		case O_OPS:
		case O_WRITE_RATIO:
		case O_NODES_PER_TXN:
		case O_THREADS:
		case O_CLIENTS:
		case O_PIPELINE:
			if (bench_config_set(cfg, optname(c), a, err, errlen))
				return -1;
			if (c == O_ZIPF)
				zipf_set = true;
			if (c == O_NODES_PER_TXN)
				cfg->nodes_per_txn_set = true;
			if (c == O_OPS || c == O_WRITE_RATIO)
				not_bank = optname(c);
			break;
		case O_RECORDS:
			bad = parse_count(a, 1, UINT32_MAX, &cfg->records);
			break;
		case O_VALUE_SIZE:
			bad = parse_int(a, 1, 64 * 1024 * 1024, &cfg->value_size);
			not_bank = optname(c);
			break;
		case O_ZIPF_HEAD:
			bad = parse_int(a, 2, BENCH_ZIPF_HEAD_MAX, &cfg->zipf_head);
			break;
		case O_SCAN_MAX:
			bad = parse_int(a, 1, 100000, &cfg->scan_max);
			break;
		case O_WARMUP:
			bad = parse_double(a, 0, 86400, &cfg->warmup);
			break;
		case O_DURATION:
			bad = parse_double(a, 0.1, 86400 * 7, &cfg->duration);
			break;
		case 'n':
			bad = parse_count(a, 1, UINT64_MAX / 2, &cfg->operations);
			break;
		case O_ROUNDS:
			bad = parse_int(a, 1, 1000, &cfg->rounds);
			rounds_set = true;
			break;
		case O_SEED:
			bad = parse_count(a, 0, UINT64_MAX / 2, &cfg->seed);
			break;
		case O_LOAD:
			if (!strcmp(a, "auto"))
				cfg->load = BL_AUTO;
			else if (!strcmp(a, "always"))
				cfg->load = BL_ALWAYS;
			else if (!strcmp(a, "never"))
				cfg->load = BL_NEVER;
			else
				bad = 1;
			break;
		case O_BATCH:
			bad = parse_int(a, 1, 100000, &cfg->batch);
			break;
		case O_LOAD_PIPELINE:
			bad = parse_int(a, 1, 1024, &cfg->load_pipeline);
			break;
		case O_JSON:
			if (set_str(cfg->json_path, sizeof(cfg->json_path), a, "--json", err, errlen))
				return -1;
			break;
		case O_SWEEP:
			if (parse_sweep(cfg, a, err, errlen))
				return -1;
			break;
		case O_QUIET:
			cfg->quiet = true;
			break;
		case O_TIMEOUT:
			bad = parse_int(a, 1, 3600000, &cfg->timeout_ms);
			break;
		case O_ACCOUNTS:
			bad = parse_count(a, 2, 100000000, &cfg->accounts);
			break;
		case O_HOT_ACCOUNTS:
			bad = parse_count(a, 1, 100000000, &cfg->hot_accounts);
			break;
		case O_HOT_PCT:
			bad = parse_double(a, 0, 100, &cfg->hot_pct);
			break;
		case O_WAREHOUSES:
			bad = parse_int(a, 1, 1000, &cfg->warehouses);
			break;
		case O_ITEMS:
			bad = parse_int(a, 100, 1000000, &cfg->items);
			break;
		case O_CUSTOMERS:
			bad = parse_int(a, 10, 100000, &cfg->customers);
			break;
		case O_SUBSCRIBERS:
			bad = parse_count(a, 1, 100000000, &cfg->subscribers);
			break;
		case ':':
			snprintf(err, errlen, "option %s needs a value", argv[optind - 1]);
			return -1;
		default:
			snprintf(err, errlen, "unknown option '%s' (see --help)", argv[optind - 1]);
			return -1;
		}
		if (bad) {
			snprintf(err, errlen, "bad value '%s' for --%s", a, optname(c));
			return -1;
		}
	}
	if (optind >= argc) {
		snprintf(err, errlen, "no workload given (ycsb-t, ycsb-a .. ycsb-f, bank, smallbank, tpcc, tatp or load; see --help)");
		return -1;
	}
	if (optind + 1 < argc) {
		snprintf(err, errlen, "one workload only (got '%s' and '%s')", argv[optind],
			 argv[optind + 1]);
		return -1;
	}
	for (size_t i = 0; i < NWORKLOADS; i++) {
		if (!strcasecmp(argv[optind], workloads[i].name)) {
			cfg->workload = workloads[i].w;
			cfg->workload_name = workloads[i].name;
		}
	}
	if (!cfg->workload_name) {
		snprintf(err, errlen, "unknown workload '%s' (ycsb-t, ycsb-a .. ycsb-f, bank, smallbank, tpcc, tatp or load)",
			 argv[optind]);
		return -1;
	}
	if (cfg->cluster_file[0] && host_set) {
		snprintf(err, errlen, "give either --host/--port or --cluster, not both");
		return -1;
	}
	if (!zipf_set)
		cfg->zipf = bench_config_is_txn(cfg) ? ZIPF_TXN_DEFAULT : ZIPF_CORE_DEFAULT;
	if (cfg->workload == BW_BANK) {
		/* a transfer is two operations on integer balances */
		if (not_bank) {
			snprintf(err, errlen, "bank takes no --%s: a transfer is a DECRBY and an "
				 "INCRBY of balances loaded as %s", not_bank, BENCH_BANK_BALANCE);
			return -1;
		}
		for (int s = 0; s < cfg->nsweeps; s++) {
			const char *n = cfg->sweeps[s].name;
			if (!strcmp(n, "ops") || !strcmp(n, "write-ratio")) {
				snprintf(err, errlen, "bank cannot sweep %s: a transfer is a DECRBY "
					 "and an INCRBY", n);
				return -1;
			}
		}
		cfg->ops = 2;
		cfg->write_ratio = 1;
		cfg->value_size = (int)strlen(BENCH_BANK_BALANCE);
	}
	if (cfg->compare && !rounds_set)
		cfg->rounds = 2;
	if (cfg->workload == BW_LOAD && (cfg->compare || cfg->nsweeps)) {
		snprintf(err, errlen, "load takes neither --compare nor --sweep");
		return -1;
	}
	if ((uint64_t)cfg->value_size * (uint64_t)cfg->batch > 512ull * 1024 * 1024) {
		snprintf(err, errlen, "--batch x --value-size exceeds one 512 MB request");
		return -1;
	}
	return 0;
}

void bench_config_json(const struct bench_config *cfg, struct bench_json *j, const char *key)
{
	static const char *const loads[] = { "auto", "always", "never" };

	bench_json_obj(j, key);
	bench_json_str(j, "workload", cfg->workload_name);
	bench_json_str(j, "host", cfg->cluster_file[0] ? NULL : cfg->host);
	bench_json_int(j, "port", cfg->cluster_file[0] ? 0 : cfg->port);
	bench_json_str(j, "cluster", cfg->cluster_file[0] ? cfg->cluster_file : NULL);
	if (cfg->compare) {
		char hp[300];
		snprintf(hp, sizeof(hp), "%s:%d", cfg->compare_host, cfg->compare_port);
		bench_json_str(j, "compare", hp);
	} else {
		bench_json_null(j, "compare");
	}
	bench_json_int(j, "threads", cfg->threads);
	bench_json_int(j, "clients", cfg->clients);
	bench_json_int(j, "pipeline", cfg->pipeline);
	bench_json_int(j, "ops", cfg->ops);
	bench_json_num(j, "write_ratio", cfg->write_ratio);
	bench_json_num(j, "zipf", cfg->zipf);
	bench_json_int(j, "zipf_head", cfg->zipf_head);
	bench_json_uint(j, "records", cfg->records);
	bench_json_int(j, "value_size", cfg->value_size);
	bench_json_int(j, "nodes_per_txn", cfg->nodes_per_txn);
	bench_json_int(j, "scan_max", cfg->scan_max);
	bench_json_num(j, "warmup_s", cfg->warmup);
	bench_json_num(j, "duration_s", cfg->operations ? 0 : cfg->duration);
	bench_json_uint(j, "operations", cfg->operations);
	bench_json_uint(j, "seed", cfg->seed);
	bench_json_int(j, "rounds", cfg->rounds);
	bench_json_str(j, "cc", cfg->cc[0] ? cfg->cc : NULL);
	bench_json_str(j, "cc_stages", cfg->cc_stages[0] ? cfg->cc_stages : NULL);
	bench_json_str(j, "load", loads[cfg->load]);
	bench_json_int(j, "batch", cfg->batch);
	bench_json_int(j, "load_pipeline", cfg->load_pipeline);
	bench_json_int(j, "timeout_ms", cfg->timeout_ms);
	if (cfg->workload == BW_SMALLBANK) {
		bench_json_uint(j, "accounts", cfg->accounts);
		bench_json_uint(j, "hot_accounts", cfg->hot_accounts);
		bench_json_num(j, "hot_pct", cfg->hot_pct);
	} else if (cfg->workload == BW_TPCC) {
		bench_json_int(j, "warehouses", cfg->warehouses);
		bench_json_int(j, "items", cfg->items);
		bench_json_int(j, "customers", cfg->customers);
	} else if (cfg->workload == BW_TATP) {
		bench_json_uint(j, "subscribers", cfg->subscribers);
	}
	bench_json_end_obj(j);
}
