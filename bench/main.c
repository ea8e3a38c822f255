/*
 * main.c: rckv-bench, the bundled load generator (DESIGN.md section 2,
 * bench/). See `rckv-bench --help` and config.h for the options, run.h
 * for how a run is driven and measured, report.h for where each figure
 * comes from.
 *
 * Flow: open the target (and the --compare target), load the keyspace
 * where it is missing, then for each sweep point (one point without
 * --sweep) prepare each target, run --rounds runs per target (A then B,
 * then B then A, ... so that neither always runs on a warmer machine),
 * and print the table and the JSON.
 *
 * Exit status: 0 success, 1 a run failed (the reason on stderr), 2 bad
 * command line.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/config.h"
#include "bench/fabric.h"
#include "bench/oltp.h"
#include "bench/report.h"
#include "bench/run.h"
#include "bench/target.h"

static struct bench_target targets[2];

static void describe(const char *tag, const struct bench_target *t)
{
	if (t->is_rckv)
		fprintf(stderr, "%s: %s: rckv %s, cc %s, %d node%s in the slot map\n", tag, t->name,
			t->version, t->cc, t->map.nnodes, t->map.nnodes == 1 ? "" : "s");
	else
		fprintf(stderr, "%s: %s: redis %s (no RCKV NODES: a standalone server)\n", tag,
			t->name, t->version);
}

static int load(const struct bench_config *cfg, struct bench_target *t, const char *tag,
		bool show_table)
{
	struct bench_config lc = *cfg;
	struct bench_result r;
	char err[1024];
	int rc;

	lc.workload = BW_LOAD;
	lc.workload_name = "load";
	lc.balances = cfg->workload == BW_BANK;
	if (bench_result_init(&r)) {
		fprintf(stderr, "rckv-bench: out of memory\n");
		return -1;
	}
	fprintf(stderr, "%s: loading %llu records of %d bytes into %s\n", tag,
		(unsigned long long)cfg->records, cfg->value_size, t->name);
	rc = bench_target_prepare(t, &lc, err, sizeof(err));
	if (rc == 0)
		rc = bench_run(&lc, t, &r, tag, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "rckv-bench: %s: load failed: %s\n", t->name, err);
		if (strstr(err, "OOM") || strstr(err, "memory"))
			fprintf(stderr, "rckv-bench: --records %llu x --value-size %d is about %.0f MB "
					"of values\n",
				(unsigned long long)cfg->records, cfg->value_size,
				(double)cfg->records * cfg->value_size / 1e6);
	} else if (show_table) {
		bench_report_table(stdout, &lc, t, &r, NULL, NULL);
	} else {
		fprintf(stderr, "%s: loaded %llu keys in %.1f s (%.0f keys/s)\n", tag,
			(unsigned long long)r.keys, r.seconds,
			r.seconds > 0 ? (double)r.keys / r.seconds : 0.0);
	}
	if (rc == 0 && show_table && cfg->json_path[0]) {
		FILE *f = fopen(cfg->json_path, "w");
		if (!f) {
			perror(cfg->json_path);
			rc = -1;
		} else {
			bench_report_json(f, true, &lc, t, &r, NULL, NULL, NULL, NULL, 0);
			fclose(f);
		}
	}
	bench_result_free(&r);
	return rc;
}

/* OLTP: the workload's database, loaded unless it is there already (its
 * marker says so) or --load never. */
static int load_oltp(const struct bench_config *cfg, struct bench_target *t, const char *tag)
{
	char err[1024];

	if (bench_target_prepare(t, cfg, err, sizeof(err))) {
		fprintf(stderr, "rckv-bench: %s\n", err);
		return -1;
	}
	if (cfg->load == BL_NEVER)
		return 0;
	if (cfg->load == BL_AUTO) {
		int loaded = bench_oltp_loaded(t, cfg, err, sizeof(err));
		if (loaded < 0) {
			fprintf(stderr, "rckv-bench: %s\n", err);
			return -1;
		}
		if (loaded) {
			fprintf(stderr, "%s: %s already holds the %s database\n", tag, t->name,
				cfg->workload_name);
			return 0;
		}
	}
	fprintf(stderr, "%s: loading the %s database into %s (FLUSHALL first)\n", tag,
		cfg->workload_name, t->name);
	uint64_t t0 = bench_now_ns();
	if (bench_oltp_load(t, cfg, err, sizeof(err))) {
		fprintf(stderr, "rckv-bench: %s\n", err);
		return -1;
	}
	fprintf(stderr, "%s: loaded in %.1f s\n", tag, (double)(bench_now_ns() - t0) / 1e9);
	return 0;
}

/* The sweep point with index p: values of each swept parameter, the first
 * sweep varying slowest. */
static void point_values(const struct bench_config *cfg, int p, const char **names,
			 const char **values)
{
	for (int s = cfg->nsweeps - 1; s >= 0; s--) {
		const struct bench_sweep *sw = &cfg->sweeps[s];
		names[s] = sw->name;
		values[s] = sw->values[p % sw->nvalues];
		p /= sw->nvalues;
	}
}

/* Can ycsb-t (bank) touch --nodes-per-txn nodes of t at every sweep point? */
static int check_points(const struct bench_config *cfg, struct bench_target *t)
{
	struct bench_keyspace ks;
	char err[1024], why[512];
	int npoints = 1, rc = 0;

	if (!bench_config_is_txn(cfg))
		return 0;
	if (bench_keyspace_build(&ks, &t->map, cfg->records, cfg->zipf, cfg->zipf_head)) {
		fprintf(stderr, "rckv-bench: cannot build the keyspace\n");
		return -1;
	}
	for (int s = 0; s < cfg->nsweeps; s++)
		npoints *= cfg->sweeps[s].nvalues;
	for (int p = 0; p < npoints && rc == 0; p++) {
		struct bench_config pc = *cfg;
		const char *names[BENCH_MAX_SWEEPS], *values[BENCH_MAX_SWEEPS];

		point_values(cfg, p, names, values);
		for (int s = 0; s < cfg->nsweeps; s++)
			bench_config_set(&pc, names[s], values[s], err, sizeof(err));
		/* a standalone Redis runs ycsb-t and bank on its one node */
		if (bench_keyspace_check(&ks, t->is_rckv ? pc.nodes_per_txn : 1, pc.ops, why,
					 sizeof(why))) {
			fprintf(stderr, "rckv-bench: %s: %s\n", t->name, why);
			rc = -1;
		}
	}
	bench_keyspace_free(&ks);
	return rc;
}

/* bank: what the accounts of every target hold, or an error. */
static int bank_totals(const struct bench_config *cfg, int ntargets, long long *totals)
{
	char err[1024];

	for (int i = 0; i < ntargets && cfg->workload == BW_BANK; i++) {
		if (bench_target_bank_total(&targets[i], cfg, &totals[i], err, sizeof(err))) {
			fprintf(stderr, "rckv-bench: %s\n", err);
			return -1;
		}
	}
	return 0;
}

static int run_point(const struct bench_config *cfg, int ntargets, FILE *json,
		     const char **names, const char **values, struct bench_figures *fig)
{
	struct bench_result res[2];
	char err[1024], label[32];
	int rc = -1, inited = 0;
	long long before[2], after[2];

	for (int i = 0; i < ntargets; i++) {
		if (bench_target_prepare(&targets[i], cfg, err, sizeof(err))) {
			fprintf(stderr, "rckv-bench: %s\n", err);
			return -1;
		}
		if (cfg->cc[0] && !targets[i].is_rckv)
			fprintf(stderr, "%s: %s is not rckv: --cc %s does not apply\n",
				i ? "B" : "A", targets[i].name, cfg->cc);
	}
	for (int i = 0; i < ntargets; i++, inited++)
		if (bench_result_init(&res[i])) {
			fprintf(stderr, "rckv-bench: out of memory\n");
			goto out;
		}
	if (bank_totals(cfg, ntargets, before))
		goto out;
	for (int i = 0; i < ntargets && bench_config_is_oltp(cfg); i++)
		if (bench_oltp_check_begin(&targets[i], cfg, err, sizeof(err))) {
			fprintf(stderr, "rckv-bench: %s\n", err);
			goto out;
		}
	for (int round = 0; round < cfg->rounds; round++) {
		for (int k = 0; k < ntargets; k++) {
			/* alternate who goes first: A B, B A, A B, ... */
			int i = ntargets == 2 && round % 2 ? 1 - k : k;
			if (ntargets == 2 || cfg->rounds > 1)
				snprintf(label, sizeof(label), "%s%s r%d", ntargets == 2 ? (i ? "B" : "A") : "",
					 ntargets == 2 ? "" : cfg->workload_name, round + 1);
			else
				snprintf(label, sizeof(label), "%s", cfg->workload_name);
			if (bench_run(cfg, &targets[i], &res[i], label, err, sizeof(err))) {
				fprintf(stderr, "rckv-bench: %s: %s\n", targets[i].name, err);
				/* transactions in flight on a lost connection may or
				 * may not have committed: their deltas are unknown */
				if (bench_config_is_oltp(cfg) && bench_oltp_of(cfg)->check_end)
					printf("%s: %s: consistency check INCONCLUSIVE: the run "
					       "failed (%s), so some transactions' outcomes are "
					       "unknown\n",
					       cfg->workload_name, targets[i].name, err);
				goto out;
			}
		}
	}
	if (cfg->nsweeps) {
		printf("\n== sweep point:");
		for (int s = 0; s < cfg->nsweeps; s++)
			printf(" %s=%s", names[s], values[s]);
		printf("\n");
	}
	bench_report_table(stdout, cfg, &targets[0], &res[0], ntargets == 2 ? &targets[1] : NULL,
			   ntargets == 2 ? &res[1] : NULL);
	bench_figures(cfg, &res[0], fig);
	if (bank_totals(cfg, ntargets, after))
		goto out;
	for (int i = 0; i < ntargets && cfg->workload == BW_BANK; i++) {
		/* every transfer takes from one account what it gives another */
		printf("bank: %s: the %llu accounts hold %lld before and %lld after%s\n",
		       targets[i].name, (unsigned long long)cfg->records, before[i], after[i],
		       before[i] == after[i] ? "" : ": MONEY CREATED OR LOST");
		if (before[i] != after[i]) {
			fprintf(stderr, "rckv-bench: %s: the bank's total changed from %lld to %lld\n",
				targets[i].name, before[i], after[i]);
			goto out;
		}
	}
	for (int i = 0; i < ntargets && bench_config_is_oltp(cfg); i++) {
		int crc = bench_oltp_check_end(&targets[i], cfg, &res[i].oltp, stdout, err,
					       sizeof(err));
		if (crc < 0)
			fprintf(stderr, "rckv-bench: %s\n", err);
		else if (crc > 0)
			fprintf(stderr, "rckv-bench: %s: the %s consistency check failed\n",
				targets[i].name, cfg->workload_name);
		if (crc)
			goto out;
	}
	fflush(stdout);
	if (cfg->nsweeps) {
		/* one JSON line per target and point: what bench/plot reads */
		FILE *out = json ? json : stdout;
		for (int i = 0; i < ntargets; i++)
			bench_report_json(out, false, cfg, &targets[i], &res[i], NULL, NULL, names,
					  values, cfg->nsweeps);
		fflush(out);
	} else if (json) {
		bench_report_json(json, true, cfg, &targets[0], &res[0],
				  ntargets == 2 ? &targets[1] : NULL, ntargets == 2 ? &res[1] : NULL,
				  NULL, NULL, 0);
	}
	rc = 0;
out:
	for (int i = 0; i < inited; i++)
		bench_result_free(&res[i]);
	return rc;
}

/* Is the sweep point's cc-stages value the pure mode `pure` (0: one-sided,
 * 1: RPC), in either spelling? */
static bool is_pure(const char *v, int pure)
{
	static const char *const names[2] = { "onesided", "rpc" };
	static const char *const codes[2] = { "000000", "111111" };
	return !strcmp(v, names[pure]) || !strcmp(v, codes[pure]);
}

/*
 * After a sweep over cc-stages (RCC 5.1's enumeration): A's points ranked by
 * throughput within each combination of the other swept values, each
 * against the pure one-sided and pure RPC points of that combination when
 * the sweep ran them.
 */
static void rank_stages(const struct bench_config *cfg, const struct bench_figures *figs,
			int npoints)
{
	int st = -1;
	for (int s = 0; s < cfg->nsweeps; s++)
		if (!strcmp(cfg->sweeps[s].name, "cc-stages"))
			st = s;
	if (st < 0)
		return;
	int *order = malloc(sizeof(int) * (size_t)npoints);
	if (!order)
		return;
	const int nst = cfg->sweeps[st].nvalues, groups = npoints / nst;
	printf("\n== cc-stages ranked by throughput (bit code: %s", bench_stage_names[0]);
	for (int s = 1; s < BENCH_STAGES; s++)
		printf(",%s", bench_stage_names[s]);
	printf("; 1 = RPC)\n");
	for (int g = 0; g < groups; g++) {
		/* the points of group g: every stage value, the other values fixed */
		int n = 0, pure[2] = { -1, -1 };
		for (int p = 0; p < npoints; p++) {
			const char *names[BENCH_MAX_SWEEPS], *values[BENCH_MAX_SWEEPS];
			int q = p, other = 0, mul = 1;
			for (int s = cfg->nsweeps - 1; s >= 0; s--) {
				int k = q % cfg->sweeps[s].nvalues;
				q /= cfg->sweeps[s].nvalues;
				if (s != st) {
					other += k * mul;
					mul *= cfg->sweeps[s].nvalues;
				}
			}
			if (other != g)
				continue;
			point_values(cfg, p, names, values);
			for (int m = 0; m < 2; m++)
				if (is_pure(values[st], m))
					pure[m] = p;
			order[n++] = p;
		}
		for (int i = 1; i < n; i++) /* insertion sort, best first */
			for (int j = i; j > 0 && figs[order[j]].throughput > figs[order[j - 1]].throughput;
			     j--) {
				int x = order[j];
				order[j] = order[j - 1];
				order[j - 1] = x;
			}
		const char *names[BENCH_MAX_SWEEPS], *values[BENCH_MAX_SWEEPS];
		point_values(cfg, order[0], names, values);
		if (cfg->nsweeps > 1) {
			printf("  at");
			for (int s = 0; s < cfg->nsweeps; s++)
				if (s != st)
					printf(" %s=%s", names[s], values[s]);
			printf(":\n");
		}
		printf("  %4s  %-10s %14s %10s %12s %12s\n", "rank", "cc-stages", "throughput/s",
		       "p50 (us)", "vs onesided", "vs rpc");
		for (int i = 0; i < n; i++) {
			const struct bench_figures *f = &figs[order[i]];
			point_values(cfg, order[i], names, values);
			printf("  %4d  %-10s %14.1f %10.1f", i + 1, values[st], f->throughput, f->p50);
			for (int m = 0; m < 2; m++) {
				double base = pure[m] >= 0 ? figs[pure[m]].throughput : NAN;
				if (isnan(base) || base <= 0)
					printf(" %12s", "-");
				else
					printf(" %+11.1f%%", 100.0 * (f->throughput / base - 1));
			}
			printf("\n");
		}
	}
	free(order);
}

int main(int argc, char **argv)
{
	struct bench_config cfg;
	struct bench_figures *figs = NULL;
	char err[1024];
	int ntargets = 1, status = 1;
	FILE *json = NULL;

	if (argc > 1 && strcmp(argv[1], "fabric") == 0)
		return bench_fabric_main(argc - 1, argv + 1);
	int rc = bench_config_parse(&cfg, argc, argv, err, sizeof(err));
	if (rc == 1)
		return 0;
	if (rc < 0) {
		fprintf(stderr, "rckv-bench: %s\n", err);
		return 2;
	}
	/* a server that goes away is an error reply on write, not a signal */
	signal(SIGPIPE, SIG_IGN);

	if (bench_target_open(&targets[0], cfg.host, cfg.port,
			      cfg.cluster_file[0] ? cfg.cluster_file : NULL, cfg.timeout_ms, err,
			      sizeof(err))) {
		fprintf(stderr, "rckv-bench: %s\n", err);
		return 1;
	}
	describe("A", &targets[0]);
	if (cfg.compare) {
		if (bench_target_open(&targets[1], cfg.compare_host, cfg.compare_port, NULL,
				      cfg.timeout_ms, err, sizeof(err))) {
			fprintf(stderr, "rckv-bench: --compare: %s\n", err);
			goto out;
		}
		ntargets = 2;
		describe("B", &targets[1]);
	}
	if (bench_config_is_txn(&cfg)) {
		/* the default runs as it is against whatever target is given */
		if (!cfg.nodes_per_txn_set) {
			cfg.nodes_per_txn = targets[0].map.nnodes >= 2 ? 2 : 1;
			fprintf(stderr, "A: --nodes-per-txn %d (the default for a target of %d node%s)\n",
				cfg.nodes_per_txn, targets[0].map.nnodes,
				targets[0].map.nnodes == 1 ? "" : "s");
		}
		for (int i = 0; i < ntargets; i++)
			if (!targets[i].is_rckv)
				fprintf(stderr, "%s: %s is a standalone server: %s runs there on "
						"one node (--nodes-per-txn does not apply)\n",
					i ? "B" : "A", targets[i].name, cfg.workload_name);
	}

	if (cfg.workload == BW_LOAD) {
		status = load(&cfg, &targets[0], "load", true) ? 1 : 0;
		goto out;
	}
	/* refuse an impossible point before spending time on loading */
	for (int i = 0; i < ntargets; i++)
		if (check_points(&cfg, &targets[i]))
			goto out;
	for (int i = 0; i < ntargets; i++) {
		const char *tag = i ? "B" : "A";
		int loaded = 0;
		if (bench_config_is_oltp(&cfg)) {
			if (load_oltp(&cfg, &targets[i], tag))
				goto out;
			continue;
		}
		if (cfg.load == BL_NEVER)
			continue;
		if (cfg.load == BL_AUTO) {
			loaded = bench_target_loaded(&targets[i], &cfg, err, sizeof(err));
			if (loaded < 0) {
				fprintf(stderr, "rckv-bench: %s\n", err);
				goto out;
			}
			if (loaded)
				fprintf(stderr, "%s: %s already holds the records (sampled)\n", tag,
					targets[i].name);
		}
		if (!loaded && load(&cfg, &targets[i], tag, false))
			goto out;
	}
	if (cfg.json_path[0]) {
		json = fopen(cfg.json_path, "w");
		if (!json) {
			perror(cfg.json_path);
			goto out;
		}
	}
	int npoints = 1;
	for (int s = 0; s < cfg.nsweeps; s++)
		npoints *= cfg.sweeps[s].nvalues;
	figs = calloc((size_t)npoints, sizeof(*figs));
	if (!figs) {
		fprintf(stderr, "rckv-bench: out of memory\n");
		goto out;
	}
	for (int p = 0; p < npoints; p++) {
		struct bench_config pc = cfg;
		const char *names[BENCH_MAX_SWEEPS], *values[BENCH_MAX_SWEEPS];

		point_values(&cfg, p, names, values);
		for (int s = 0; s < cfg.nsweeps; s++) {
			if (bench_config_set(&pc, names[s], values[s], err, sizeof(err))) {
				fprintf(stderr, "rckv-bench: --sweep: %s\n", err);
				goto out;
			}
		}
		if (run_point(&pc, ntargets, json, names, values, &figs[p]))
			goto out;
	}
	rank_stages(&cfg, figs, npoints);
	status = 0;
out:
	if (json && fclose(json) != 0) {
		perror(cfg.json_path);
		status = 1;
	}
	for (int i = 0; i < ntargets; i++)
		bench_target_close(&targets[i]);
	free(figs);
	return status;
}
