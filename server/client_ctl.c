/*
 * client_ctl.c: CLIENT KILL / PAUSE / UNPAUSE / REPLY (client_ctl.h), with
 * Redis 7.0's syntax, replies and errors.
 *
 * CLIENT PAUSE sets the node's pause deadline and mode; a command that the
 * pause holds (every command under ALL; under WRITE those that write or
 * may publish: writes, PUBLISH, scripts that may write, an EXEC holding
 * one) sleeps on its client's coroutine until the deadline or UNPAUSE, so
 * the worker keeps serving the others and each client's order holds.
 * Queued MULTI commands are not held (EXEC is), as in Redis.
 */
#include "server/client_ctl.h"

#include <ck_pr.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cc/sched.h"
#include "server/acl.h"
#include "server/client.h"
#include "server/command.h"
#include "server/multi.h"
#include "server/node.h"
#include "server/pubsub.h"
#include "server/strutil.h"
#include "server/worker.h"

/* ---- KILL ---- */

struct kill_filter {
	long long id;            /* 0: any */
	const struct resp_arg *addr, *laddr;
	const struct resp_arg *user; /* NULL: any */
	int type;                /* -1 any, 0 normal, 1 pubsub, 2 none can match */
	bool skipme;
};

static bool str_is(const char *s, const struct resp_arg *a)
{
	return strlen(s) == a->len && memcmp(s, a->p, a->len) == 0;
}

static bool matches(const struct kill_filter *f, const struct client *cl)
{
	uint32_t fl = ck_pr_load_32((uint32_t *)&cl->flags);
	if (fl & (CL_CLOSE_ASAP | CL_CLOSE_AFTER_REPLY))
		return false; /* going already */
	if (f->id && (unsigned long long)f->id != cl->id)
		return false;
	if (f->addr && !str_is(cl->addr, f->addr))
		return false;
	if (f->laddr && !str_is(cl->laddr, f->laddr))
		return false;
	/* perm is replaced under the clients_lock the caller holds (acl.h). */
	if (f->user && !str_is(cl->perm->name, f->user))
		return false;
	if (f->type == 2 || (f->type == 0 && (fl & CL_PUBSUB)) ||
	    (f->type == 1 && !(fl & CL_PUBSUB)))
		return false;
	return true;
}

/* Parse the new syntax's filters; false after replying an error. */
static bool parse_filters(struct cmd_ctx *c, struct kill_filter *f)
{
	for (int i = 2; i < c->argc; i += 2) {
		if (i + 1 >= c->argc) {
			cmd_reply_syntax(c);
			return false;
		}
		const struct resp_arg *k = &c->argv[i], *v = &c->argv[i + 1];
		if (arg_is(k, "id")) {
			if (srv_str2ll(v->p, v->len, &f->id) != 0 || f->id <= 0) {
				resp_error(c->out, "ERR client-id should be greater than 0");
				return false;
			}
		} else if (arg_is(k, "type")) {
			if (arg_is(v, "normal"))
				f->type = 0;
			else if (arg_is(v, "pubsub"))
				f->type = 1;
			else if (arg_is(v, "master") || arg_is(v, "replica") || arg_is(v, "slave"))
				f->type = 2; /* rckv has none */
			else {
				resp_errorf(c->out, "ERR Unknown client type '%.*s'",
					    (int)(v->len > 128 ? 128 : v->len), v->p);
				return false;
			}
		} else if (arg_is(k, "addr")) {
			f->addr = v;
		} else if (arg_is(k, "laddr")) {
			f->laddr = v;
		} else if (arg_is(k, "user")) {
			f->user = v;
			if (!acl_user_exists(c->node, v->p, v->len)) {
				resp_errorf(c->out, "ERR No such user '%.*s'",
					    (int)(v->len > 128 ? 128 : v->len), v->p);
				return false;
			}
		} else if (arg_is(k, "skipme")) {
			if (arg_is(v, "yes"))
				f->skipme = true;
			else if (arg_is(v, "no"))
				f->skipme = false;
			else {
				cmd_reply_syntax(c);
				return false;
			}
		} else {
			cmd_reply_syntax(c);
			return false;
		}
	}
	return true;
}

/* Close every matching client; returns how many. Clients of other
 * workers (and of this one but the caller) are closed by their owner. */
static long long kill_matching(struct cmd_ctx *c, const struct kill_filter *f)
{
	struct node *n = c->node;
	long long killed = 0;
	for (int i = 0; i < n->nworkers; i++) {
		struct worker *w = n->workers[i];
		if (!w)
			continue;
		pthread_mutex_lock(&w->clients_lock);
		for (struct client *cl = w->clients; cl; cl = cl->next) {
			if ((cl == c->cl && f->skipme) || !matches(f, cl))
				continue;
			killed++;
			if (cl == c->cl)
				c->cl->flags |= CL_CLOSE_AFTER_REPLY; /* after this reply */
			else
				ps_kill_send(n, c->w, w->id, cl->id);
		}
		pthread_mutex_unlock(&w->clients_lock);
	}
	return killed;
}

void client_kill(struct cmd_ctx *c)
{
	struct kill_filter f = { .type = -1, .skipme = true };
	if (c->argc == 3) { /* the old form: CLIENT KILL ip:port */
		f.addr = &c->argv[2];
		f.skipme = false;
		if (kill_matching(c, &f) == 0)
			resp_error(c->out, "ERR No such client");
		else
			resp_status(c->out, "OK");
		return;
	}
	if (!parse_filters(c, &f))
		return;
	resp_int(c->out, kill_matching(c, &f));
}

/* ---- PAUSE ---- */

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void client_pause(struct cmd_ctx *c)
{
	long long ms;
	if (srv_str2ll(c->argv[2].p, c->argv[2].len, &ms) != 0) {
		resp_error(c->out, "ERR timeout is not an integer or out of range");
		return;
	}
	if (ms < 0) {
		resp_error(c->out, "ERR timeout is negative");
		return;
	}
	int all = 1;
	if (c->argc == 4) {
		if (arg_is(&c->argv[3], "write"))
			all = 0;
		else if (!arg_is(&c->argv[3], "all")) {
			resp_error(c->out, "ERR CLIENT PAUSE mode must be WRITE or ALL");
			return;
		}
	} else if (c->argc > 4) {
		cmd_reply_syntax(c);
		return;
	}
	struct node *n = c->node;
	uint64_t until = now_ms() + (uint64_t)ms;
	/* As Redis: a pause never shortens one in force, and ALL wins. */
	pthread_mutex_lock(&n->cfg_lock);
	uint64_t cur = ck_pr_load_64(&n->pause_until_ms);
	if (cur && cur > now_ms()) {
		if (until < cur)
			until = cur;
		if (ck_pr_load_int(&n->pause_all))
			all = 1;
	}
	ck_pr_store_int(&n->pause_all, all);
	ck_pr_store_64(&n->pause_until_ms, until);
	pthread_mutex_unlock(&n->cfg_lock);
	resp_status(c->out, "OK");
}

void client_unpause(struct cmd_ctx *c)
{
	ck_pr_store_64(&c->node->pause_until_ms, 0);
	resp_status(c->out, "OK");
}

static bool may_write(const struct client *cl, const struct cmd_def *def)
{
	if (def->flags & (CMD_WRITE | CMD_MAY_REPLICATE))
		return true;
	if ((def->flags & CMD_TXNBLOCK) && !(def->flags & CMD_READONLY) &&
	    !(def->flags & CMD_MULTICTL))
		return true; /* EVAL, EVALSHA */
	if (def->flags & CMD_TXNBLOCK) /* EXEC: its queue */
		for (int i = 0; i < cl->mq_len; i++)
			if (cl->mq[i].def->flags & (CMD_WRITE | CMD_MAY_REPLICATE))
				return true;
	return false;
}

bool client_paused(struct node *n, const struct client *cl, const struct cmd_def *def)
{
	uint64_t until = ck_pr_load_64(&n->pause_until_ms);
	if (!until)
		return false;
	if (now_ms() >= until)
		return false;
	return ck_pr_load_int(&n->pause_all) || may_write(cl, def);
}

void client_wait_unpaused(struct worker *w, const struct client *cl, const struct cmd_def *def)
{
	while (client_paused(w->node, cl, def) && !ck_pr_load_int(&w->node->shutdown))
		sched_sleep(w->sched, 1000000); /* 1 ms: UNPAUSE is seen within it */
}

/* ---- REPLY ---- */

void client_reply(struct cmd_ctx *c)
{
	struct client *cl = c->cl;
	if (arg_is(&c->argv[2], "on")) {
		cl->reply_off = false;
		resp_status(c->out, "OK");
	} else if (arg_is(&c->argv[2], "off")) {
		cl->reply_off = true; /* and no reply to this one */
	} else if (arg_is(&c->argv[2], "skip")) {
		if (!cl->reply_off)
			cl->reply_skip = true; /* the next command's */
	} else {
		cmd_reply_syntax(c);
	}
}
