/*
 * dispatch.c: the path of every request, in Redis 7.0's order: command
 * lookup (unknown command), subcommand lookup, arity, authentication, then
 * either MULTI queueing or execution. A data command runs as its own
 * transaction through the executor; its reply goes straight into the
 * client's output buffer and is cut back if the attempt aborts.
 */
#include "server/dispatch.h"

#include <ck_pr.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cc/cc.h"
#include "cc/exec.h"
#include "cc/sched.h"
#include "cc/txn.h"
#include "server/acl.h"
#include "server/client.h"
#include "server/cmdstat.h"
#include "server/command.h"
#include "server/client_ctl.h"
#include "server/declare.h"
#include "server/membership.h"
#include "server/memory.h"
#include "server/latency.h"
#include "server/monitor.h"
#include "server/multi.h"
#include "server/node.h"
#include "server/notify.h"
#include "server/pubsub.h"
#include "server/slowlog.h"
#include "server/worker.h"

/* Redis's rejectCommandFormat: the message may quote client bytes, which
 * must not break the reply line. */
static void reply_error_sanitized(struct resp_w *out, const char *msg)
{
	char buf[1024];
	size_t n = strlen(msg);
	if (n >= sizeof(buf))
		n = sizeof(buf) - 1;
	for (size_t i = 0; i < n; i++)
		buf[i] = (msg[i] == '\r' || msg[i] == '\n') ? ' ' : msg[i];
	buf[n] = '\0';
	resp_error(out, buf);
}

static void reply_unknown_command(struct resp_w *out, int argc, struct resp_arg *argv)
{
	char args[512];
	size_t len = 0;
	args[0] = '\0';
	for (int i = 1; i < argc && len < 128; i++) {
		int room = 128 - (int)len;
		int m = snprintf(args + len, sizeof(args) - len, "'%.*s' ",
				 (int)(argv[i].len < (size_t)room ? argv[i].len : (size_t)room),
				 argv[i].p);
		if (m > 0)
			len += (size_t)m;
	}
	char msg[800];
	snprintf(msg, sizeof(msg), "ERR unknown command '%.128s', with args beginning with: %s",
		 argv[0].p, args);
	reply_error_sanitized(out, msg);
}

static bool arity_ok(int arity, int argc)
{
	return arity > 0 ? argc == arity : argc >= -arity;
}

const struct cmd_def *srv_resolve(struct client *cl, struct resp_w *out, const struct cmd_def *def,
				  int argc, struct resp_arg *argv, bool *dirty)
{
	(void)cl;
	*dirty = true;
	if (!def) {
		reply_unknown_command(out, argc, argv);
		return NULL;
	}
	if (def->subcommands && argc >= 2) {
		const struct cmd_def *sub = cmd_lookup_sub(def, argv[1].p, argv[1].len);
		if (!sub) {
			char up[64];
			size_t i;
			for (i = 0; def->name[i] && i < sizeof(up) - 1; i++)
				up[i] = (char)toupper((unsigned char)def->name[i]);
			up[i] = '\0';
			char msg[400];
			snprintf(msg, sizeof(msg), "ERR unknown subcommand '%.128s'. Try %s HELP.",
				 argv[1].p, up);
			reply_error_sanitized(out, msg);
			return NULL;
		}
		def = sub;
	}
	if (!arity_ok(def->arity, argc)) {
		resp_errorf(out, "ERR wrong number of arguments for '%s' command", def->name);
		return NULL;
	}
	if (cmd_reserved_key(def, argc, argv)) {
		resp_error(out, CMD_RESERVED_KEY_ERR);
		return NULL;
	}
	*dirty = false;
	return def;
}

void srv_reply_txn_failed(struct resp_w *out, struct node *n, int rc)
{
	if (rc == CC_ENOTSERVING && n->membership) {
		char why[256];
		mb_refusal(n->membership, why, sizeof(why));
		resp_errorf(out, "%s", why);
	} else if (rc == CC_ETIMEOUT)
		resp_errorf(out, "ERR transaction aborted: %s (txn-timeout %lld ms); nothing was "
			    "written", cc_strerror(rc), n->cfg.txn_timeout_ms);
	else if (rc == CC_EUNKNOWN)
		resp_error(out, "ERR transaction outcome unknown: a node failed while it committed; "
			   "it took effect either whole or not at all");
	else
		resp_errorf(out, "ERR transaction aborted: %s; nothing was written",
			    rc == CC_EFAB ? "a node did not answer on the fabric" : cc_strerror(rc));
}

int srv_call(const struct cmd_def *def, struct cmd_ctx *ctx)
{
	if (!ctx->txn)
		return def->fn(ctx);
	/* A command that replies with an error after some of its writes
	 * (e.g. MSET on a full MemStore) must leave nothing of them. */
	struct txn_savepoint sp = txn_savepoint(ctx->txn);
	size_t psq = ctx->cl ? ctx->cl->psq.len : 0; /* its PUBLISHes too (ps_defer) */
	struct notify_pre np;
	notify_pre(ctx, def, &np); /* keyspace notifications: server/notify.h */
	ctx->failed = false;
	int rc = def->fn(ctx);
	if (rc == CC_OK && ctx->failed) {
		txn_rollback(ctx->txn, sp);
		if (ctx->cl)
			ctx->cl->psq.len = psq;
	} else if (rc == CC_OK) {
		notify_post(ctx, def, &np);
	}
	return rc;
}

/* Redis's execCommandAbort: an EXEC that is itself rejected (wrong arity)
 * discards the transaction and says why. The reason is the error just
 * written at `mark`, without its "-ERR " and line end. */
static void exec_abort(struct client *cl, struct resp_w *out, size_t mark)
{
	char reason[512];
	size_t len = out->len - mark;
	const char *p = out->p + mark;
	if (len >= 2)
		len -= 2; /* \r\n */
	if (len && *p == '-') {
		p++;
		len--;
	}
	if (len >= 4 && memcmp(p, "ERR ", 4) == 0) {
		p += 4;
		len -= 4;
	}
	if (len >= sizeof(reason))
		len = sizeof(reason) - 1;
	memcpy(reason, p, len);
	reason[len] = '\0';
	out->len = mark;
	resp_errorf(out, "EXECABORT Transaction discarded because of: %s", reason);
	client_discard_multi(cl);
	client_unwatch(cl);
}

/*
 * Statistics of a command that ran (INFO commandstats, latencystats, the
 * slow log): ns it took, its reply at out->p[mark] (an error: failed). Per
 * worker, no lock; the slow log's mutex only for a slow command.
 */
/*
 * Redis's redactClientCommandArgument, for SLOWLOG: AUTH's arguments,
 * HELLO's AUTH pair and everything after ACL SETUSER are shown as
 * "(redacted)" (checked against redis-server 7.0.15). Returns 0 with
 * *shown NULL when nothing is secret, 0 with *shown a copy of argv to show
 * (free it), or -1 when memory ran out (log nothing rather than a secret).
 */
static int redact(const struct cmd_def *def, int argc, const struct resp_arg *argv,
		  struct resp_arg **shown)
{
	static const struct resp_arg hidden = { .p = "(redacted)", .len = 10 };
	int from = argc, to = argc;
	if (strcmp(def->name, "auth") == 0)
		from = 1;
	else if (strcmp(def->name, "acl|setuser") == 0)
		from = 2;
	else if (strcmp(def->name, "hello") == 0)
		for (int i = 2; i + 2 < argc; i++)
			if (argv[i].len == 4 && strncasecmp(argv[i].p, "auth", 4) == 0) {
				from = i + 1;
				to = i + 3;
				break;
			}
	*shown = NULL;
	if (from >= argc)
		return 0;
	struct resp_arg *v = malloc((size_t)argc * sizeof(*v));
	if (!v)
		return -1;
	for (int i = 0; i < argc; i++)
		v[i] = i >= from && i < to ? hidden : argv[i];
	*shown = v;
	return 0;
}

static void account(struct worker *w, struct client *cl, const struct cmd_def *def, int argc,
		    const struct resp_arg *argv, size_t mark, uint64_t ns)
{
	struct node *n = w->node;
	bool failed = cl->out.len > mark && cl->out.p[mark] == '-';
	cmdstat_call(w->cstat, cmd_id(def), ns, failed, n->cfg.latency_tracking);
	if (monitor_on(n) && !(def->flags & CMD_SKIP_MONITOR)) /* a script's: at its start */
		monitor_feed(n, cl->w, cl->addr, def, argc, argv);
	uint64_t thr = latency_threshold(n);
	if (thr && ns / 1000000 >= thr)
		latency_add(n, (def->flags & CMD_FAST) ? "fast-command" : "command", ns / 1000000);
	uint64_t us = ns / 1000;
	if (!slowlog_wants(n, us))
		return;
	/* EXEC is skip_slowlog in Redis, whose queued commands get entries of
	 * their own; here the block is one transaction, and EXEC its entry. */
	if ((def->flags & CMD_SKIP_SLOWLOG) && !(def->flags & CMD_TXNBLOCK))
		return;
	char note[96];
	const char *np = NULL;
	if ((def->flags & CMD_TXNBLOCK) || cl->txn_retries > 0) {
		const struct cc_protocol *p = ck_pr_load_ptr(&n->cc.proto);
		snprintf(note, sizeof(note), "(rckv: cc=%s retries=%d)", p ? p->name : "?",
			 cl->txn_retries);
		np = note;
	}
	struct resp_arg *shown;
	if (redact(def, argc, argv, &shown) != 0)
		return;
	slowlog_add(n, cl, argc, shown ? shown : argv, us, np);
	free(shown);
}

/* Redis counts a known command refused before it ran as rejected_calls;
 * an unknown command or subcommand counts nowhere. */
static void account_refused(struct worker *w, const struct cmd_def *top, int argc,
			    struct resp_arg *argv)
{
	if (!top)
		return;
	const struct cmd_def *d = top;
	if (top->subcommands && argc >= 2)
		d = cmd_lookup_sub(top, argv[1].p, argv[1].len);
	if (d)
		cmdstat_reject(w->cstat, cmd_id(d));
}

struct one {
	const struct cmd_def *def;
	struct cmd_ctx ctx;
	size_t mark;
};

static int one_body(struct txn *t, void *arg)
{
	struct one *o = arg;
	o->ctx.out->len = o->mark; /* drop the reply of an aborted attempt */
	o->ctx.txn = t;
	o->ctx.cl->txn_retries = txn_attempt(t);
	o->ctx.would_block = false;
	ps_defer_reset(o->ctx.cl); /* a script's PUBLISHes of an aborted attempt */
	if (o->def->first_key > 0 && o->def->last_key == o->def->first_key) {
		if (o->def->flags & CMD_READONLY)
			txn_hint_single_read(t); /* e.g. GET: an absent key needs no item */
		else if (o->def->flags & CMD_WRITE)
			txn_hint_single_write(t); /* e.g. INCR: lock at the read */
	}
	return srv_call(o->def, &o->ctx);
}

/* Would EXEC of cl's queue be refused for memory (a queued command that
 * may add data, used_memory over maxmemory)? */
static bool queue_denies_oom(struct node *n, const struct client *cl)
{
	for (int i = 0; i < cl->mq_len; i++)
		if (srv_mem_refuses(n, cl->mq[i].def))
			return true;
	return false;
}

/*
 * Blocking list commands (BLPOP, BLMOVE, ...; cmd_list.c). A command that
 * found no element sets would_block with its timeout reply written; the
 * client is then PARKED on its coroutine, as CLIENT PAUSE waits: the
 * command runs again, a new transaction each time, PARK_POLL_NS after the
 * first run and then twice as long after each run that found nothing, up
 * to PARK_POLL_MAX_NS (a client blocked for long costs about 60 small
 * transactions a second, not 1,000), until it finds an element (its reply replaces the timeout's), its
 * timeout passes (the timeout reply stays), the client goes or the node
 * shuts down. Each run is a serializable transaction of its own, so what
 * a woken client pops is exactly what a BLPOP run at that moment would
 * pop; unlike Redis, clients blocked on one key are not served in the
 * order they blocked (the first poll after a push wins). At most half of
 * a worker's coroutines park (the others must stay free to run the pushes
 * that wake them); past that a blocking command that finds nothing
 * replies an error at once.
 */
#define PARK_POLL_NS 1000000ull      /* 1 ms before the first run again */
#define PARK_POLL_MAX_NS 16000000ull /* 16 ms between runs at most */

struct park {
	bool on;
	uint64_t deadline_ns; /* 0: no timeout */
	uint64_t poll_ns;     /* the next sleep */
};

/* Park (or keep parked) after a run that would block: true to run it
 * again, false to keep the reply it wrote. */
static bool park_again(struct worker *w, struct client *cl, struct one *o, struct park *p)
{
	struct node *n = w->node;
	if (!p->on) {
		int max = n->cfg.coroutines / 2 > 0 ? n->cfg.coroutines / 2 : 1;
		if (w->parked >= max) {
			cl->out.len = o->mark;
			resp_errorf(&cl->out,
				    "ERR rckv cannot park another blocked client on this worker (%d "
				    "of its coroutines are); retry later or use the non-blocking form",
				    w->parked);
			return false;
		}
		p->on = true;
		p->deadline_ns = o->ctx.block_ms ? sched_now_ns() +
							   (uint64_t)o->ctx.block_ms * 1000000ull
						 : 0;
		p->poll_ns = PARK_POLL_NS;
		w->parked++;
		ck_pr_inc_64(&n->blocked_clients);
	}
	if (p->deadline_ns && sched_now_ns() >= p->deadline_ns)
		return false;
	if ((cl->flags & CL_CLOSE_ASAP) || ck_pr_load_int(&n->shutdown))
		return false;
	uint64_t ns = p->poll_ns;
	if (p->deadline_ns && sched_now_ns() + ns > p->deadline_ns)
		ns = p->deadline_ns - sched_now_ns() + 1; /* wake at the timeout, not after */
	sched_sleep(w->sched, ns);
	p->poll_ns = p->poll_ns * 2 > PARK_POLL_MAX_NS ? PARK_POLL_MAX_NS : p->poll_ns * 2;
	if (p->deadline_ns && sched_now_ns() >= p->deadline_ns)
		return false; /* timed out while asleep: the timeout reply stands */
	cl->out.len = o->mark;
	return true;
}

static void park_end(struct worker *w, struct park *p)
{
	if (!p->on)
		return;
	w->parked--;
	ck_pr_dec_64(&w->node->blocked_clients);
}

void srv_dispatch(struct worker *w, struct client *cl, const struct cmd_def *top, int argc,
		  struct resp_arg *argv)
{
	struct node *n = w->node;
	struct resp_w *out = &cl->out;
	bool dirty;
	size_t mark = out->len;
	const struct cmd_def *def = srv_resolve(cl, out, top, argc, argv, &dirty);
	if (!def) {
		w->stats.error_replies++;
		account_refused(w, top, argc, argv);
		if (cl->flags & CL_MULTI) {
			cl->flags |= CL_DIRTY_EXEC;
			if (argv[0].len == 4 && strncasecmp(argv[0].p, "exec", 4) == 0)
				exec_abort(cl, out, mark);
		}
		return;
	}
	cl->last_cmd = def->name;
	w->stats.commands++;
	if (!cl->authed && !(def->flags & CMD_NOAUTH)) {
		resp_error(out, "NOAUTH Authentication required.");
		cmdstat_reject(w->cstat, cmd_id(def));
		if (cl->flags & CL_MULTI)
			cl->flags |= CL_DIRTY_EXEC;
		return;
	}
	/* ACL (server/acl.h): nothing more than this test for a user with
	 * every permission; in MULTI a command is checked when queued, as in
	 * Redis 7. */
	if (!acl_fast_ok(&n->acl_gen, cl->acl_gen, cl->perm) &&
	    acl_refuse(w, cl, out, def, argc, argv,
		       (cl->flags & CL_MULTI) ? ACL_CTX_MULTI : ACL_CTX_TOPLEVEL)) {
		w->stats.error_replies++;
		cmdstat_reject(w->cstat, cmd_id(def));
		if (cl->flags & CL_MULTI)
			cl->flags |= CL_DIRTY_EXEC;
		return;
	}
	/* maxmemory (server/memory.h): as Redis's processCommand, before
	 * queueing, so that in MULTI the refusal makes EXEC abort; and EXEC
	 * of a queue holding a command that may add data is refused too. */
	if ((cl->flags & CL_MULTI) && (def->flags & CMD_MULTICTL) &&
	    strcasecmp(def->name, "exec") == 0 && !(cl->flags & CL_DIRTY_EXEC) &&
	    queue_denies_oom(n, cl)) {
		resp_error(out, SRV_OOM_MAXMEMORY);
		w->stats.error_replies++;
		cmdstat_reject(w->cstat, cmd_id(def));
		exec_abort(cl, out, mark);
		return;
	}
	if (srv_mem_refuses(n, def)) {
		resp_error(out, SRV_OOM_MAXMEMORY);
		w->stats.error_replies++;
		cmdstat_reject(w->cstat, cmd_id(def));
		if (cl->flags & CL_MULTI)
			cl->flags |= CL_DIRTY_EXEC;
		return;
	}
	/* Redis's Pub/Sub context: a RESP2 connection with a subscription
	 * carries pushed messages, so only these commands may share it. */
	if ((cl->flags & CL_PUBSUB) && cl->proto == 2 && !(def->flags & CMD_SUBCTX)) {
		char msg[300];
		snprintf(msg, sizeof(msg),
			 "ERR Can't execute '%.128s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / "
			 "PING / QUIT / RESET are allowed in this context", def->name);
		reply_error_sanitized(out, msg);
		w->stats.error_replies++;
		cmdstat_reject(w->cstat, cmd_id(def));
		if (cl->flags & CL_MULTI)
			cl->flags |= CL_DIRTY_EXEC;
		return;
	}
	if ((cl->flags & CL_MULTI) && !(def->flags & CMD_MULTICTL)) {
		if (def->flags & CMD_NOMULTI) {
			resp_error(out, "ERR Command not allowed inside a transaction");
			cmdstat_reject(w->cstat, cmd_id(def));
			cl->flags |= CL_DIRTY_EXEC;
			return;
		}
		if (multi_queue(cl, def, argc, argv) != 0) {
			resp_error(out, "ERR out of memory queueing the command");
			cl->flags |= CL_DIRTY_EXEC;
			return;
		}
		resp_status(out, "QUEUED");
		return;
	}

	struct one o = {
		.def = def,
		.ctx = { .node = n, .w = w, .cl = cl, .txn = NULL, .argc = argc, .argv = argv,
			 .out = out },
		.mark = out->len,
	};
	if (client_paused(n, cl, def))
		client_wait_unpaused(w, cl, def); /* CLIENT PAUSE: on this coroutine */
	/* A script (CMD_SKIP_MONITOR, as Redis flags EVAL) is shown as it
	 * starts, before its redis.calls (script.c shows those from "lua"). */
	if ((def->flags & CMD_SKIP_MONITOR) && monitor_on(n))
		monitor_feed(n, w, cl->addr, def, argc, argv);
	uint64_t t0 = sched_now_ns();
	cl->txn_retries = 0;
	if (def->flags & CMD_NOTXN) {
		(void)srv_call(def, &o.ctx);
		account(w, cl, def, argc, argv, o.mark, sched_now_ns() - t0);
		return;
	}
	/* GET and its kind on an absent key: no transaction (cc_key_absent). */
	if (def->reply1 && argc == 2 && cc_key_absent(w->ccw, argv[1].p, argv[1].len)) {
		def->reply1(&o.ctx, false, NULL, 0);
		w->stats.absent_reads++;
		account(w, cl, def, argc, argv, o.mark, sched_now_ns() - t0);
		return;
	}
	struct park park = { 0 };
	for (;;) {
		struct srv_decl d;
		srv_decl_init(&d);
		srv_decl_command(&d, def, argc, argv);
		uint64_t changes = 0;
		const struct cc_txn tx = { .keys = d.keys, .nkeys = d.n, .body = one_body,
					   .arg = &o, .changes = &changes };
		int rc = cc_run(w->ccw, &tx);
		srv_decl_free(&d);
		if (rc != 0) {
			out->len = o.mark;
			srv_reply_txn_failed(out, n, rc);
		} else {
			worker_add_dirty(w, changes); /* rdb_changes_since_last_save (save.c) */
			if (cl->psq.len)
				ps_defer_send(w, cl); /* a script's PUBLISHes, now it committed */
		}
		ps_defer_reset(cl);
		if (rc != 0 || !o.ctx.would_block || !park_again(w, cl, &o, &park))
			break;
	}
	park_end(w, &park);
	account(w, cl, def, argc, argv, o.mark, sched_now_ns() - t0);
}

/*
 * Groups. A client that pipelines write commands (SET, INCR, MSET, ...)
 * gets them run as one transaction, up to SRV_GROUP_MAX: one lock and one
 * undo record per key for the whole run instead of one per command. It is
 * the same serializable execution, the commands placed back to back in
 * request order, each seeing the ones before it. No reply leaves before
 * the group committed (replies are written after the round,
 * client_flush_pending), so a client cannot tell the difference, and a
 * crash loses only commands nobody was answered for. A command's own error
 * undoes that command only (srv_call's savepoint, as inside EXEC).
 *
 * When the group cannot commit as a whole it is run again command by
 * command, each its own transaction as usual: after its first CC abort
 * (contention: a long transaction would only abort more), and after an
 * error that wrote nothing (a full MemStore, an undo slot too small for
 * the group, txn-timeout), so every command gets its own exact outcome.
 * Only CC_EUNKNOWN (a node failed during the commit: the group took effect
 * whole or not at all) is answered as such for each command.
 *
 * Reads, admin and connection commands, and anything of a client in MULTI
 * or with WATCHed keys, run alone as before (the group is run first).
 */
bool srv_group_add(struct worker *w, struct client *cl, const struct cmd_def *def, int argc,
		   const struct resp_arg *argv)
{
	if (cl->ngrp == SRV_GROUP_MAX || !cl->authed || (cl->flags & (CL_MULTI | CL_PUBSUB)) ||
	    cl->nwatched || cl->reply_off || cl->reply_skip)
		return false;
	if (!acl_fast_ok(&w->node->acl_gen, cl->acl_gen, cl->perm))
		return false; /* alone: srv_dispatch checks its permissions */
	if (ck_pr_load_64(&w->node->pause_until_ms))
		return false; /* alone, through srv_dispatch's CLIENT PAUSE wait */
	if (!def || def->subcommands || !arity_ok(def->arity, argc) || !(def->flags & CMD_WRITE) ||
	    (def->flags & (CMD_NOTXN | CMD_MULTICTL | CMD_NOMULTI | CMD_ADMIN | CMD_ALLKEYS |
			   CMD_BLOCKING)) ||
	    cmd_reserved_key(def, argc, argv))
		return false; /* alone: srv_dispatch checks (and refuses) it */
	if (srv_mem_refuses(w->node, def))
		return false; /* alone: srv_dispatch refuses it */
	size_t need = (size_t)argc * sizeof(struct resp_arg);
	for (int i = 0; i < argc; i++)
		need += argv[i].len + 1;
	need = (need + 7) & ~(size_t)7; /* the next command's resp_arg[] stays aligned */
	if (cl->glen + need > cl->gcap) {
		size_t cap = cl->gcap ? cl->gcap : 4096;
		while (cap < cl->glen + need)
			cap *= 2;
		char *p = realloc(cl->gbuf, cap);
		if (!p)
			return false; /* run it alone */
		cl->gbuf = p;
		cl->gcap = cap;
	}
	struct resp_arg *copy = (struct resp_arg *)(cl->gbuf + cl->glen);
	char *p = (char *)(copy + argc);
	for (int i = 0; i < argc; i++) {
		memcpy(p, argv[i].p, argv[i].len);
		p[argv[i].len] = '\0';
		copy[i].p = NULL; /* set by group_argv: gbuf may still move */
		copy[i].len = argv[i].len;
		p += argv[i].len + 1;
	}
	cl->grp[cl->ngrp++] = (struct group_cmd){ .def = def, .argc = argc, .off = cl->glen };
	cl->glen += need;
	return true;
}

static struct resp_arg *group_argv(struct client *cl, int i)
{
	struct group_cmd *g = &cl->grp[i];
	struct resp_arg *argv = (struct resp_arg *)(cl->gbuf + g->off);
	char *p = (char *)(argv + g->argc);
	for (int j = 0; j < g->argc; j++) {
		argv[j].p = p;
		p += argv[j].len + 1;
	}
	return argv;
}

struct group_run {
	struct worker *w;
	struct client *cl;
	size_t mark;
	size_t at[SRV_GROUP_MAX]; /* where each command's reply starts */
};

static int group_body(struct txn *t, void *arg)
{
	struct group_run *g = arg;
	struct client *cl = g->cl;
	if (txn_attempt(t) > 0)
		return CC_EALONE; /* contention: each command alone (above) */
	cl->out.len = g->mark;
	ps_defer_reset(cl); /* its commands' keyspace notifications (notify.h) */
	for (int i = 0; i < cl->ngrp; i++) {
		struct cmd_ctx ctx = { .node = g->w->node, .w = g->w, .cl = cl, .txn = t,
				       .argc = cl->grp[i].argc, .argv = group_argv(cl, i),
				       .out = &cl->out };
		g->at[i] = cl->out.len;
		int rc = srv_call(cl->grp[i].def, &ctx);
		if (rc != CC_OK)
			return rc;
	}
	return CC_OK;
}

void srv_group_run(struct worker *w, struct client *cl)
{
	int n = cl->ngrp;
	if (n == 0)
		return;
	if (n == 1) { /* a command alone keeps its single-key fast paths */
		struct resp_arg *argv = group_argv(cl, 0);
		cl->ngrp = 0;
		srv_dispatch(w, cl, cl->grp[0].def, cl->grp[0].argc, argv);
		cl->glen = 0;
		return;
	}
	struct group_run g = { .w = w, .cl = cl, .mark = cl->out.len };
	uint64_t t0 = sched_now_ns();
	struct srv_decl d;
	srv_decl_init(&d);
	for (int i = 0; i < n; i++)
		srv_decl_command(&d, cl->grp[i].def, cl->grp[i].argc, group_argv(cl, i));
	uint64_t changes = 0;
	const struct cc_txn tx = { .keys = d.keys, .nkeys = d.n, .body = group_body, .arg = &g,
				   .changes = &changes };
	int rc = cc_run(w->ccw, &tx);
	srv_decl_free(&d);
	if (rc == 0) {
		w->stats.commands += (uint64_t)n;
		worker_add_dirty(w, changes);
		w->stats.txn_groups++;
		cl->last_cmd = cl->grp[n - 1].def->name;
		if (cl->psq.len)
			ps_defer_send(w, cl); /* keyspace notifications, now it committed */
		/* Each command gets its share of the group's time. */
		uint64_t share = (sched_now_ns() - t0) / (uint64_t)n;
		cl->txn_retries = 0;
		for (int i = 0; i < n; i++)
			account(w, cl, cl->grp[i].def, cl->grp[i].argc, group_argv(cl, i), g.at[i],
				share);
	} else if (rc == CC_EUNKNOWN) {
		ps_defer_reset(cl);
		cl->out.len = g.mark;
		for (int i = 0; i < n; i++)
			srv_reply_txn_failed(&cl->out, w->node, rc);
		w->stats.commands += (uint64_t)n;
	} else {
		cl->out.len = g.mark;
		ps_defer_reset(cl);
		w->stats.txn_group_splits++;
		cl->ngrp = 0; /* srv_dispatch must not see a group */
		for (int i = 0; i < n; i++)
			srv_dispatch(w, cl, cl->grp[i].def, cl->grp[i].argc, group_argv(cl, i));
	}
	cl->ngrp = 0;
	cl->glen = 0;
	if (cl->gcap > (1u << 20)) { /* a group of large values: not kept */
		free(cl->gbuf);
		cl->gbuf = NULL;
		cl->gcap = 0;
	}
}
