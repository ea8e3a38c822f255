/*
 * oltp.c: what the OLTP workloads share (oltp.h): calls, loading, script
 * loading, reply classification, the checks and the per-type report.
 */
#include "bench/oltp.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/target.h"

/* The marker a complete load leaves; its value is the workload's
 * signature (setup). */
#define OLTP_MARKER "rckv-bench:oltp-loaded"
#define LOAD_BATCH 64      /* keys per MSET */
#define LOAD_IN_FLIGHT 8   /* MSETs in flight per connection */
#define LOAD_CONNS 8       /* connections, over the target's addresses: a
			    * server runs one connection's commands in order,
			    * so several keep every node's workers busy */
#define MGET_BATCH 512     /* keys per MGET in the checks */
#define MGET_IN_FLIGHT 8

struct bench_oltp {
	const struct bench_oltp_ops *ops;
	char sha[BENCH_OLTP_MAX_TYPES][41];
	char sig[512];
	int64_t base;     /* check_begin's figure */
	bool have_base;
	void *wl;         /* the workload's state: ops->state_size bytes */
};

const struct bench_oltp_ops *bench_oltp_of(const struct bench_config *cfg)
{
	switch (cfg->workload) {
	case BW_SMALLBANK:
		return &bench_smallbank;
	case BW_TPCC:
		return &bench_tpcc;
	case BW_TATP:
		return &bench_tatp;
	default:
		return NULL;
	}
}

/* --- calls ----------------------------------------------------------- */

static void vappend(struct bench_oltp_call *c, uint16_t *off, uint16_t *len, int *n, int max,
		    const char *fmt, va_list ap)
{
	int room = BENCH_OLTP_BUF - c->used;
	int k = *n < max ? vsnprintf(c->buf + c->used, (size_t)room, fmt, ap) : -1;

	if (k < 0 || k >= room) {
		/* a workload that outgrows its call is a bug, not a load */
		fprintf(stderr, "rckv-bench: internal error: a call outgrew %d entries or %d bytes\n",
			max, BENCH_OLTP_BUF);
		abort();
	}
	off[*n] = (uint16_t)c->used;
	len[*n] = (uint16_t)k;
	(*n)++;
	c->used += k;
}

void bench_oltp_key(struct bench_oltp_call *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vappend(c, c->koff, c->klen, &c->nkeys, BENCH_OLTP_MAX_KEYS, fmt, ap);
	va_end(ap);
}

void bench_oltp_arg(struct bench_oltp_call *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vappend(c, c->aoff, c->alen, &c->nargs, BENCH_OLTP_MAX_ARGS, fmt, ap);
	va_end(ap);
}

void bench_oltp_next(const struct bench_target *t, const struct bench_config *cfg,
		     struct bench_rng *rng, struct bench_oltp_call *call)
{
	const struct bench_oltp *o = t->oltp;
	int pick = (int)bench_rng_below(rng, 100), type = 0;

	for (int acc = 0; type < o->ops->ntypes - 1; type++) {
		acc += o->ops->mix[type];
		if (pick < acc)
			break;
	}
	call->type = type;
	call->nkeys = call->nargs = call->used = 0;
	o->ops->next(o->wl, cfg, rng, (long)time(NULL), call);
}

void bench_oltp_append(const struct bench_target *t, const struct bench_oltp_call *call,
		       redisContext *c, bool eval)
{
	const struct bench_oltp *o = t->oltp;
	const char *argv[3 + BENCH_OLTP_MAX_KEYS + BENCH_OLTP_MAX_ARGS];
	size_t len[3 + BENCH_OLTP_MAX_KEYS + BENCH_OLTP_MAX_ARGS];
	char nk[8];
	int n = 0;

	argv[n] = eval ? "EVAL" : "EVALSHA";
	len[n] = strlen(argv[n]);
	n++;
	argv[n] = eval ? o->ops->scripts[call->type] : o->sha[call->type];
	len[n] = strlen(argv[n]);
	n++;
	snprintf(nk, sizeof(nk), "%d", call->nkeys);
	argv[n] = nk;
	len[n++] = strlen(nk);
	for (int i = 0; i < call->nkeys; i++, n++) {
		argv[n] = call->buf + call->koff[i];
		len[n] = call->klen[i];
	}
	for (int i = 0; i < call->nargs; i++, n++) {
		argv[n] = call->buf + call->aoff[i];
		len[n] = call->alen[i];
	}
	redisAppendCommandArgv(c, n, argv, len);
}

enum bench_oltp_outcome bench_oltp_classify(const redisReply *r, int64_t *delta)
{
	*delta = 0;
	if (r->type == REDIS_REPLY_ERROR) {
		if (!strncmp(r->str, "NOSCRIPT", 8))
			return BO_NOSCRIPT;
		if (!strncmp(r->str, BENCH_OLTP_USER_ABORT, strlen(BENCH_OLTP_USER_ABORT)))
			return BO_USER_ABORT;
		return BO_ERROR;
	}
	if (r->type == REDIS_REPLY_INTEGER)
		*delta = r->integer;
	return BO_COMMIT;
}

/* --- loading --------------------------------------------------------- */

struct bench_oltp_loader {
	redisContext *c[LOAD_CONNS];
	int next;              /* the connection the next batch goes to */
	int n;                 /* keys queued in the batch */
	int in_flight[LOAD_CONNS]; /* MSETs sent, replies due */
	uint64_t keys;         /* keys loaded */
	char *kv[2 * LOAD_BATCH];
	size_t len[2 * LOAD_BATCH];
	char err[512];
};

static int loader_reply(struct bench_oltp_loader *l, int k)
{
	redisReply *r = NULL;

	if (redisGetReply(l->c[k], (void **)&r) != REDIS_OK || !r) {
		snprintf(l->err, sizeof(l->err), "MSET: %s", l->c[k]->errstr);
		return -1;
	}
	l->in_flight[k]--;
	if (r->type == REDIS_REPLY_ERROR) {
		snprintf(l->err, sizeof(l->err), "MSET: %s", r->str);
		freeReplyObject(r);
		return -1;
	}
	freeReplyObject(r);
	return 0;
}

static int loader_send(struct bench_oltp_loader *l)
{
	const char *argv[1 + 2 * LOAD_BATCH] = { "MSET" };
	size_t len[1 + 2 * LOAD_BATCH] = { 4 };

	if (!l->n)
		return 0;
	for (int i = 0; i < 2 * l->n; i++) {
		argv[1 + i] = l->kv[i];
		len[1 + i] = l->len[i];
	}
	int k = l->next;
	l->next = (l->next + 1) % LOAD_CONNS;
	redisAppendCommandArgv(l->c[k], 1 + 2 * l->n, argv, len);
	for (int i = 0; i < 2 * l->n; i++)
		free(l->kv[i]);
	l->keys += (uint64_t)l->n;
	l->n = 0;
	l->in_flight[k]++;
	/* redisGetReply writes what is queued before it waits */
	while (l->in_flight[k] >= LOAD_IN_FLIGHT)
		if (loader_reply(l, k))
			return -1;
	return 0;
}

int bench_oltp_put(struct bench_oltp_loader *l, const char *key, const char *val)
{
	if (l->err[0])
		return -1;
	l->kv[2 * l->n] = strdup(key);
	l->kv[2 * l->n + 1] = strdup(val);
	if (!l->kv[2 * l->n] || !l->kv[2 * l->n + 1]) {
		free(l->kv[2 * l->n]);
		free(l->kv[2 * l->n + 1]);
		snprintf(l->err, sizeof(l->err), "out of memory");
		return -1;
	}
	l->len[2 * l->n] = strlen(key);
	l->len[2 * l->n + 1] = strlen(val);
	l->n++;
	if (l->n == LOAD_BATCH)
		return loader_send(l);
	return 0;
}

int bench_oltp_putf(struct bench_oltp_loader *l, const char *val, const char *keyfmt, ...)
{
	char key[256];
	va_list ap;

	va_start(ap, keyfmt);
	vsnprintf(key, sizeof(key), keyfmt, ap);
	va_end(ap);
	return bench_oltp_put(l, key, val);
}

static int loader_finish(struct bench_oltp_loader *l)
{
	if (!l->err[0] && loader_send(l) == 0)
		for (int k = 0; k < LOAD_CONNS && !l->err[0]; k++)
			while (l->in_flight[k] > 0 && loader_reply(l, k) == 0)
				;
	for (int i = 0; i < 2 * l->n; i++)
		free(l->kv[i]);
	l->n = 0;
	return l->err[0] ? -1 : 0;
}

/* One command on a blocking connection, its reply checked for an error. */
static redisReply *command_ok(redisContext *c, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	redisReply *r = redisvCommand(c, fmt, ap);
	va_end(ap);
	if (!r) {
		snprintf(err, errlen, "%s", c->errstr);
		return NULL;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		snprintf(err, errlen, "%s", r->str);
		freeReplyObject(r);
		return NULL;
	}
	return r;
}

int bench_oltp_loaded(struct bench_target *t, const struct bench_config *cfg, char *err,
		      size_t errlen)
{
	struct bench_oltp *o = t->oltp;
	char why[512];
	(void)cfg;

	redisReply *r = command_ok(t->ctl[0], why, sizeof(why), "GET %s", OLTP_MARKER);
	if (!r) {
		snprintf(err, errlen, "%s: GET %s: %s", t->name, OLTP_MARKER, why);
		return -1;
	}
	int yes = r->type == REDIS_REPLY_STRING && !strcmp(r->str, o->sig);
	freeReplyObject(r);
	return yes;
}

int bench_oltp_load(struct bench_target *t, const struct bench_config *cfg, char *err,
		    size_t errlen)
{
	struct bench_oltp *o = t->oltp;
	struct bench_oltp_loader *l = calloc(1, sizeof(*l));
	char why[512];
	int rc = -1;

	if (!l) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int k = 0; k < LOAD_CONNS; k++) {
		const struct bench_addr *a = &t->addrs[k % t->naddrs];
		l->c[k] = rckv_connect(a->host, a->port, t->timeout_ms * 10, why, sizeof(why));
		if (!l->c[k]) {
			snprintf(err, errlen, "%s", why);
			goto out;
		}
	}
	/* a TPC-C database with orders past a fresh load's would break its
	 * own checks: a load starts from an empty store */
	redisReply *r = command_ok(l->c[0], why, sizeof(why), "FLUSHALL");
	if (!r) {
		snprintf(err, errlen, "%s: FLUSHALL: %s", t->name, why);
		goto out;
	}
	freeReplyObject(r);
	if (o->ops->load(o->wl, cfg, l, why, sizeof(why)) || loader_finish(l)) {
		snprintf(err, errlen, "%s: loading %s: %s", t->name, o->ops->name,
			 l->err[0] ? l->err : why);
		goto out;
	}
	r = command_ok(l->c[0], why, sizeof(why), "SET %s %s", OLTP_MARKER, o->sig);
	if (!r) {
		snprintf(err, errlen, "%s: SET %s: %s", t->name, OLTP_MARKER, why);
		goto out;
	}
	freeReplyObject(r);
	rc = 0;
out:
	loader_finish(l);
	for (int k = 0; k < LOAD_CONNS; k++)
		if (l->c[k])
			redisFree(l->c[k]);
	free(l);
	return rc;
}

/* --- reads for the checks --------------------------------------------- */

void bench_oltp_free_vals(char **vals, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(vals[i]);
		vals[i] = NULL;
	}
}

static void append_mget(redisContext *c, char **keys, size_t from, size_t n)
{
	const char *argv[1 + MGET_BATCH] = { "MGET" };
	size_t len[1 + MGET_BATCH] = { 4 };

	for (size_t i = 0; i < n; i++) {
		argv[1 + i] = keys[from + i];
		len[1 + i] = strlen(keys[from + i]);
	}
	redisAppendCommandArgv(c, (int)(1 + n), argv, len);
}

int bench_oltp_mget(redisContext *c, char **keys, size_t n, char **vals, char *err,
		    size_t errlen)
{
	size_t nb = (n + MGET_BATCH - 1) / MGET_BATCH, sent = 0, got = 0;
	int rc = 0;

	memset(vals, 0, n * sizeof(*vals));
	while (got < nb) {
		while (sent < nb && sent < got + MGET_IN_FLIGHT) {
			size_t from = sent * MGET_BATCH;
			append_mget(c, keys, from, n - from < MGET_BATCH ? n - from : MGET_BATCH);
			sent++;
		}
		redisReply *r = NULL;
		if (redisGetReply(c, (void **)&r) != REDIS_OK || !r) {
			snprintf(err, errlen, "MGET: %s", c->errstr);
			return -1; /* the connection is broken: nothing to drain */
		}
		size_t from = got++ * MGET_BATCH;
		if (rc == 0 && r->type != REDIS_REPLY_ARRAY) {
			snprintf(err, errlen, "MGET: %s",
				 r->type == REDIS_REPLY_ERROR ? r->str : "not an array");
			rc = -1;
		}
		for (size_t i = 0; rc == 0 && i < r->elements; i++) {
			const redisReply *e = r->element[i];
			if (e->type != REDIS_REPLY_STRING)
				continue;
			vals[from + i] = malloc(e->len + 1);
			if (!vals[from + i]) {
				snprintf(err, errlen, "out of memory");
				rc = -1;
				break;
			}
			memcpy(vals[from + i], e->str, e->len);
			vals[from + i][e->len] = '\0';
		}
		freeReplyObject(r);
	}
	if (rc)
		bench_oltp_free_vals(vals, n);
	return rc;
}

void bench_oltp_read_free(struct bench_oltp_read *rd)
{
	if (rd->vals)
		bench_oltp_free_vals(rd->vals, rd->n);
	for (size_t i = 0; rd->keys && i < rd->n; i++)
		free(rd->keys[i]);
	free(rd->keys);
	free(rd->vals);
	memset(rd, 0, sizeof(*rd));
}

int bench_oltp_read_named(redisContext *c, size_t n,
			  void (*name)(const void *st, size_t i, char *buf, size_t cap),
			  const void *st, struct bench_oltp_read *rd, char *err, size_t errlen)
{
	rd->n = n;
	rd->keys = calloc(n, sizeof(*rd->keys));
	rd->vals = calloc(n, sizeof(*rd->vals));
	for (size_t i = 0; rd->keys && i < n; i++) {
		rd->keys[i] = malloc(BENCH_OLTP_KEY_MAX);
		if (!rd->keys[i])
			break;
		name(st, i, rd->keys[i], BENCH_OLTP_KEY_MAX);
	}
	if (!rd->keys || !rd->vals || (n && !rd->keys[n - 1])) {
		snprintf(err, errlen, "out of memory");
		bench_oltp_read_free(rd);
		return -1;
	}
	if (bench_oltp_mget(c, rd->keys, n, rd->vals, err, errlen)) {
		bench_oltp_read_free(rd);
		return -1;
	}
	return 0;
}

/* --- per target -------------------------------------------------------- */

void bench_oltp_free(struct bench_target *t)
{
	struct bench_oltp *o = t->oltp;

	if (!o)
		return;
	free(o->wl);
	free(o);
	t->oltp = NULL;
}

/* SCRIPT LOAD of every script on node i; the first node's digests are
 * the ones EVALSHA sends (they are SHA-1s of the text: all nodes agree). */
static int load_scripts(struct bench_target *t, struct bench_oltp *o, int i, char *err,
			size_t errlen)
{
	for (int k = 0; k < o->ops->ntypes; k++) {
		char why[512];
		redisReply *r = command_ok(t->ctl[i], why, sizeof(why), "SCRIPT LOAD %s",
					   o->ops->scripts[k]);
		if (!r || r->type != REDIS_REPLY_STRING || r->len != 40) {
			snprintf(err, errlen, "%s:%d: SCRIPT LOAD (%s %s): %s%s", t->ctl_addrs[i].host,
				 t->ctl_addrs[i].port, o->ops->name, o->ops->type_names[k],
				 r ? "not a SHA-1" : why,
				 r ? "" : " (the target must run Lua scripts for this workload)");
			if (r)
				freeReplyObject(r);
			return -1;
		}
		if (i == 0)
			memcpy(o->sha[k], r->str, 41);
		freeReplyObject(r);
	}
	return 0;
}

int bench_oltp_prepare(struct bench_target *t, const struct bench_config *cfg, char *err,
		       size_t errlen)
{
	const struct bench_oltp_ops *ops = bench_oltp_of(cfg);
	struct bench_oltp *o = t->oltp;

	if (o && o->ops != ops)
		bench_oltp_free(t);
	if (!t->oltp) {
		o = calloc(1, sizeof(*o));
		if (!o || !(o->wl = calloc(1, ops->state_size))) {
			free(o);
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		o->ops = ops;
		t->oltp = o;
	}
	if (ops->setup(o->wl, cfg, &t->map, o->sig, sizeof(o->sig), err, errlen))
		return -1;
	for (int i = 0; i < t->nctl; i++)
		if (load_scripts(t, o, i, err, errlen))
			return -1;
	return 0;
}

/* --- checks ------------------------------------------------------------ */

int bench_oltp_check_begin(struct bench_target *t, const struct bench_config *cfg, char *err,
			   size_t errlen)
{
	struct bench_oltp *o = t->oltp;
	char why[512];

	o->have_base = false;
	if (!o->ops->check_begin)
		return 0;
	if (o->ops->check_begin(o->wl, cfg, t->ctl[0], &o->base, why, sizeof(why))) {
		snprintf(err, errlen, "%s: %s check: %s", t->name, o->ops->name, why);
		return -1;
	}
	o->have_base = true;
	return 0;
}

int bench_oltp_check_end(struct bench_target *t, const struct bench_config *cfg,
			 const struct bench_oltp_stats *s, FILE *out, char *err, size_t errlen)
{
	struct bench_oltp *o = t->oltp;
	char why[512];

	if (!o->ops->check_end) {
		fprintf(out, "%s: %s: no consistency check (%s)\n", o->ops->name, t->name,
			o->ops->check_desc);
		return 0;
	}
	fprintf(out, "%s: %s: checking %s\n", o->ops->name, t->name, o->ops->check_desc);
	int rc = o->ops->check_end(o->wl, cfg, t->ctl[0], o->base, s->delta, out, why,
				   sizeof(why));
	if (rc < 0)
		snprintf(err, errlen, "%s: %s check: %s", t->name, o->ops->name, why);
	else
		fprintf(out, "%s: %s: consistency check %s\n", o->ops->name, t->name,
			rc ? "FAILED" : "passed");
	fflush(out);
	return rc;
}

/* --- stats and report --------------------------------------------------- */

int bench_oltp_stats_init(struct bench_oltp_stats *s, int ntypes)
{
	memset(s, 0, sizeof(*s));
	for (int i = 0; i < ntypes; i++) {
		s->hist[i] = bench_hist_new();
		if (!s->hist[i]) {
			bench_oltp_stats_free(s);
			return -ENOMEM;
		}
	}
	return 0;
}

void bench_oltp_stats_free(struct bench_oltp_stats *s)
{
	for (int i = 0; i < BENCH_OLTP_MAX_TYPES; i++)
		free(s->hist[i]);
	memset(s, 0, sizeof(*s));
}

int bench_oltp_stats_merge(struct bench_oltp_stats *dst, const struct bench_oltp_stats *src)
{
	for (int i = 0; i < BENCH_OLTP_MAX_TYPES; i++) {
		dst->txns[i] += src->txns[i];
		dst->commits[i] += src->commits[i];
		dst->user_aborts[i] += src->user_aborts[i];
		dst->errors[i] += src->errors[i];
		if (!dst->first_error[i][0])
			memcpy(dst->first_error[i], src->first_error[i], sizeof(dst->first_error[i]));
		if (!src->hist[i])
			continue;
		if (!dst->hist[i] && !(dst->hist[i] = bench_hist_new()))
			return -ENOMEM;
		bench_hist_merge(dst->hist[i], src->hist[i]);
	}
	dst->delta += src->delta;
	dst->noscript += src->noscript;
	return 0;
}

void bench_oltp_report_table(FILE *out, const struct bench_oltp_ops *ops, const char *tag,
			     const struct bench_oltp_stats *s, double seconds)
{
	uint64_t all = 0;

	for (int i = 0; i < ops->ntypes; i++)
		all += s->txns[i];
	fprintf(out, "  per transaction%s%s:\n", tag ? " " : "", tag ? tag : "");
	fprintf(out, "    %-22s %6s %10s %10s %10s %10s %7s %10s %10s\n", "type", "share", "txns",
		"txn/s", "commits", "user-abort", "errors", "p50 (us)", "p99 (us)");
	for (int i = 0; i < ops->ntypes; i++) {
		const struct bench_hist *h = s->hist[i];
		fprintf(out, "    %-22s %5.1f%% %10llu %10.1f %10llu %10llu %7llu %10.1f %10.1f\n",
			ops->type_names[i], all ? 100.0 * (double)s->txns[i] / (double)all : 0.0,
			(unsigned long long)s->txns[i],
			seconds > 0 ? (double)s->txns[i] / seconds : 0.0,
			(unsigned long long)s->commits[i], (unsigned long long)s->user_aborts[i],
			(unsigned long long)s->errors[i],
			h ? (double)bench_hist_percentile(h, 50) / 1e3 : 0.0,
			h ? (double)bench_hist_percentile(h, 99) / 1e3 : 0.0);
	}
	if (s->noscript)
		fprintf(out, "    (%llu EVALSHA answered NOSCRIPT and ran again as EVAL)\n",
			(unsigned long long)s->noscript);
}

void bench_oltp_report_json(struct bench_json *j, const struct bench_oltp_ops *ops,
			    const struct bench_oltp_stats *s, double seconds)
{
	bench_json_obj(j, "transactions");
	for (int i = 0; i < ops->ntypes; i++) {
		const struct bench_hist *h = s->hist[i];
		bench_json_obj(j, ops->type_names[i]);
		bench_json_uint(j, "txns", s->txns[i]);
		bench_json_num(j, "throughput", seconds > 0 ? (double)s->txns[i] / seconds : 0.0);
		bench_json_uint(j, "commits", s->commits[i]);
		bench_json_uint(j, "user_aborts", s->user_aborts[i]);
		bench_json_uint(j, "errors", s->errors[i]);
		bench_json_num(j, "p50_us", h ? (double)bench_hist_percentile(h, 50) / 1e3 : 0.0);
		bench_json_num(j, "p99_us", h ? (double)bench_hist_percentile(h, 99) / 1e3 : 0.0);
		bench_json_str(j, "first_error", s->first_error[i][0] ? s->first_error[i] : NULL);
		bench_json_end_obj(j);
	}
	bench_json_end_obj(j);
	bench_json_int(j, "delta", s->delta);
	bench_json_uint(j, "noscript", s->noscript);
}
