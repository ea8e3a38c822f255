/*
 * info.c: INFO snapshots and their differences (info.h).
 */
#include "bench/info.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One "name:value" field as an unsigned counter. */
struct ufield {
	const char *name;
	size_t off;
	int group; /* 1: txn, 2: fabric */
};

#define UF(n, f, g) { n, offsetof(struct bench_info, f), g }
static const struct ufield ufields[] = {
	UF("txn_committed", txn_committed, 1),
	UF("txn_aborts", txn_aborts, 1),
	UF("txn_retries", txn_retries, 1),
	UF("txn_timeouts", txn_timeouts, 1),
	UF("fabric_txns", fab_txns, 2),
	UF("fabric_reads", fab_reads, 2),
	UF("fabric_writes", fab_writes, 2),
	UF("fabric_cas", fab_cas, 2),
	UF("fabric_faa", fab_faa, 2),
	UF("fabric_round_trips", fab_round_trips, 2),
	UF("fabric_rpcs", fab_rpcs, 0),
	UF("total_commands_processed", commands, 0),
};
#define NUFIELDS (sizeof(ufields) / sizeof(ufields[0]))

const char *const bench_stage_names[BENCH_STAGES] = { "read", "lock", "validate",
						    "log", "commit", "release" };

/* A cc_stage_<stage> line's totals (its "usec=", "verbs=" and "rpcs="
 * fields); returns the stage's bit, or 0 if it is none of ours. */
static unsigned parse_stage(const char *name, size_t nlen, const char *v, const char *eol,
			    struct bench_info *out)
{
	int s;
	for (s = 0; s < BENCH_STAGES; s++)
		if (strlen(bench_stage_names[s]) == nlen && memcmp(name, bench_stage_names[s], nlen) == 0)
			break;
	if (s == BENCH_STAGES)
		return 0;
	while (v < eol) {
		const char *comma = memchr(v, ',', (size_t)(eol - v));
		const char *fend = comma ? comma : eol;
		const char *eq = memchr(v, '=', (size_t)(fend - v));
		if (eq) {
			size_t kl = (size_t)(eq - v);
			uint64_t x = strtoull(eq + 1, NULL, 10);
			if (kl == 4 && memcmp(v, "usec", 4) == 0)
				out->stage_usec[s] = x;
			else if (kl == 5 && memcmp(v, "verbs", 5) == 0)
				out->stage_verbs[s] = x;
			else if (kl == 4 && memcmp(v, "rpcs", 4) == 0)
				out->stage_rpcs[s] = x;
		}
		v = fend + 1;
	}
	return 1u << s;
}

static void copy_str(char *dst, size_t cap, const char *v, size_t vlen)
{
	if (vlen >= cap)
		vlen = cap - 1;
	memcpy(dst, v, vlen);
	dst[vlen] = '\0';
}

void bench_info_parse(const char *text, size_t len, struct bench_info *out)
{
	const char *p = text, *end = text + len;
	int seen_txn = 0, seen_fab = 0, seen_cpu = 0;
	unsigned seen_stages = 0;
	double sys = 0, user = 0;

	memset(out, 0, sizeof(*out));
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			eol = end;
		const char *colon = memchr(p, ':', (size_t)(eol - p));
		size_t vlen;
		char val[64];

		if (!colon || *p == '#')
			goto next;
		vlen = (size_t)(eol - colon - 1);
		if (vlen && colon[vlen] == '\r')
			vlen--;
		copy_str(val, sizeof(val), colon + 1, vlen);
		size_t nlen = (size_t)(colon - p);
#define IS(s) (nlen == sizeof(s) - 1 && memcmp(p, s, nlen) == 0)
		if (IS("used_cpu_sys")) {
			sys = strtod(val, NULL);
			seen_cpu |= 1;
		} else if (IS("used_cpu_user")) {
			user = strtod(val, NULL);
			seen_cpu |= 2;
		} else if (IS("process_id")) {
			out->pid = strtol(val, NULL, 10);
		} else if (IS("redis_version")) {
			copy_str(out->version, sizeof(out->version), val, strlen(val));
		} else if (IS("server_name")) {
			copy_str(out->server, sizeof(out->server), val, strlen(val));
		} else if (IS("cc_protocol")) {
			copy_str(out->cc, sizeof(out->cc), val, strlen(val));
		} else if (IS("cc_stages")) {
			copy_str(out->stages, sizeof(out->stages), colon + 1, vlen);
		} else if (nlen > 9 && memcmp(p, "cc_stage_", 9) == 0) {
			seen_stages |= parse_stage(p + 9, nlen - 9, colon + 1, colon + 1 + vlen, out);
		} else {
			for (size_t i = 0; i < NUFIELDS; i++) {
				size_t l = strlen(ufields[i].name);
				if (nlen == l && memcmp(p, ufields[i].name, l) == 0) {
					*(uint64_t *)((char *)out + ufields[i].off) =
						strtoull(val, NULL, 10);
					if (ufields[i].group == 1)
						seen_txn++;
					else if (ufields[i].group == 2)
						seen_fab++;
					break;
				}
			}
		}
#undef IS
next:
		p = eol + 1;
	}
	out->has_txn = seen_txn >= 2; /* at least committed and aborts */
	out->has_stages = seen_stages == (1u << BENCH_STAGES) - 1;
	out->has_fabric = seen_fab >= 6;
	out->has_cpu = seen_cpu == 3;
	out->cpu_s = sys + user;
}

int bench_info_fetch(redisContext *c, struct bench_info *out, char *err, size_t errlen)
{
	redisReply *r = redisCommand(c, "INFO server stats cpu cc fabric");

	if (!r) {
		snprintf(err, errlen, "INFO: %s", c->errstr[0] ? c->errstr : "I/O error");
		return -1;
	}
	if (r->type != REDIS_REPLY_STRING) {
		snprintf(err, errlen, "INFO: %s",
			 r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply type");
		freeReplyObject(r);
		return -1;
	}
	bench_info_parse(r->str, r->len, out);
	freeReplyObject(r);
	return 0;
}

#define SUB(f) d->f = after->f >= before->f ? after->f - before->f : 0

void bench_info_delta(const struct bench_info *before, const struct bench_info *after,
		      struct bench_info *d)
{
	*d = *after;
	SUB(txn_committed);
	SUB(txn_aborts);
	SUB(txn_retries);
	SUB(txn_timeouts);
	SUB(fab_txns);
	SUB(fab_reads);
	SUB(fab_writes);
	SUB(fab_cas);
	SUB(fab_faa);
	SUB(fab_round_trips);
	SUB(fab_rpcs);
	SUB(commands);
	for (int s = 0; s < BENCH_STAGES; s++) {
		SUB(stage_usec[s]);
		SUB(stage_verbs[s]);
		SUB(stage_rpcs[s]);
	}
	d->has_stages = before->has_stages && after->has_stages;
	d->cpu_s = after->cpu_s - before->cpu_s;
	d->has_txn = before->has_txn && after->has_txn;
	d->has_fabric = before->has_fabric && after->has_fabric;
	d->has_cpu = before->has_cpu && after->has_cpu;
}

void bench_info_add(struct bench_info *acc, const struct bench_info *x, bool first)
{
	if (first) {
		*acc = *x;
		return;
	}
	acc->txn_committed += x->txn_committed;
	acc->txn_aborts += x->txn_aborts;
	acc->txn_retries += x->txn_retries;
	acc->txn_timeouts += x->txn_timeouts;
	acc->fab_txns += x->fab_txns;
	acc->fab_reads += x->fab_reads;
	acc->fab_writes += x->fab_writes;
	acc->fab_cas += x->fab_cas;
	acc->fab_faa += x->fab_faa;
	acc->fab_round_trips += x->fab_round_trips;
	acc->fab_rpcs += x->fab_rpcs;
	acc->commands += x->commands;
	for (int s = 0; s < BENCH_STAGES; s++) {
		acc->stage_usec[s] += x->stage_usec[s];
		acc->stage_verbs[s] += x->stage_verbs[s];
		acc->stage_rpcs[s] += x->stage_rpcs[s];
	}
	acc->has_stages = acc->has_stages && x->has_stages;
	acc->cpu_s += x->cpu_s;
	acc->has_txn = acc->has_txn && x->has_txn;
	acc->has_fabric = acc->has_fabric && x->has_fabric;
	acc->has_cpu = acc->has_cpu && x->has_cpu;
}

int bench_proc_cpu(long pid, double *seconds)
{
	char path[64], buf[1024];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* the command name may contain spaces and ')': fields start after the last ')' */
	char *p = strrchr(buf, ')');
	if (!p)
		return -EINVAL;
	unsigned long utime = 0, stime = 0;
	/* after ')': state(3) ... utime is field 14, stime 15 */
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) !=
	    2)
		return -EINVAL;
	long hz = sysconf(_SC_CLK_TCK);
	*seconds = (double)(utime + stime) / (double)(hz > 0 ? hz : 100);
	return 0;
}
