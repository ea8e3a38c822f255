/*
 * cmd_conn.c: connection commands: PING, ECHO, HELLO, AUTH, QUIT, RESET,
 * SELECT and CLIENT, with Redis 7.0's replies and error texts (checked
 * against redis-server 7.0.15), and the CLIENT LIST line of a client.
 *
 * Users and passwords are server/acl.c's: AUTH and HELLO AUTH log in as a
 * user, RESET goes back to "default". The NOAUTH check for other commands
 * is dispatch's; HELLO makes its own, as in Redis.
 *
 * Threads: every handler runs on the worker that owns ctx->cl. A client's
 * name and library strings are the only fields other workers read through
 * pointers (CLIENT LIST, under the owner's clients_lock), so they are
 * replaced under that lock (set_client_str).
 */
#include <ck_pr.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "server/acl.h"
#include "server/client.h"
#include "server/client_ctl.h"
#include "server/command.h"
#include "server/node.h"
#include "server/pubsub.h"
#include "server/strutil.h"
#include "server/worker.h"

/* ---- passwords: users and their passwords are server/acl.c's ---- */

static void reply_wrongpass(struct cmd_ctx *c)
{
	resp_error(c->out, "WRONGPASS invalid username-password pair or user is disabled.");
}

/* ---- client strings ---- */

/* Redis allows '!'..'~' only, so that CLIENT LIST splits on spaces. */
static bool printable_token(const struct resp_arg *a)
{
	for (size_t i = 0; i < a->len; i++)
		if (a->p[i] < '!' || a->p[i] > '~')
			return false;
	return true;
}

/* Replace *slot with a copy of a (NULL when empty), under the owner's
 * clients_lock because CLIENT LIST on other workers reads it. */
static int set_client_str(struct client *cl, char **slot, const struct resp_arg *a)
{
	char *s = NULL;
	if (a->len) {
		s = malloc(a->len + 1);
		if (!s)
			return -1;
		memcpy(s, a->p, a->len);
		s[a->len] = '\0';
	}
	pthread_mutex_lock(&cl->w->clients_lock);
	char *old = *slot;
	*slot = s;
	pthread_mutex_unlock(&cl->w->clients_lock);
	free(old);
	return 0;
}

static const char *const bad_name =
	"ERR Client names cannot contain spaces, newlines or special characters.";

/* CLIENT SETNAME / HELLO SETNAME. Returns 0, or -1 after replying an error. */
static int set_name_or_reply(struct cmd_ctx *c, const struct resp_arg *a)
{
	if (!printable_token(a)) {
		resp_error(c->out, bad_name);
		return -1;
	}
	if (set_client_str(c->cl, &c->cl->name, a) != 0) {
		resp_error(c->out, "ERR out of memory");
		return -1;
	}
	return 0;
}

static void set_proto(struct cmd_ctx *c, int proto)
{
	c->cl->proto = proto;
	c->cl->out.proto = proto;
	c->out->proto = proto; /* the reply being written, if a different buffer */
}

/* ---- PING ECHO QUIT SELECT ---- */

int cmd_ping(struct cmd_ctx *c)
{
	if (c->argc > 2) {
		cmd_reply_wrong_args(c);
	} else if ((c->cl->flags & CL_PUBSUB) && c->cl->proto == 2) {
		/* Redis's: the pushed messages' array shape, RESP2 only. */
		resp_array(c->out, 2);
		resp_bulk(c->out, "pong", 4);
		if (c->argc == 2)
			resp_bulk(c->out, c->argv[1].p, c->argv[1].len);
		else
			resp_bulk(c->out, "", 0);
	} else if (c->argc == 2)
		resp_bulk(c->out, c->argv[1].p, c->argv[1].len);
	else
		resp_status(c->out, "PONG");
	return 0;
}

int cmd_echo(struct cmd_ctx *c)
{
	resp_bulk(c->out, c->argv[1].p, c->argv[1].len);
	return 0;
}

int cmd_quit(struct cmd_ctx *c)
{
	resp_status(c->out, "OK");
	c->cl->flags |= CL_CLOSE_AFTER_REPLY;
	return 0;
}

int cmd_select(struct cmd_ctx *c)
{
	long long id;
	if (srv_str2ll(c->argv[1].p, c->argv[1].len, &id) != 0) {
		cmd_reply_not_int(c);
		return 0;
	}
	if (id < INT_MIN || id > INT_MAX) {
		/* Redis's getIntFromObjectOrReply text, typo included. */
		resp_error(c->out,
			   "ERR value is out of range, value must between -2147483648 and 2147483647");
		return 0;
	}
	/* One database: rckv's keyspace is db 0 (CONFIG GET databases says 1). */
	if (id != 0) {
		resp_error(c->out, "ERR DB index is out of range");
		return 0;
	}
	resp_status(c->out, "OK");
	return 0;
}

/* ---- AUTH HELLO RESET ---- */

/* AUTH's and HELLO AUTH's check: on success the client is user's (NULL:
 * "default"). */
static bool login(struct cmd_ctx *c, const struct resp_arg *user, const struct resp_arg *pass)
{
	struct acl_perm *p = NULL;
	uint64_t gen = ck_pr_load_64(&c->node->acl_gen); /* before: a later change refreshes */
	if (!acl_auth(c->node, c->cl, user ? user->p : NULL, user ? user->len : 0, pass->p,
		      pass->len, &p))
		return false;
	acl_client_set(c->cl, p, gen);
	c->cl->authed = true;
	return true;
}

int cmd_auth(struct cmd_ctx *c)
{
	if (c->argc > 3) {
		cmd_reply_syntax(c);
		return 0;
	}
	const struct resp_arg *user = c->argc == 3 ? &c->argv[1] : NULL;
	const struct resp_arg *pass = &c->argv[c->argc - 1];
	if (!user && acl_default_nopass(c->node)) {
		resp_error(c->out, "ERR AUTH <password> called without any password configured "
				   "for the default user. Are you sure your configuration is "
				   "correct?");
		return 0;
	}
	if (!login(c, user, pass)) {
		reply_wrongpass(c); /* a failed AUTH leaves the client as it was */
		return 0;
	}
	resp_status(c->out, "OK");
	return 0;
}

int cmd_hello(struct cmd_ctx *c)
{
	long long ver = 0;
	int next = 1;
	if (c->argc >= 2) {
		if (srv_str2ll(c->argv[1].p, c->argv[1].len, &ver) != 0) {
			resp_error(c->out, "ERR Protocol version is not an integer or out of range");
			return 0;
		}
		if (ver < 2 || ver > 3) {
			resp_error(c->out, "NOPROTO unsupported protocol version");
			return 0;
		}
		next = 2;
	}

	const struct resp_arg *user = NULL, *pass = NULL, *name = NULL;
	for (int j = next; j < c->argc; j++) {
		int more = c->argc - 1 - j;
		if (arg_is(&c->argv[j], "auth") && more >= 2) {
			user = &c->argv[j + 1];
			pass = &c->argv[j + 2];
			j += 2;
		} else if (arg_is(&c->argv[j], "setname") && more >= 1) {
			name = &c->argv[j + 1];
			j++;
		} else {
			resp_errorf(c->out, "ERR Syntax error in HELLO option '%.*s'",
				    (int)(c->argv[j].len > 128 ? 128 : c->argv[j].len),
				    c->argv[j].p);
			return 0;
		}
	}

	if (user && !login(c, user, pass)) {
		reply_wrongpass(c);
		return 0;
	}
	if (!c->cl->authed) {
		resp_error(c->out,
			   "NOAUTH HELLO must be called with the client already authenticated, "
			   "otherwise the HELLO AUTH <user> <pass> option can be used to "
			   "authenticate the client and select the RESP protocol version at the "
			   "same time");
		return 0;
	}
	if (name && set_name_or_reply(c, name) != 0)
		return 0;
	if (ver)
		set_proto(c, (int)ver);

	/* Written in the protocol just selected, as Redis does. */
	resp_map(c->out, 7);
	resp_bulk_cstr(c->out, "server");
	resp_bulk_cstr(c->out, "redis");
	resp_bulk_cstr(c->out, "version");
	resp_bulk_cstr(c->out, SRV_REDIS_VERSION);
	resp_bulk_cstr(c->out, "proto");
	resp_int(c->out, c->cl->proto);
	resp_bulk_cstr(c->out, "id");
	resp_int(c->out, (long long)c->cl->id);
	resp_bulk_cstr(c->out, "mode");
	resp_bulk_cstr(c->out, "standalone");
	resp_bulk_cstr(c->out, "role");
	resp_bulk_cstr(c->out, "master");
	resp_bulk_cstr(c->out, "modules");
	resp_array(c->out, 0);
	return 0;
}

int cmd_reset(struct cmd_ctx *c)
{
	struct client *cl = c->cl;
	static const struct resp_arg none = { .p = "", .len = 0 };
	client_discard_multi(cl);
	client_unwatch(cl);
	ps_client_drop(cl);
	(void)set_client_str(cl, &cl->name, &none); /* clearing cannot fail */
	set_proto(c, 2);
	uint64_t gen;
	struct acl_perm *p = acl_default_perm(c->node, &gen);
	acl_client_set(cl, p, gen); /* back to the default user, as Redis */
	cl->authed = acl_default_nopass(c->node);
	resp_status(c->out, "RESET");
	return 0;
}

/* ---- CLIENT ---- */

/*
 * Append the CLIENT LIST line of cl, and its '\n', to b. `owner` says the
 * caller runs on cl's worker.
 * Otherwise the caller holds cl's worker's clients_lock, which keeps cl and
 * its name/lib strings alive but does not stop the owner from updating
 * the scalar fields read here (flags, times, buffer sizes): those may be a
 * moment old, and are read without following any pointer the owner may
 * free. The parser is the exception: its internals change under the
 * owner, so another worker reports qbuf=0.
 */
static void info_line(struct srv_sbuf *b, const struct client *cl, bool owner)
{
	time_t now = time(NULL);
	uint32_t fl = cl->flags; /* once: the line shows one state */
	char flags[8], *f = flags;
	if (fl & CL_PUBSUB)
		*f++ = 'P';
	if (fl & CL_MONITOR)
		*f++ = 'O';
	if (fl & CL_MULTI)
		*f++ = 'x';
	if (fl & CL_CLOSE_AFTER_REPLY)
		*f++ = 'c';
	if (fl & CL_CLOSE_ASAP)
		*f++ = 'A';
	if (f == flags)
		*f++ = 'N';
	*f = '\0';

	size_t pending = cl->out.len > cl->out_sent ? cl->out.len - cl->out_sent : 0;
	size_t qbuf = owner && cl->parser ? resp_parser_pending(cl->parser) : 0;
	size_t multi_mem = (size_t)cl->mq_cap * sizeof(struct queued_cmd);
	size_t tot = sizeof(*cl) + cl->out.cap + qbuf + multi_mem;
	srv_sbuf_printf(b,
			"id=%llu addr=%s laddr=%s fd=%d name=%s age=%lld idle=%lld flags=%s "
			"db=0 sub=%ld psub=%ld ssub=%ld multi=%d qbuf=%zu qbuf-free=0 argv-mem=0 "
			"multi-mem=%zu rbs=%zu rbp=%zu obl=%zu oll=0 omem=0 tot-mem=%zu "
			"events=%s cmd=%s user=%s redir=-1 resp=%d lib-name=%s lib-ver=%s\n",
			(unsigned long long)cl->id, cl->addr, cl->laddr, cl->fd,
			cl->name ? cl->name : "", (long long)(now - cl->ctime),
			(long long)(now - cl->last_active), flags,
			ps_client_count(cl, PS_CHANNEL), ps_client_count(cl, PS_PATTERN),
			ps_client_count(cl, PS_SHARD),
			(fl & CL_MULTI) ? cl->mq_len : -1, qbuf, multi_mem, cl->out.cap,
			cl->out.cap, pending, tot, pending ? "rw" : "r",
			cl->last_cmd ? cl->last_cmd : "NULL", cl->perm ? cl->perm->name : "default",
			cl->proto, cl->lib_name ? cl->lib_name : "", cl->lib_ver ? cl->lib_ver : "");
}

/* Reply the text of b (CLIENT LIST, CLIENT INFO), or an error if it is
 * incomplete, and free it. */
static void reply_text(struct cmd_ctx *c, struct srv_sbuf *b)
{
	if (b->failed)
		resp_error(c->out, "ERR out of memory");
	else
		resp_verbatim(c->out, b->p ? b->p : "", b->len);
	srv_sbuf_free(b);
}

void client_info_line(struct srv_sbuf *b, const struct client *cl)
{
	info_line(b, cl, true);
	if (b->len && b->p[b->len - 1] == '\n')
		b->p[--b->len] = '\0';
}

static void client_list(struct cmd_ctx *c)
{
	bool no_type = false;
	long long *ids = NULL;
	int nids = 0;
	if (c->argc == 4 && arg_is(&c->argv[2], "type")) {
		const struct resp_arg *t = &c->argv[3];
		if (arg_is(t, "normal"))
			no_type = false;
		else if (arg_is(t, "master") || arg_is(t, "replica") || arg_is(t, "slave") ||
			 arg_is(t, "pubsub"))
			no_type = true; /* rckv has only normal clients */
		else {
			resp_errorf(c->out, "ERR Unknown client type '%.*s'",
				    (int)(t->len > 128 ? 128 : t->len), t->p);
			return;
		}
	} else if (c->argc > 3 && arg_is(&c->argv[2], "id")) {
		ids = malloc((size_t)(c->argc - 3) * sizeof(*ids));
		if (!ids) {
			resp_error(c->out, "ERR out of memory");
			return;
		}
		for (int j = 3; j < c->argc; j++) {
			if (srv_str2ll(c->argv[j].p, c->argv[j].len, &ids[nids]) != 0) {
				free(ids);
				resp_error(c->out, "ERR Invalid client ID");
				return;
			}
			nids++;
		}
	} else if (c->argc != 2) {
		cmd_reply_syntax(c);
		return;
	}

	struct srv_sbuf t = { 0 };
	struct node *n = c->node;
	for (int i = 0; i < n->nworkers && !no_type; i++) {
		struct worker *w = n->workers[i];
		if (!w)
			continue;
		pthread_mutex_lock(&w->clients_lock);
		for (struct client *cl = w->clients; cl; cl = cl->next) {
			if (nids) {
				bool hit = false;
				for (int k = 0; k < nids && !hit; k++)
					hit = (unsigned long long)ids[k] == cl->id;
				if (!hit)
					continue;
			}
			info_line(&t, cl, w == c->w);
		}
		pthread_mutex_unlock(&w->clients_lock);
	}
	free(ids);
	reply_text(c, &t);
}

static void client_info(struct cmd_ctx *c)
{
	struct srv_sbuf b = { 0 };
	info_line(&b, c->cl, true);
	reply_text(c, &b);
}

static void client_setinfo(struct cmd_ctx *c)
{
	const struct resp_arg *attr = &c->argv[2], *val = &c->argv[3];
	char **slot;
	if (arg_is(attr, "lib-name"))
		slot = &c->cl->lib_name;
	else if (arg_is(attr, "lib-ver"))
		slot = &c->cl->lib_ver;
	else {
		resp_errorf(c->out, "ERR Unrecognized option '%.*s'",
			    (int)(attr->len > 128 ? 128 : attr->len), attr->p);
		return;
	}
	if (!printable_token(val)) {
		resp_errorf(c->out, "ERR %.*s cannot contain spaces, newlines or special characters.",
			    (int)attr->len, attr->p);
		return;
	}
	if (set_client_str(c->cl, slot, val) != 0)
		resp_error(c->out, "ERR out of memory");
	else
		resp_status(c->out, "OK");
}

static const char *const client_help[] = {
	"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"GETNAME",
	"    Return the name of the current connection.",
	"ID",
	"    Return the ID of the current connection.",
	"INFO",
	"    Return information about the current client connection.",
	"LIST [options ...]",
	"    Return information about client connections. Options:",
	"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
	"      Return clients of specified type.",
	"    * ID <client-id> [<client-id> ...]",
	"      Return clients of specified IDs only.",
	"SETNAME <name>",
	"    Assign the name <name> to the current connection.",
	"SETINFO <option> <value>",
	"    Set client meta attributes (LIB-NAME or LIB-VER).",
	"KILL <ip:port>",
	"    Kill connection made from <ip:port>.",
	"KILL <option> <value> [<option> <value> [...]]",
	"    Kill connections. Options are:",
	"    * ADDR (<ip:port>|<unixsocket>:0)",
	"      Kill connections made from the specified address",
	"    * LADDR (<ip:port>|<unixsocket>:0)",
	"      Kill connections made to specified local address",
	"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
	"      Kill connections by type.",
	"    * USER <username>",
	"      Kill connections authenticated by <username>.",
	"    * SKIPME (YES|NO)",
	"      Skip killing current connection (default: yes).",
	"    * ID <client-id>",
	"      Kill connections by client id.",
	"PAUSE <timeout> [WRITE|ALL]",
	"    Suspend all, or just write, clients for <timeout> milliseconds.",
	"UNPAUSE",
	"    Stop the current client pause, resuming traffic.",
	"REPLY (ON|OFF|SKIP)",
	"    Control the replies sent to the current connection.",
	"NO-EVICT (ON|OFF)",
	"    Protect current client connection from eviction (rckv never evicts clients).",
	"HELP",
	"    Prints this help.",
};

int cmd_client(struct cmd_ctx *c)
{
	/* Dispatch has resolved the subcommand and checked its arity; this
	 * repeats the checks so the handler is right on its own too. */
	const struct cmd_def *d = cmd_lookup(c->argv[0].p, c->argv[0].len);
	const struct cmd_def *sub = c->argc >= 2 ? cmd_lookup_sub(d, c->argv[1].p, c->argv[1].len)
						 : NULL;
	if (c->argc < 2) {
		cmd_reply_wrong_args(c);
		return 0;
	}
	if (!sub) {
		resp_errorf(c->out, "ERR unknown subcommand '%.*s'. Try CLIENT HELP.",
			    (int)(c->argv[1].len > 128 ? 128 : c->argv[1].len), c->argv[1].p);
		return 0;
	}
	if (sub->arity > 0 ? c->argc != sub->arity : c->argc < -sub->arity) {
		cmd_reply_wrong_args(c);
		return 0;
	}

	const char *s = sub->name + strlen("client|");
	if (strcmp(s, "id") == 0) {
		resp_int(c->out, (long long)c->cl->id);
	} else if (strcmp(s, "getname") == 0) {
		if (c->cl->name)
			resp_bulk_cstr(c->out, c->cl->name);
		else
			resp_null(c->out);
	} else if (strcmp(s, "setname") == 0) {
		if (set_name_or_reply(c, &c->argv[2]) == 0)
			resp_status(c->out, "OK");
	} else if (strcmp(s, "list") == 0) {
		client_list(c);
	} else if (strcmp(s, "info") == 0) {
		client_info(c);
	} else if (strcmp(s, "setinfo") == 0) {
		client_setinfo(c);
	} else if (strcmp(s, "kill") == 0) {
		client_kill(c);
	} else if (strcmp(s, "pause") == 0) {
		client_pause(c);
	} else if (strcmp(s, "unpause") == 0) {
		client_unpause(c);
	} else if (strcmp(s, "reply") == 0) {
		client_reply(c);
	} else if (strcmp(s, "tracking") == 0) {
		resp_error(c->out, "ERR CLIENT TRACKING is not supported by rckv: it has no "
				   "client-side caching invalidation yet");
	} else if (strcmp(s, "no-evict") == 0) {
		if (arg_is(&c->argv[2], "on") || arg_is(&c->argv[2], "off"))
			resp_status(c->out, "OK");
		else
			cmd_reply_syntax(c);
	} else if (strcmp(s, "help") == 0) {
		int n = (int)(sizeof(client_help) / sizeof(client_help[0]));
		resp_array(c->out, n);
		for (int i = 0; i < n; i++)
			resp_status(c->out, client_help[i]);
	} else {
		resp_errorf(c->out, "ERR unknown subcommand '%s'. Try CLIENT HELP.", s);
	}
	return 0;
}
