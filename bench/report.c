/*
 * report.c: figures, table and JSON (report.h).
 */
#include "bench/report.h"

#include <math.h>
#include <string.h>

void bench_figures(const struct bench_config *cfg, const struct bench_result *r,
		   struct bench_figures *f)
{
	const struct bench_info *i = &r->info;
	bool txn = bench_config_is_txn(cfg);
	bool oltp = bench_config_is_oltp(cfg);

	f->throughput = r->seconds > 0 ? (double)r->ops / r->seconds : NAN;
	f->p50 = (double)bench_hist_percentile(r->hist, 50) / 1e3;
	f->p90 = (double)bench_hist_percentile(r->hist, 90) / 1e3;
	f->p99 = (double)bench_hist_percentile(r->hist, 99) / 1e3;
	f->p999 = (double)bench_hist_percentile(r->hist, 99.9) / 1e3;
	f->max = (double)r->hist->max / 1e3;
	f->min = r->hist->count ? (double)r->hist->min / 1e3 : 0;
	f->mean = bench_hist_mean(r->hist) / 1e3;
	if (r->have_info && i->has_txn) {
		f->commits_from_info = true;
		f->commits = (double)i->txn_committed;
		f->aborts = (double)i->txn_aborts;
		f->retries = (double)i->txn_retries;
	} else if (oltp) {
		/* a user abort is the workload's own outcome, not a CC abort */
		f->commits_from_info = false;
		f->commits = (double)(r->ops - r->errors - r->user_aborts);
		f->aborts = (double)r->errors;
		f->retries = NAN;
	} else {
		f->commits_from_info = false;
		f->commits = (double)(r->ops - (txn ? r->failed : r->errors));
		f->aborts = txn ? (double)r->failed : 0;
		f->retries = NAN;
	}
	f->abort_rate = f->commits + f->aborts > 0 ? f->aborts / (f->commits + f->aborts) : 0;
	if (r->have_info && i->has_fabric && i->fab_txns) {
		f->verbs_per_txn = (double)bench_info_verbs(i) / (double)i->fab_txns;
		f->round_trips_per_txn = (double)i->fab_round_trips / (double)i->fab_txns;
		f->rpcs_per_txn = (double)i->fab_rpcs / (double)i->fab_txns;
	} else {
		f->verbs_per_txn = NAN;
		f->round_trips_per_txn = NAN;
		f->rpcs_per_txn = NAN;
	}
	const bool stages = r->have_info && i->has_stages && i->txn_committed;
	for (int s = 0; s < BENCH_STAGES; s++) {
		double n = stages ? (double)i->txn_committed : NAN;
		f->stage_us[s] = (double)i->stage_usec[s] / n;
		f->stage_verbs[s] = (double)i->stage_verbs[s] / n;
		f->stage_rpcs[s] = (double)i->stage_rpcs[s] / n;
	}
	if (r->have_info && i->has_cpu) {
		f->cpu_s = i->cpu_s;
		f->cpu_percent = r->seconds > 0 ? 100.0 * i->cpu_s / r->seconds : NAN;
	} else {
		f->cpu_s = NAN;
		f->cpu_percent = NAN;
	}
}

static const char *unit(const struct bench_config *cfg)
{
	if (cfg->workload == BW_LOAD)
		return "mset";
	return bench_config_is_txn(cfg) || bench_config_is_oltp(cfg) ? "txn" : "op";
}

static void server_desc(const struct bench_target *t, char *buf, size_t cap)
{
	if (t->is_rckv)
		snprintf(buf, cap, "rckv %s, cc %s, %d node%s", t->version, t->cc, t->map.nnodes,
			 t->map.nnodes == 1 ? "" : "s");
	else
		snprintf(buf, cap, "redis %s", t->version);
}

static void cell(char *buf, size_t cap, double v, int decimals)
{
	if (isnan(v))
		snprintf(buf, cap, "-");
	else
		snprintf(buf, cap, "%.*f", decimals, v);
}

static void row(FILE *out, const char *name, double a, double b, bool two, int decimals,
		bool ratio)
{
	char ca[32], cb[32], cr[32];

	cell(ca, sizeof(ca), a, decimals);
	if (!two) {
		fprintf(out, "  %-24s %18s\n", name, ca);
		return;
	}
	cell(cb, sizeof(cb), b, decimals);
	if (ratio && !isnan(a) && !isnan(b) && b != 0)
		snprintf(cr, sizeof(cr), "%.2f", a / b);
	else
		snprintf(cr, sizeof(cr), "-");
	fprintf(out, "  %-24s %18s %18s %8s\n", name, ca, cb, cr);
}

static void srow(FILE *out, const char *name, const char *a, const char *b, bool two)
{
	if (two)
		fprintf(out, "  %-24s %18s %18s\n", name, a, b);
	else
		fprintf(out, "  %-24s %18s\n", name, a);
}

void bench_report_table(FILE *out, const struct bench_config *cfg, const struct bench_target *ta,
			const struct bench_result *ra, const struct bench_target *tb,
			const struct bench_result *rb)
{
	struct bench_figures fa, fb;
	bool two = tb && rb;
	char sa[96], sb[96], name[64];

	bench_figures(cfg, ra, &fa);
	if (two)
		bench_figures(cfg, rb, &fb);
	else
		memset(&fb, 0, sizeof(fb));

	if (cfg->workload == BW_LOAD) {
		fprintf(out, "load: %llu keys of %d bytes, MSET of %d keys, %d thread%s x %d connection%s x pipeline %d\n",
			(unsigned long long)cfg->records, cfg->value_size, cfg->batch, cfg->threads,
			cfg->threads == 1 ? "" : "s", cfg->clients, cfg->clients == 1 ? "" : "s",
			cfg->load_pipeline);
	} else if (bench_config_is_oltp(cfg)) {
		fprintf(out, "%s: ", cfg->workload_name);
		if (cfg->workload == BW_SMALLBANK)
			fprintf(out, "%llu accounts, hot %llu (%g%% of picks), ",
				(unsigned long long)cfg->accounts,
				(unsigned long long)(cfg->hot_accounts ? cfg->hot_accounts
								       : (cfg->accounts * 4 + 99) / 100),
				cfg->hot_pct);
		else if (cfg->workload == BW_TPCC)
			fprintf(out, "%d warehouse%s, %d items, %d customers per district, ",
				cfg->warehouses, cfg->warehouses == 1 ? "" : "s", cfg->items,
				cfg->customers);
		else
			fprintf(out, "%llu subscribers, ", (unsigned long long)cfg->subscribers);
		fprintf(out, "%d thread%s x %d connection%s x pipeline %d, seed %llu\n", cfg->threads,
			cfg->threads == 1 ? "" : "s", cfg->clients, cfg->clients == 1 ? "" : "s",
			cfg->pipeline, (unsigned long long)cfg->seed);
	} else {
		fprintf(out, "%s: ", cfg->workload_name);
		if (bench_config_is_txn(cfg))
			fprintf(out, "%d ops/txn, write ratio %g, ", cfg->ops, cfg->write_ratio);
		fprintf(out, "zipf %g, %llu records x %d B, %d thread%s x %d connection%s x pipeline %d, seed %llu\n",
			cfg->zipf, (unsigned long long)cfg->records, cfg->value_size, cfg->threads,
			cfg->threads == 1 ? "" : "s", cfg->clients, cfg->clients == 1 ? "" : "s",
			cfg->pipeline, (unsigned long long)cfg->seed);
	}
	server_desc(ta, sa, sizeof(sa));
	fprintf(out, "  %s%s (%s)\n", two ? "A = " : "", ta->name, sa);
	if (two) {
		server_desc(tb, sb, sizeof(sb));
		fprintf(out, "  B = %s (%s)\n", tb->name, sb);
		fprintf(out, "  %-24s %18s %18s %8s\n", "", "A", "B", "A/B");
	}
	if (bench_config_is_txn(cfg)) {
		char na[16], nb[16] = "";
		snprintf(na, sizeof(na), "%d", ta->nodes_per_txn);
		if (two)
			snprintf(nb, sizeof(nb), "%d", tb->nodes_per_txn);
		srow(out, "nodes per txn (as run)", na, nb, two);
	}
	row(out, "measured seconds", ra->seconds, two ? rb->seconds : 0, two, 1, true);
	snprintf(name, sizeof(name), "%ss", unit(cfg));
	row(out, name, (double)ra->ops, two ? (double)rb->ops : 0, two, 0, true);
	snprintf(name, sizeof(name), "throughput (%s/s)", unit(cfg));
	row(out, name, fa.throughput, fb.throughput, two, 1, true);
	if (cfg->workload == BW_LOAD)
		row(out, "keys/s", ra->seconds > 0 ? (double)ra->keys / ra->seconds : NAN,
		    NAN, false, 0, false);
	row(out, "latency p50 (us)", fa.p50, fb.p50, two, 1, true);
	row(out, "latency p90 (us)", fa.p90, fb.p90, two, 1, true);
	row(out, "latency p99 (us)", fa.p99, fb.p99, two, 1, true);
	row(out, "latency p99.9 (us)", fa.p999, fb.p999, two, 1, true);
	row(out, "latency max (us)", fa.max, fb.max, two, 1, true);
	if (cfg->workload != BW_LOAD) {
		row(out, fa.commits_from_info ? "commits (INFO)" : "commits (client)", fa.commits,
		    fb.commits, two, 0, true);
		row(out, "aborts", fa.aborts, fb.aborts, two, 0, true);
		row(out, "abort rate (%)", 100 * fa.abort_rate, 100 * fb.abort_rate, two, 2, true);
		row(out, "retries", fa.retries, fb.retries, two, 0, true);
		if (bench_config_is_txn(cfg))
			row(out, "failed EXEC (client)", (double)ra->failed,
			    two ? (double)rb->failed : 0, two, 0, true);
		if (bench_config_is_oltp(cfg))
			row(out, "user aborts (client)", (double)ra->user_aborts,
			    two ? (double)rb->user_aborts : 0, two, 0, true);
		row(out, "error replies", (double)ra->errors, two ? (double)rb->errors : 0, two, 0,
		    true);
		row(out, "verbs per txn", fa.verbs_per_txn, fb.verbs_per_txn, two, 2, true);
		row(out, "round trips per txn", fa.round_trips_per_txn, fb.round_trips_per_txn, two,
		    2, true);
		row(out, "RPCs per txn", fa.rpcs_per_txn, fb.rpcs_per_txn, two, 2, true);
		if (ra->have_info && ra->info.has_stages) {
			fprintf(out, "  stages (A): %s\n", ra->info.stages);
			if (two && rb->have_info && rb->info.has_stages)
				fprintf(out, "  stages (B): %s\n", rb->info.stages);
			for (int s = 0; s < BENCH_STAGES; s++) {
				snprintf(name, sizeof(name), "%s: us per txn", bench_stage_names[s]);
				row(out, name, fa.stage_us[s], fb.stage_us[s], two, 1, true);
				/* ops: one-sided verbs and RPCs */
				snprintf(name, sizeof(name), "%s: ops per txn", bench_stage_names[s]);
				row(out, name, fa.stage_verbs[s] + fa.stage_rpcs[s],
				    fb.stage_verbs[s] + fb.stage_rpcs[s], two, 2, true);
			}
		}
	}
	row(out, "server CPU (s)", fa.cpu_s, fb.cpu_s, two, 2, true);
	row(out, "server CPU (% of a core)", fa.cpu_percent, fb.cpu_percent, two, 1, true);
	const struct bench_oltp_ops *ops = bench_oltp_of(cfg);
	if (ops) {
		bench_oltp_report_table(out, ops, two ? "(A)" : NULL, &ra->oltp, ra->seconds);
		if (two)
			bench_oltp_report_table(out, ops, "(B)", &rb->oltp, rb->seconds);
	}
	if (ra->first_error[0])
		fprintf(out, "  first error (A): %s\n", ra->first_error);
	if (two && rb->first_error[0])
		fprintf(out, "  first error (B): %s\n", rb->first_error);
	if (cfg->workload != BW_LOAD && (!fa.commits_from_info || (two && !fb.commits_from_info)))
		fprintf(out, "  (commits (client): counted by rckv-bench where the server has no "
			     "transaction counters)\n");
}

static void figures_json(struct bench_json *j, const struct bench_config *cfg,
			 const struct bench_target *t, const struct bench_result *r)
{
	struct bench_figures f;

	bench_figures(cfg, r, &f);
	bench_json_obj(j, "target");
	bench_json_str(j, "name", t->name);
	bench_json_str(j, "kind", bench_target_kind(t));
	bench_json_str(j, "version", t->version);
	bench_json_str(j, "cc", t->is_rckv ? t->cc : NULL);
	bench_json_int(j, "nodes", t->map.nnodes);
	bench_json_bool(j, "standalone", !t->is_rckv);
	bench_json_end_obj(j);
	/* the series a plot draws this result in */
	bench_json_str(j, "protocol", t->is_rckv ? t->cc : "redis");
	bench_json_str(j, "unit", unit(cfg));
	if (bench_config_is_txn(cfg))
		bench_json_int(j, "nodes_per_txn", t->nodes_per_txn);
	bench_json_num(j, "seconds", r->seconds);
	bench_json_uint(j, "operations", r->ops);
	bench_json_num(j, "throughput", f.throughput);
	bench_json_obj(j, "latency_us");
	bench_json_num(j, "p50", f.p50);
	bench_json_num(j, "p90", f.p90);
	bench_json_num(j, "p99", f.p99);
	bench_json_num(j, "p999", f.p999);
	bench_json_num(j, "max", f.max);
	bench_json_num(j, "min", f.min);
	bench_json_num(j, "mean", f.mean);
	bench_json_uint(j, "count", r->hist->count);
	bench_json_end_obj(j);
	bench_json_num(j, "commits", f.commits);
	bench_json_num(j, "aborts", f.aborts);
	bench_json_str(j, "commits_source", f.commits_from_info ? "info" : "client");
	bench_json_num(j, "abort_rate", f.abort_rate);
	bench_json_num(j, "retries", f.retries);
	bench_json_uint(j, "failed", r->failed);
	bench_json_uint(j, "errors", r->errors);
	if (bench_config_is_oltp(cfg))
		bench_json_uint(j, "user_aborts", r->user_aborts);
	bench_json_str(j, "first_error", r->first_error[0] ? r->first_error : NULL);
	bench_json_num(j, "verbs_per_txn", f.verbs_per_txn);
	bench_json_num(j, "round_trips_per_txn", f.round_trips_per_txn);
	bench_json_num(j, "rpcs_per_txn", f.rpcs_per_txn);
	if (r->have_info && r->info.has_stages) {
		bench_json_str(j, "cc_stages", r->info.stages);
		bench_json_obj(j, "stages");
		for (int s = 0; s < BENCH_STAGES; s++) {
			bench_json_obj(j, bench_stage_names[s]);
			bench_json_num(j, "usec_per_txn", f.stage_us[s]);
			bench_json_num(j, "verbs_per_txn", f.stage_verbs[s]);
			bench_json_num(j, "rpcs_per_txn", f.stage_rpcs[s]);
			bench_json_end_obj(j);
		}
		bench_json_end_obj(j);
	}
	bench_json_obj(j, "server_cpu");
	bench_json_num(j, "seconds", f.cpu_s);
	bench_json_num(j, "percent", f.cpu_percent);
	bench_json_end_obj(j);
	if (bench_oltp_of(cfg))
		bench_oltp_report_json(j, bench_oltp_of(cfg), &r->oltp, r->seconds);
	bench_json_obj(j, "mix");
	bench_json_uint(j, "reads", r->reads);
	bench_json_uint(j, "updates", r->updates);
	bench_json_uint(j, "inserts", r->inserts);
	bench_json_uint(j, "scans", r->scans);
	bench_json_uint(j, "read_modify_writes", r->rmws);
	bench_json_uint(j, "scripts", r->scripts);
	bench_json_end_obj(j);
	if (cfg->workload == BW_LOAD)
		bench_json_uint(j, "keys", r->keys);
	bench_json_int(j, "runs", r->runs);
}

static void ratio(struct bench_json *j, const char *key, double a, double b)
{
	bench_json_num(j, key, !isnan(a) && !isnan(b) && b != 0 ? a / b : NAN);
}

void bench_report_json(FILE *out, bool pretty, const struct bench_config *cfg,
		       const struct bench_target *ta, const struct bench_result *ra,
		       const struct bench_target *tb, const struct bench_result *rb,
		       const char *const *point_names, const char *const *point_values,
		       int npoint)
{
	struct bench_json j;

	bench_json_init(&j, out, pretty);
	bench_json_obj(&j, NULL);
	bench_config_json(cfg, &j, "config");
	if (npoint) {
		bench_json_obj(&j, "sweep");
		for (int i = 0; i < npoint; i++)
			bench_json_str(&j, point_names[i], point_values[i]);
		bench_json_end_obj(&j);
	}
	figures_json(&j, cfg, ta, ra);
	if (tb && rb) {
		struct bench_figures fa, fb;
		bench_figures(cfg, ra, &fa);
		bench_figures(cfg, rb, &fb);
		bench_json_obj(&j, "compare");
		figures_json(&j, cfg, tb, rb);
		bench_json_end_obj(&j);
		bench_json_obj(&j, "ratio");
		ratio(&j, "throughput", fa.throughput, fb.throughput);
		ratio(&j, "p50", fa.p50, fb.p50);
		ratio(&j, "p90", fa.p90, fb.p90);
		ratio(&j, "p99", fa.p99, fb.p99);
		ratio(&j, "p999", fa.p999, fb.p999);
		ratio(&j, "max", fa.max, fb.max);
		ratio(&j, "commits", fa.commits, fb.commits);
		ratio(&j, "verbs_per_txn", fa.verbs_per_txn, fb.verbs_per_txn);
		ratio(&j, "round_trips_per_txn", fa.round_trips_per_txn, fb.round_trips_per_txn);
		ratio(&j, "server_cpu_seconds", fa.cpu_s, fb.cpu_s);
		bench_json_end_obj(&j);
	}
	bench_json_end_obj(&j);
	if (!pretty)
		fputc('\n', out);
}
