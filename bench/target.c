/*
 * target.c: servers under test (target.h).
 */
#include "bench/target.h"

#include "bench/oltp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool is_loopback(const char *host)
{
	return !strcmp(host, "localhost") || !strncmp(host, "127.", 4) || !strcmp(host, "::1");
}

void bench_target_close(struct bench_target *t)
{
	for (int i = 0; i < t->nctl; i++)
		if (t->ctl[i])
			redisFree(t->ctl[i]);
	if (t->have_keyspace)
		bench_keyspace_free(&t->ks);
	bench_oltp_free(t);
	memset(t, 0, sizeof(*t));
}

/* The address to reach map node i: the cluster file's entry for its id
 * when there is one (the file says how this client reaches the node),
 * else what the node publishes. */
static void node_addr(const struct rckv_map *m, int i, const struct rckv_cluster_file *cf,
		      struct bench_addr *a)
{
	for (int k = 0; cf && k < cf->n; k++) {
		if (cf->nodes[k].id == m->nodes[i].id) {
			snprintf(a->host, sizeof(a->host), "%s", cf->nodes[k].host);
			a->port = cf->nodes[k].port;
			return;
		}
	}
	snprintf(a->host, sizeof(a->host), "%s", m->nodes[i].host);
	a->port = m->nodes[i].port;
}

int bench_target_open(struct bench_target *t, const char *host, int port,
		      const char *cluster_file, int timeout_ms, char *err, size_t errlen)
{
	struct rckv_cluster_file *cf = NULL;
	redisContext *c = NULL;
	char why[512] = "";
	int rc;

	memset(t, 0, sizeof(*t));
	t->timeout_ms = timeout_ms;
	if (cluster_file) {
		cf = malloc(sizeof(*cf));
		if (!cf) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		if (rckv_cluster_file_read(cluster_file, cf, why, sizeof(why))) {
			snprintf(err, errlen, "%s", why);
			goto fail;
		}
		snprintf(t->name, sizeof(t->name), "%s", cluster_file);
		/* any node will do to learn the map: the first that answers */
		rc = -1;
		for (int i = 0; i < cf->n && rc; i++) {
			c = rckv_connect(cf->nodes[i].host, cf->nodes[i].port, timeout_ms, why,
					 sizeof(why));
			if (!c)
				continue;
			rc = rckv_map_fetch(c, &t->map, why, sizeof(why));
			if (rc) {
				redisFree(c);
				c = NULL;
			}
		}
		if (rc) {
			snprintf(err, errlen, "%s: no node gave its slot map (last: %s)", cluster_file,
				 why);
			goto fail;
		}
		t->is_rckv = true;
	} else {
		snprintf(t->name, sizeof(t->name), "%s:%d", host, port);
		c = rckv_connect(host, port, timeout_ms, why, sizeof(why));
		if (!c) {
			snprintf(err, errlen, "%s", why);
			goto fail;
		}
		rc = rckv_map_fetch(c, &t->map, why, sizeof(why));
		if (rc == RCKV_ENOTRCKV) {
			t->is_rckv = false;
			rckv_map_single(&t->map, host, port);
		} else if (rc) {
			snprintf(err, errlen, "%s: %s", t->name, why);
			goto fail;
		} else {
			t->is_rckv = true;
		}
	}

	if (cluster_file) {
		t->naddrs = t->map.nnodes;
		for (int i = 0; i < t->map.nnodes; i++)
			node_addr(&t->map, i, cf, &t->addrs[i]);
	} else {
		t->naddrs = 1;
		snprintf(t->addrs[0].host, sizeof(t->addrs[0].host), "%s", host);
		t->addrs[0].port = port;
	}
	/* control: the contact node itself when it is the only node */
	if (!cluster_file && t->map.nnodes == 1) {
		t->nctl = 1;
		t->ctl_addrs[0] = t->addrs[0];
		t->ctl[0] = c;
		c = NULL;
	} else {
		t->nctl = t->map.nnodes;
		for (int i = 0; i < t->map.nnodes; i++) {
			node_addr(&t->map, i, cf, &t->ctl_addrs[i]);
			t->ctl[i] = rckv_connect(t->ctl_addrs[i].host, t->ctl_addrs[i].port,
						 timeout_ms, why, sizeof(why));
			if (!t->ctl[i]) {
				snprintf(err, errlen, "%s: node %d of the slot map: %s", t->name,
					 t->map.nodes[i].id, why);
				goto fail;
			}
		}
	}
	if (c)
		redisFree(c);
	c = NULL;
	struct bench_info info;
	if (bench_info_fetch(t->ctl[0], &info, why, sizeof(why))) {
		snprintf(err, errlen, "%s: %s", t->name, why);
		goto fail;
	}
	snprintf(t->version, sizeof(t->version), "%s", info.version);
	snprintf(t->cc, sizeof(t->cc), "%s", info.cc);
	free(cf);
	return 0;
fail:
	if (c)
		redisFree(c);
	free(cf);
	bench_target_close(t);
	return -1;
}

static int set_cc(struct bench_target *t, const char *cc, char *err, size_t errlen)
{
	redisReply *r = redisCommand(t->ctl[0], "CONFIG SET cc %s", cc);
	struct bench_info info;
	char why[256];

	if (!r) {
		snprintf(err, errlen, "%s: CONFIG SET cc %s: %s", t->name, cc, t->ctl[0]->errstr);
		return -1;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		snprintf(err, errlen, "%s: CONFIG SET cc %s: %s", t->name, cc, r->str);
		freeReplyObject(r);
		return -1;
	}
	freeReplyObject(r);
	/* the switch is cluster-wide; read back what is in force */
	if (bench_info_fetch(t->ctl[0], &info, why, sizeof(why)) == 0)
		snprintf(t->cc, sizeof(t->cc), "%s", info.cc);
	return 0;
}

/* CONFIG SET cc-stages, a bit code (config.h) said as the server's list. */
static int set_stages(struct bench_target *t, const char *modes, char *err, size_t errlen)
{
	char list[128];
	size_t n = strlen(modes);
	if (n == BENCH_STAGES && strspn(modes, "01") == n) {
		size_t at = 0;
		for (int s = 0; s < BENCH_STAGES; s++)
			at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%s=%s", s ? "," : "",
					       bench_stage_names[s],
					       modes[s] == '1' ? "rpc" : "onesided");
		modes = list;
	}
	redisReply *r = redisCommand(t->ctl[0], "CONFIG SET cc-stages %s", modes);
	if (!r || r->type == REDIS_REPLY_ERROR) {
		snprintf(err, errlen, "%s: CONFIG SET cc-stages %s: %s", t->name, modes,
			 r ? r->str : t->ctl[0]->errstr);
		if (r)
			freeReplyObject(r);
		return -1;
	}
	freeReplyObject(r);
	return 0;
}

int bench_target_prepare(struct bench_target *t, const struct bench_config *cfg, char *err,
			 size_t errlen)
{
	char why[512];
	int rc;

	if (cfg->cc[0] && t->is_rckv && strcmp(t->cc, cfg->cc) != 0 &&
	    set_cc(t, cfg->cc, err, errlen))
		return -1;
	/* cluster-wide and online, as cc; no quiesce, so set every time */
	if (cfg->cc_stages[0] && t->is_rckv && set_stages(t, cfg->cc_stages, err, errlen))
		return -1;
	if (t->have_keyspace) {
		bench_keyspace_free(&t->ks);
		t->have_keyspace = false;
	}
	/* inserts continue past earlier points' inserts rather than redo them */
	if (t->next_insert < cfg->records)
		t->next_insert = cfg->records;
	t->nodes_per_txn = cfg->nodes_per_txn;
	if (bench_config_is_txn(cfg)) {
		/* Redis is one node: the key chooser sees a one-node map, so
		 * ycsb-t and bank run there as plain standalone runs */
		if (!t->is_rckv)
			t->nodes_per_txn = 1;
		rc = bench_keyspace_build(&t->ks, &t->map, cfg->records, cfg->zipf, cfg->zipf_head);
		if (rc) {
			snprintf(err, errlen, "cannot build the keyspace: %s", rckv_strerror(rc));
			return -1;
		}
		t->have_keyspace = true;
		if (bench_keyspace_check(&t->ks, t->nodes_per_txn, cfg->ops, why, sizeof(why))) {
			snprintf(err, errlen, "%s: %s", t->name, why);
			return -1;
		}
	} else if (bench_config_is_oltp(cfg)) {
		if (bench_oltp_prepare(t, cfg, err, errlen))
			return -1;
	} else if (cfg->workload != BW_LOAD) {
		rc = bench_zipf_init(&t->zipf, cfg->records, cfg->zipf, cfg->zipf_head);
		if (rc) {
			snprintf(err, errlen, "bad Zipf parameters");
			return -1;
		}
	}
	return 0;
}

int bench_target_snapshot(struct bench_target *t, struct bench_info *sum, char *err,
			  size_t errlen)
{
	for (int i = 0; i < t->nctl; i++) {
		struct bench_info x;
		char why[256];

		if (bench_info_fetch(t->ctl[i], &x, why, sizeof(why))) {
			snprintf(err, errlen, "%s:%d: %s", t->ctl_addrs[i].host, t->ctl_addrs[i].port,
				 why);
			return -1;
		}
		if (!x.has_cpu && x.pid > 0 && is_loopback(t->ctl_addrs[i].host) &&
		    bench_proc_cpu(x.pid, &x.cpu_s) == 0)
			x.has_cpu = true;
		bench_info_add(sum, &x, i == 0);
	}
	return 0;
}

#define LOAD_SAMPLE 32

/* Whether r is a bank balance: a bulk string holding a decimal integer. */
static bool balance_of(const redisReply *r, long long *v)
{
	char buf[24], *end;

	if (r->type != REDIS_REPLY_STRING || r->len == 0 || r->len >= sizeof(buf))
		return false;
	memcpy(buf, r->str, r->len);
	buf[r->len] = '\0';
	errno = 0;
	*v = strtoll(buf, &end, 10);
	return errno == 0 && *end == '\0';
}

int bench_target_loaded(struct bench_target *t, const struct bench_config *cfg, char *err,
			size_t errlen)
{
	redisContext *c = t->ctl[0];
	struct bench_rng rng;
	char key[BENCH_KEY_LEN + 1];
	int n = cfg->records < LOAD_SAMPLE ? (int)cfg->records : LOAD_SAMPLE;
	int ok = 1;

	bool bank = cfg->workload == BW_BANK;
	const char *cmd = bank ? "GET" : "STRLEN";
	long long balance;

	bench_rng_seed(&rng, cfg->seed, 0x10ad);
	for (int i = 0; i < n; i++) {
		uint64_t id = i == 0 ? 0 : i == 1 ? cfg->records - 1
					: bench_rng_below(&rng, cfg->records);
		bench_key(key, id);
		redisAppendCommand(c, "%s %s", cmd, key);
	}
	for (int i = 0; i < n; i++) {
		redisReply *r = NULL;
		if (redisGetReply(c, (void **)&r) != REDIS_OK || !r) {
			snprintf(err, errlen, "%s: %s: %s", t->name, cmd, c->errstr);
			return -1;
		}
		if (r->type == REDIS_REPLY_ERROR) {
			snprintf(err, errlen, "%s: %s: %s", t->name, cmd, r->str);
			freeReplyObject(r);
			return -1;
		}
		if (bank ? !balance_of(r, &balance)
			 : r->type != REDIS_REPLY_INTEGER || r->integer != cfg->value_size)
			ok = 0;
		freeReplyObject(r);
	}
	return ok;
}

#define BANK_MGET 256     /* accounts per MGET */
#define BANK_IN_FLIGHT 16 /* MGETs in flight */

static void append_mget(redisContext *c, uint64_t first, uint64_t records)
{
	char keys[BANK_MGET][BENCH_KEY_LEN + 1];
	const char *argv[BANK_MGET + 1] = { "MGET" };
	size_t len[BANK_MGET + 1] = { 4 };
	int n = 0;

	for (uint64_t id = first; id < records && n < BANK_MGET; id++, n++) {
		bench_key(keys[n], id);
		argv[n + 1] = keys[n];
		len[n + 1] = BENCH_KEY_LEN;
	}
	redisAppendCommandArgv(c, n + 1, argv, len);
}

int bench_target_bank_total(struct bench_target *t, const struct bench_config *cfg,
			    long long *total, char *err, size_t errlen)
{
	redisContext *c = t->ctl[0];
	uint64_t nbatches = (cfg->records + BANK_MGET - 1) / BANK_MGET, sent = 0;

	*total = 0;
	for (uint64_t b = 0; b < nbatches; b++) {
		while (sent < nbatches && sent < b + BANK_IN_FLIGHT)
			append_mget(c, BANK_MGET * sent++, cfg->records);
		redisReply *r = NULL;
		if (redisGetReply(c, (void **)&r) != REDIS_OK || !r) {
			snprintf(err, errlen, "%s: MGET: %s", t->name, c->errstr);
			goto drain;
		}
		if (r->type != REDIS_REPLY_ARRAY) {
			snprintf(err, errlen, "%s: MGET: %s", t->name,
				 r->type == REDIS_REPLY_ERROR ? r->str : "not an array");
			freeReplyObject(r);
			goto drain;
		}
		for (size_t i = 0; i < r->elements; i++) {
			long long v;
			if (!balance_of(r->element[i], &v)) {
				char key[BENCH_KEY_LEN + 1];
				bench_key(key, BANK_MGET * b + i);
				snprintf(err, errlen, "%s: account %s holds no balance (load it with "
					 "--load always)", t->name, key);
				freeReplyObject(r);
				goto drain;
			}
			*total += v;
		}
		freeReplyObject(r);
		continue;
drain:
		/* the connection is reused for INFO: take the replies in flight */
		for (b++; b < sent; b++) {
			if (redisGetReply(c, (void **)&r) != REDIS_OK)
				break;
			freeReplyObject(r);
		}
		return -1;
	}
	return 0;
}
