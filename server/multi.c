/*
 * multi.c: Redis transactions on rckv's serializable transactions.
 *
 * EXEC: the WATCHed versions and the queued commands are checked and run in
 * one transaction body. If a watched version changed, the body runs no
 * command and EXEC replies with a null array, as Redis does. A queued
 * command's own error (e.g. INCR of a non-number) is its element of the
 * array and does not undo the others, as in Redis; a CC abort reruns the
 * whole body, invisibly to the client.
 */
#include "server/multi.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cc/exec.h"
#include "cc/sched.h"
#include "cc/txn.h"
#include "server/acl.h"
#include "server/client.h"
#include "server/cmdstat.h"
#include "server/monitor.h"
#include "server/command.h"
#include "server/declare.h"
#include "server/dispatch.h"
#include "server/node.h"
#include "server/pubsub.h"
#include "server/worker.h"

int multi_queue(struct client *cl, const struct cmd_def *def, int argc,
		const struct resp_arg *argv)
{
	if (cl->mq_len == cl->mq_cap) {
		int cap = cl->mq_cap ? cl->mq_cap * 2 : 8;
		struct queued_cmd *p = realloc(cl->mq, (size_t)cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		cl->mq = p;
		cl->mq_cap = cap;
	}
	size_t bytes = (size_t)argc * sizeof(struct resp_arg);
	for (int i = 0; i < argc; i++)
		bytes += argv[i].len + 1;
	struct resp_arg *copy = malloc(bytes);
	if (!copy)
		return -ENOMEM;
	char *p = (char *)(copy + argc);
	for (int i = 0; i < argc; i++) {
		memcpy(p, argv[i].p, argv[i].len);
		p[argv[i].len] = '\0';
		copy[i].p = p;
		copy[i].len = argv[i].len;
		p += argv[i].len + 1;
	}
	cl->mq[cl->mq_len++] = (struct queued_cmd){ .def = def, .argc = argc, .argv = copy };
	return 0;
}

void client_discard_multi(struct client *cl)
{
	for (int i = 0; i < cl->mq_len; i++)
		free(cl->mq[i].argv);
	free(cl->mq);
	cl->mq = NULL;
	cl->mq_len = cl->mq_cap = 0;
	cl->flags &= ~(CL_MULTI | CL_DIRTY_EXEC);
}

void client_unwatch(struct client *cl)
{
	for (int i = 0; i < cl->nwatched; i++)
		free(cl->watched[i].key);
	free(cl->watched);
	cl->watched = NULL;
	cl->nwatched = cl->watched_cap = 0;
}

int cmd_multi(struct cmd_ctx *c)
{
	if (c->cl->flags & CL_MULTI) {
		resp_error(c->out, "ERR MULTI calls can not be nested");
		return 0;
	}
	c->cl->flags |= CL_MULTI;
	resp_status(c->out, "OK");
	return 0;
}

int cmd_discard(struct cmd_ctx *c)
{
	if (!(c->cl->flags & CL_MULTI)) {
		resp_error(c->out, "ERR DISCARD without MULTI");
		return 0;
	}
	client_discard_multi(c->cl);
	client_unwatch(c->cl);
	resp_status(c->out, "OK");
	return 0;
}

struct exec_run {
	struct cmd_ctx *c;
	size_t mark;
	bool watch_failed;
};

static int exec_body(struct txn *t, void *arg)
{
	struct exec_run *r = arg;
	struct cmd_ctx *c = r->c;
	struct client *cl = c->cl;
	c->out->len = r->mark;
	r->watch_failed = false;
	ps_defer_reset(cl); /* an aborted attempt's PUBLISHes */
	cl->txn_retries = txn_attempt(t);

	for (int i = 0; i < cl->nwatched; i++) {
		struct watched_key *wk = &cl->watched[i];
		uint64_t ver;
		int rc = txn_version(t, wk->key, wk->klen, &ver);
		if (rc == CC_ABORT)
			return rc;
		bool found = true;
		if (rc == CC_OK && wk->alive) { /* expired since WATCH: changed too */
			const char *v;
			size_t vlen;
			rc = txn_get(t, wk->key, wk->klen, &v, &vlen, &found);
			if (rc == CC_ABORT)
				return rc;
		}
		if (rc != CC_OK || ver != wk->ver || !found) {
			r->watch_failed = true;
			resp_null_array(c->out);
			return CC_OK;
		}
	}
	resp_array(c->out, cl->mq_len);
	for (int i = 0; i < cl->mq_len; i++) {
		struct queued_cmd *q = &cl->mq[i];
		struct cmd_ctx qc = { .node = c->node, .w = c->w, .cl = cl, .txn = t,
				      .argc = q->argc, .argv = q->argv, .out = c->out };
		/* Its user's rules may have changed since it was queued
		 * (server/acl.h); logged once, not per retried attempt. */
		if (acl_exec_refuse(c->w, cl, c->out, q->def, q->argc, q->argv,
				    txn_attempt(t) == 0))
			continue;
		int rc = srv_call(q->def, &qc);
		if (rc == CC_ABORT)
			return rc;
	}
	return CC_OK;
}

int cmd_exec(struct cmd_ctx *c)
{
	struct client *cl = c->cl;
	if (!(cl->flags & CL_MULTI)) {
		resp_error(c->out, "ERR EXEC without MULTI");
		return 0;
	}
	if (cl->flags & CL_DIRTY_EXEC) {
		resp_error(c->out, "EXECABORT Transaction discarded because of previous errors.");
		client_discard_multi(cl);
		client_unwatch(cl);
		return 0;
	}
	struct exec_run r = { .c = c, .mark = c->out->len };
	uint64_t t0 = sched_now_ns();
	/* The block's key set: the watched keys (read for their versions),
	 * then every queued command's. */
	struct srv_decl d;
	srv_decl_init(&d);
	for (int i = 0; i < cl->nwatched; i++)
		srv_decl_key(&d, cl->watched[i].key, cl->watched[i].klen, CC_KEY_READ);
	for (int i = 0; i < cl->mq_len; i++)
		srv_decl_command(&d, cl->mq[i].def, cl->mq[i].argc, cl->mq[i].argv);
	uint64_t changes = 0;
	const struct cc_txn tx = { .keys = d.keys, .nkeys = d.n, .body = exec_body, .arg = &r,
				   .changes = &changes };
	int rc = cc_run(c->w->ccw, &tx);
	srv_decl_free(&d);
	if (rc != 0) {
		c->out->len = r.mark;
		srv_reply_txn_failed(c->out, c->node, rc);
	} else if (r.watch_failed) {
		c->w->stats.txn_watch_failed++;
	} else {
		worker_add_dirty(c->w, changes); /* rdb_changes_since_last_save (save.c) */
		ps_defer_send(c->w, cl);
		/* commandstats: each queued command ran once, with its share of
		 * the block's time (EXEC's own line has all of it, as in Redis). */
		uint64_t share = cl->mq_len ? (sched_now_ns() - t0) / (uint64_t)cl->mq_len : 0;
		bool mon = monitor_on(c->node);
		for (int i = 0; i < cl->mq_len; i++) {
			cmdstat_call(c->w->cstat, cmd_id(cl->mq[i].def), share, false, false);
			if (mon) /* as Redis: the block's commands, then EXEC */
				monitor_feed(c->node, cl->w, cl->addr, cl->mq[i].def, cl->mq[i].argc,
					     cl->mq[i].argv);
		}
	}
	ps_defer_reset(cl);
	c->w->stats.commands += (uint64_t)cl->mq_len;
	client_discard_multi(cl);
	client_unwatch(cl);
	return 0;
}

struct watch_run {
	struct cmd_ctx *c;
	struct watched_key *w; /* per argument: ver, alive */
};

static int watch_body(struct txn *t, void *arg)
{
	struct watch_run *r = arg;
	for (int i = 1; i < r->c->argc; i++) {
		const struct resp_arg *k = &r->c->argv[i];
		const char *v;
		size_t vlen;
		int rc = txn_version(t, k->p, k->len, &r->w[i].ver);
		if (rc == CC_OK)
			rc = txn_get(t, k->p, k->len, &v, &vlen, &r->w[i].alive);
		if (rc == CC_ABORT)
			return rc;
		if (rc != CC_OK)
			r->w[i].ver = UINT64_MAX; /* unreadable now: EXEC will fail */
	}
	return CC_OK;
}

int cmd_watch(struct cmd_ctx *c)
{
	struct client *cl = c->cl;
	if (cl->flags & CL_MULTI) {
		resp_error(c->out, "ERR WATCH inside MULTI is not allowed");
		return 0;
	}
	struct watched_key stackv[16];
	struct watched_key *vers = c->argc <= 16 ? stackv
						: calloc((size_t)c->argc, sizeof(*vers));
	if (!vers) {
		resp_error(c->out, "ERR out of memory");
		return 0;
	}
	struct watch_run r = { .c = c, .w = vers };
	struct srv_decl d;
	srv_decl_init(&d);
	for (int i = 1; i < c->argc; i++)
		srv_decl_key(&d, c->argv[i].p, c->argv[i].len, CC_KEY_READ);
	const struct cc_txn tx = { .keys = d.keys, .nkeys = d.n, .body = watch_body, .arg = &r };
	int rc = cc_run(c->w->ccw, &tx);
	srv_decl_free(&d);
	if (rc != 0) {
		resp_errorf(c->out, "ERR WATCH failed: %s", cc_strerror(rc));
		goto out;
	}
	for (int i = 1; i < c->argc; i++) {
		bool dup = false;
		for (int j = 0; j < cl->nwatched && !dup; j++)
			dup = cl->watched[j].klen == c->argv[i].len &&
			      memcmp(cl->watched[j].key, c->argv[i].p, c->argv[i].len) == 0;
		if (dup)
			continue; /* Redis keeps the first WATCH of a key */
		if (cl->nwatched == cl->watched_cap) {
			int cap = cl->watched_cap ? cl->watched_cap * 2 : 4;
			struct watched_key *p = realloc(cl->watched, (size_t)cap * sizeof(*p));
			if (!p)
				break;
			cl->watched = p;
			cl->watched_cap = cap;
		}
		char *k = malloc(c->argv[i].len + 1);
		if (!k)
			break;
		memcpy(k, c->argv[i].p, c->argv[i].len);
		cl->watched[cl->nwatched++] = (struct watched_key){ .key = k,
								    .klen = c->argv[i].len,
								    .ver = vers[i].ver,
								    .alive = vers[i].alive };
	}
	resp_status(c->out, "OK");
out:
	if (vers != stackv)
		free(vers);
	return 0;
}

int cmd_unwatch(struct cmd_ctx *c)
{
	client_unwatch(c->cl);
	resp_status(c->out, "OK");
	return 0;
}
