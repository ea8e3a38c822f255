/*
 * cmd_server.c: server commands: COMMAND, CONFIG, INFO, TIME, SHUTDOWN,
 * FUNCTION and DEBUG, with Redis 7.0's reply shapes and error texts
 * (checked against redis-server 7.0.15), so that redis-cli,
 * redis-benchmark and client libraries see the server they expect.
 *
 * Threads: handlers run on a coroutine of the worker that owns the client.
 * They read other workers' statistics with relaxed loads (node.h) and
 * every string option under the node's cfg_lock; CONFIG SET cc runs the
 * protocol switch, which yields, so no lock is held across it.
 */
#include <ck_pr.h>
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "cc/calvin.h"
#include "cc/calvin_ring.h"
#include "cc/cc.h"
#include "cc/durable.h"
#include "cc/sched.h"
#include "cc/switch.h"
#include "server/acl.h"
#include "server/memory.h"
#include "server/client.h"
#include "server/command.h"
#include "server/config.h"
#include "server/expire.h"
#include "server/log.h"
#include "server/membership.h"
#include "server/cluster.h"
#include "server/node.h"
#include "server/save.h"
#include "server/slots.h"
#include "server/srv.h"
#include "server/strutil.h"
#include "server/script.h"
#include "server/cmdstat.h"
#include "server/latency.h"
#include "server/pubsub.h"
#include "server/worker.h"

static int clamp128(size_t len)
{
	return (int)(len > 128 ? 128 : len);
}

static void reply_help(struct cmd_ctx *c, const char *const *lines, int n)
{
	resp_array(c->out, n);
	for (int i = 0; i < n; i++)
		resp_status(c->out, lines[i]);
}

/*
 * Resolve a container's subcommand and check its arity, replying Redis's
 * error if either fails. Dispatch has normally done this already; doing it
 * again keeps each handler correct on its own. Returns the part of the
 * subcommand's name after '|', or NULL after an error reply.
 */
static const char *resolve_sub(struct cmd_ctx *c, const char *upper)
{
	const struct cmd_def *d = cmd_lookup(c->argv[0].p, c->argv[0].len);
	if (c->argc < 2) {
		cmd_reply_wrong_args(c);
		return NULL;
	}
	const struct cmd_def *sub = cmd_lookup_sub(d, c->argv[1].p, c->argv[1].len);
	if (!sub) {
		resp_errorf(c->out, "ERR unknown subcommand '%.*s'. Try %s HELP.",
			    clamp128(c->argv[1].len), c->argv[1].p, upper);
		return NULL;
	}
	if (sub->arity > 0 ? c->argc != sub->arity : c->argc < -sub->arity) {
		cmd_reply_wrong_args(c);
		return NULL;
	}
	return strchr(sub->name, '|') + 1;
}

/* ======================= COMMAND ======================= */

/* Write the space-separated words of s as a set of simple strings,
 * skipping `skip` if given. */
static void reply_word_set(struct resp_w *out, const char *s, const char *skip, bool bulk)
{
	const char *words[16];
	size_t lens[16];
	int n = 0;
	for (const char *p = s ? s : ""; *p && n < 16;) {
		while (*p == ' ')
			p++;
		const char *e = p;
		while (*e && *e != ' ')
			e++;
		if (e > p && !(skip && (size_t)(e - p) == strlen(skip) &&
			       strncmp(p, skip, (size_t)(e - p)) == 0)) {
			words[n] = p;
			lens[n++] = (size_t)(e - p);
		}
		p = e;
	}
	resp_set(out, n);
	for (int i = 0; i < n; i++) {
		if (bulk) {
			resp_bulk(out, words[i], lens[i]);
		} else {
			char tmp[64];
			snprintf(tmp, sizeof(tmp), "%.*s", (int)lens[i], words[i]);
			resp_status(out, tmp);
		}
	}
}

/* One key spec: flags, the index its search begins at, and its range
 * (lastkey relative to that index, or negative from the end). */
static void reply_key_spec(struct resp_w *out, const char *notes, const char *flags, int index,
			   int lastkey, int step)
{
	resp_map(out, notes ? 4 : 3);
	if (notes) {
		resp_bulk_cstr(out, "notes");
		resp_bulk_cstr(out, notes);
	}
	resp_bulk_cstr(out, "flags");
	reply_word_set(out, flags, NULL, false);
	resp_bulk_cstr(out, "begin_search");
	resp_map(out, 2);
	resp_bulk_cstr(out, "type");
	resp_bulk_cstr(out, "index");
	resp_bulk_cstr(out, "spec");
	resp_map(out, 1);
	resp_bulk_cstr(out, "index");
	resp_int(out, index);
	resp_bulk_cstr(out, "find_keys");
	resp_map(out, 2);
	resp_bulk_cstr(out, "type");
	resp_bulk_cstr(out, "range");
	resp_bulk_cstr(out, "spec");
	resp_map(out, 3);
	resp_bulk_cstr(out, "lastkey");
	resp_int(out, lastkey);
	resp_bulk_cstr(out, "keystep");
	resp_int(out, step);
	resp_bulk_cstr(out, "limit");
	resp_int(out, 0);
}

/* The key specs Redis derives for a legacy (first, last, step) range: one,
 * or two when the keys after the first have their own flags (BITOP). */
static void reply_key_specs(struct resp_w *out, const struct cmd_def *d)
{
	if (d->rest_key_flags) {
		resp_set(out, 2);
		reply_key_spec(out, d->key_notes, d->key_flags, d->first_key, 0, 1);
		reply_key_spec(out, NULL, d->rest_key_flags, d->first_key + 1,
			       d->last_key < 0 ? d->last_key : d->last_key - d->first_key - 1,
			       d->key_step);
		return;
	}
	resp_set(out, 1);
	reply_key_spec(out, d->key_notes, d->key_flags, d->first_key,
		       d->last_key < 0 ? d->last_key : d->last_key - d->first_key, d->key_step);
}

/* One COMMAND INFO entry: the 10-element array of Redis 7.0. */
static void reply_command_info(struct resp_w *out, const struct cmd_def *d)
{
	const char *flags[16];
	int nf = cmd_flag_names(d->flags, flags, 16);
	resp_array(out, 10);
	resp_bulk_cstr(out, d->name);
	resp_int(out, d->arity);
	resp_set(out, nf);
	for (int i = 0; i < nf; i++)
		resp_status(out, flags[i]);
	resp_int(out, d->first_key);
	resp_int(out, d->last_key);
	resp_int(out, d->key_step);
	reply_word_set(out, d->acl_categories, NULL, false);
	reply_word_set(out, d->tips, NULL, true);
	if (d->first_key > 0) {
		reply_key_specs(out, d);
	} else {
		resp_set(out, 0);
	}
	if (d->subcommands) {
		int n = 0;
		for (const struct cmd_def *s = d->subcommands; s->name; s++)
			n++;
		resp_array(out, n);
		for (const struct cmd_def *s = d->subcommands; s->name; s++)
			reply_command_info(out, s);
	} else {
		resp_set(out, 0);
	}
}

/* One COMMAND DOCS value: summary, since, group, complexity[, subcommands].
 * Arguments and history are left out; Redis's clients treat them as
 * optional (redis-cli then gives no argument hints). */
static void reply_command_docs(struct resp_w *out, const struct cmd_def *d)
{
	resp_map(out, 3 + (d->complexity != NULL) + (d->subcommands != NULL));
	resp_bulk_cstr(out, "summary");
	resp_bulk_cstr(out, d->summary);
	resp_bulk_cstr(out, "since");
	resp_bulk_cstr(out, d->since);
	resp_bulk_cstr(out, "group");
	resp_bulk_cstr(out, d->group);
	if (d->complexity) { /* Redis's MONITOR has none */
		resp_bulk_cstr(out, "complexity");
		resp_bulk_cstr(out, d->complexity);
	}
	if (d->subcommands) {
		int n = 0;
		for (const struct cmd_def *s = d->subcommands; s->name; s++)
			n++;
		resp_bulk_cstr(out, "subcommands");
		resp_map(out, n);
		for (const struct cmd_def *s = d->subcommands; s->name; s++) {
			resp_bulk_cstr(out, s->name);
			reply_command_docs(out, s);
		}
	}
}

/* Look up "name" or "container|sub" as COMMAND INFO/DOCS accept them. */
static const struct cmd_def *lookup_fullname(const char *p, size_t len)
{
	const char *bar = memchr(p, '|', len);
	if (!bar)
		return cmd_lookup(p, len);
	const struct cmd_def *d = cmd_lookup(p, (size_t)(bar - p));
	return d ? cmd_lookup_sub(d, bar + 1, len - (size_t)(bar - p) - 1) : NULL;
}

/* The def a full request (argv[0..argc)) runs, as dispatch resolves it. */
static const struct cmd_def *lookup_request(const struct resp_arg *argv, int argc)
{
	const struct cmd_def *d = cmd_lookup(argv[0].p, argv[0].len);
	if (d && d->subcommands && argc >= 2)
		d = cmd_lookup_sub(d, argv[1].p, argv[1].len);
	return d;
}

static bool has_acl_category(const struct cmd_def *d, const struct resp_arg *cat)
{
	for (const char *p = d->acl_categories ? d->acl_categories : ""; *p;) {
		while (*p == ' ' || *p == '@')
			p++;
		const char *e = p;
		while (*e && *e != ' ')
			e++;
		if ((size_t)(e - p) == cat->len && strncasecmp(p, cat->p, cat->len) == 0)
			return true;
		p = e;
	}
	return false;
}

static void command_list(struct cmd_ctx *c)
{
	enum { ALL, BY_MODULE, BY_ACLCAT, BY_PATTERN } by = ALL;
	const struct resp_arg *arg = NULL;
	if (c->argc == 5 && arg_is(&c->argv[2], "filterby")) {
		arg = &c->argv[4];
		if (arg_is(&c->argv[3], "module"))
			by = BY_MODULE;
		else if (arg_is(&c->argv[3], "aclcat"))
			by = BY_ACLCAT;
		else if (arg_is(&c->argv[3], "pattern"))
			by = BY_PATTERN;
		else {
			cmd_reply_syntax(c);
			return;
		}
	} else if (c->argc != 2) {
		cmd_reply_syntax(c);
		return;
	}

	int count;
	const struct cmd_def *tab = cmd_table(&count);
	const struct cmd_def *hits[512];
	int n = 0;
	for (int i = 0; i < count; i++) {
		const struct cmd_def *d = &tab[i];
		for (const struct cmd_def *s = d; s && s->name && n < 512;) {
			bool ok = by == ALL ||
				  (by == BY_ACLCAT && has_acl_category(s, arg)) ||
				  (by == BY_PATTERN &&
				   srv_strmatch(arg->p, arg->len, s->name, strlen(s->name), true));
			if (ok)
				hits[n++] = s; /* BY_MODULE: rckv has no modules */
			/* the command itself, then each of its subcommands */
			s = s == d ? d->subcommands : s + 1;
		}
	}
	resp_array(c->out, n);
	for (int i = 0; i < n; i++)
		resp_bulk_cstr(c->out, hits[i]->name);
}

static void command_getkeys(struct cmd_ctx *c, bool with_flags)
{
	const struct resp_arg *argv = c->argv + 2;
	int argc = c->argc - 2;
	const struct cmd_def *d = lookup_request(argv, argc);
	if (!d) {
		resp_error(c->out, "ERR Invalid command specified");
		return;
	}
	if (d->first_key <= 0 && !d->getkeys) {
		resp_error(c->out, "ERR The command has no key arguments");
		return;
	}
	if (d->arity > 0 ? argc != d->arity : argc < -d->arity) {
		resp_error(c->out, "ERR Invalid number of arguments specified for command");
		return;
	}
	int stackidx[64];
	int *idx = argc <= 64 ? stackidx : malloc((size_t)argc * sizeof(int));
	if (!idx) {
		resp_error(c->out, "ERR out of memory");
		return;
	}
	int n = cmd_get_keys(d, argc, argv, idx, argc);
	resp_array(c->out, n);
	for (int i = 0; i < n; i++) {
		if (with_flags) {
			resp_array(c->out, 2);
			resp_bulk(c->out, argv[idx[i]].p, argv[idx[i]].len);
			reply_word_set(c->out, cmd_key_flags(d, argc, argv, idx[i]), "variable_flags",
				       false);
		} else {
			resp_bulk(c->out, argv[idx[i]].p, argv[idx[i]].len);
		}
	}
	if (idx != stackidx)
		free(idx);
}

static const char *const command_help[] = {
	"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"(no subcommand)",
	"    Return details about all Redis commands.",
	"COUNT",
	"    Return the total number of commands in this Redis server.",
	"LIST",
	"    Return a list of all commands in this Redis server.",
	"INFO [<command-name> ...]",
	"    Return details about multiple Redis commands.",
	"    If no command names are given, documentation details for all",
	"    commands are returned.",
	"DOCS [<command-name> ...]",
	"    Return documentation details about multiple Redis commands.",
	"    If no command names are given, documentation details for all",
	"    commands are returned.",
	"GETKEYS <full-command>",
	"    Return the keys from a full Redis command.",
	"GETKEYSANDFLAGS <full-command>",
	"    Return the keys and the access flags from a full Redis command.",
	"HELP",
	"    Prints this help.",
};

int cmd_command(struct cmd_ctx *c)
{
	int count;
	const struct cmd_def *tab = cmd_table(&count);
	if (c->argc == 1) {
		resp_array(c->out, count);
		for (int i = 0; i < count; i++)
			reply_command_info(c->out, &tab[i]);
		return 0;
	}
	const char *sub = resolve_sub(c, "COMMAND");
	if (!sub)
		return 0;

	if (strcmp(sub, "count") == 0) {
		resp_int(c->out, count);
	} else if (strcmp(sub, "info") == 0) {
		if (c->argc == 2) {
			resp_array(c->out, count);
			for (int i = 0; i < count; i++)
				reply_command_info(c->out, &tab[i]);
			return 0;
		}
		resp_array(c->out, c->argc - 2);
		for (int i = 2; i < c->argc; i++) {
			const struct cmd_def *d = lookup_fullname(c->argv[i].p, c->argv[i].len);
			if (d)
				reply_command_info(c->out, d);
			else
				resp_null(c->out);
		}
	} else if (strcmp(sub, "docs") == 0) {
		if (c->argc == 2) {
			resp_map(c->out, count);
			for (int i = 0; i < count; i++) {
				resp_bulk_cstr(c->out, tab[i].name);
				reply_command_docs(c->out, &tab[i]);
			}
			return 0;
		}
		int n = 0;
		for (int i = 2; i < c->argc; i++)
			n += lookup_fullname(c->argv[i].p, c->argv[i].len) != NULL;
		resp_map(c->out, n);
		for (int i = 2; i < c->argc; i++) {
			const struct cmd_def *d = lookup_fullname(c->argv[i].p, c->argv[i].len);
			if (!d)
				continue;
			resp_bulk_cstr(c->out, d->name);
			reply_command_docs(c->out, d);
		}
	} else if (strcmp(sub, "list") == 0) {
		command_list(c);
	} else if (strcmp(sub, "getkeys") == 0) {
		command_getkeys(c, false);
	} else if (strcmp(sub, "getkeysandflags") == 0) {
		command_getkeys(c, true);
	} else {
		reply_help(c, command_help, (int)(sizeof(command_help) / sizeof(command_help[0])));
	}
	return 0;
}

/* ======================= CONFIG ======================= */

struct cfg_pair {
	const char *name; /* the option table's own string */
	char *value;
};

struct cfg_collect {
	struct cfg_pair *v;
	int n, cap;
	bool oom;
};

static void collect_visit(void *arg, const char *name, const char *value)
{
	struct cfg_collect *cc = arg;
	for (int i = 0; i < cc->n; i++)
		if (strcmp(cc->v[i].name, name) == 0)
			return; /* matched by an earlier pattern: once only, as in 7.0 */
	if (cc->n == cc->cap) {
		int cap = cc->cap ? cc->cap * 2 : 32;
		struct cfg_pair *v = realloc(cc->v, (size_t)cap * sizeof(*v));
		if (!v) {
			cc->oom = true;
			return;
		}
		cc->v = v;
		cc->cap = cap;
	}
	char *copy = strdup(value);
	if (!copy) {
		cc->oom = true;
		return;
	}
	cc->v[cc->n++] = (struct cfg_pair){ .name = name, .value = copy };
}

static void config_get(struct cmd_ctx *c)
{
	struct node *n = c->node;
	struct cfg_collect cc = { 0 };
	pthread_mutex_lock(&n->cfg_lock);
	for (int i = 2; i < c->argc; i++) {
		/* Patterns are NUL-terminated by the parser. */
		char pat[256];
		snprintf(pat, sizeof(pat), "%.*s", (int)(c->argv[i].len < 255 ? c->argv[i].len : 255),
			 c->argv[i].p);
		cfg_get(&n->cfg, pat, collect_visit, &cc);
	}
	pthread_mutex_unlock(&n->cfg_lock);
	if (cc.oom) {
		resp_error(c->out, "ERR out of memory");
	} else {
		resp_map(c->out, cc.n);
		for (int i = 0; i < cc.n; i++) {
			resp_bulk_cstr(c->out, cc.v[i].name);
			resp_bulk_cstr(c->out, cc.v[i].value);
		}
	}
	for (int i = 0; i < cc.n; i++)
		free(cc.v[i].value);
	free(cc.v);
}

/* Copy an argument into a NUL-terminated heap string. */
static char *arg_dup(const struct resp_arg *a)
{
	char *s = malloc(a->len + 1);
	if (s) {
		memcpy(s, a->p, a->len);
		s[a->len] = '\0';
	}
	return s;
}

/*
 * CONFIG SET name value [name value ...], all or nothing as in Redis 7.0:
 * every name is checked (unknown, immutable, duplicate), every value is
 * checked on a scratch configuration, then `cc` switches the protocol (the
 * one step that can still fail, and that yields), then the rest is
 * applied under cfg_lock.
 */
static void config_set(struct cmd_ctx *c)
{
	struct node *n = c->node;
	if (c->argc % 2) {
		cmd_reply_syntax(c);
		return;
	}
	int npairs = (c->argc - 2) / 2;
	char **names = calloc((size_t)npairs, sizeof(char *));
	char **values = calloc((size_t)npairs, sizeof(char *));
	struct srv_config scratch;
	bool have_scratch = false;
	char err[512];
	int cc_pair = -1, lock_pair = -1, stages_pair = -1;
	if (!names || !values)
		goto oom;
	for (int i = 0; i < npairs; i++) {
		names[i] = arg_dup(&c->argv[2 + 2 * i]);
		values[i] = arg_dup(&c->argv[3 + 2 * i]);
		if (!names[i] || !values[i])
			goto oom;
	}

	for (int i = 0; i < npairs; i++) {
		if (!cfg_exists(names[i])) {
			resp_errorf(c->out,
				    "ERR Unknown option or number of arguments for CONFIG SET - '%s'",
				    names[i]);
			goto out;
		}
		if (!cfg_is_mutable(names[i])) {
			resp_errorf(c->out,
				    "ERR CONFIG SET failed (possibly related to argument '%s') - "
				    "can't set immutable config",
				    names[i]);
			goto out;
		}
		for (int j = 0; j < i; j++) {
			if (strcasecmp(names[j], names[i]) == 0) {
				resp_errorf(c->out,
					    "ERR CONFIG SET failed (possibly related to argument "
					    "'%s') - duplicate parameter",
					    names[i]);
				goto out;
			}
		}
		if (strcasecmp(names[i], "cc") == 0)
			cc_pair = i;
		if (strcasecmp(names[i], "cc-lock-mode") == 0)
			lock_pair = i;
		if (strcasecmp(names[i], "cc-stages") == 0)
			stages_pair = i;
	}

	cfg_defaults(&scratch);
	have_scratch = true;
	for (int i = 0; i < npairs; i++) {
		if (cfg_set(&scratch, names[i], 1, &values[i], err, sizeof(err)) != 0) {
			resp_errorf(c->out, "ERR CONFIG SET failed (possibly related to argument '%s') - %s",
				    names[i], err);
			goto out;
		}
	}

	if (cc_pair < 0 && lock_pair >= 0 && strcmp(scratch.cc_lock_mode, n->cfg.cc_lock_mode) != 0 &&
	    cc_protocol_resolve(n->cfg.cc, true) != cc_protocol_resolve(n->cfg.cc, false))
		cc_pair = lock_pair; /* the protocol's lock mode changes: a switch, see below */
	if (cc_pair >= 0 && c->txn) {
		/* Queued in MULTI: EXEC's own transaction is in flight, and the
		 * switch waits for every in-flight transaction to finish. */
		resp_errorf(c->out,
			    "ERR CONFIG SET failed (possibly related to argument '%s') - the "
			    "protocol cannot be switched inside MULTI/EXEC",
			    names[cc_pair]);
		goto out;
	}
	if (cc_pair >= 0) {
		err[0] = '\0';
		const char *to = cc_pair == lock_pair ? n->cfg.cc : values[cc_pair];
		bool shared = strcmp(lock_pair >= 0 ? scratch.cc_lock_mode : n->cfg.cc_lock_mode,
				     "shared") == 0;
		uint64_t t0 = sched_now_ns();
		int src = cc_switch(&n->cc, c->w->ccw, to, shared, err, sizeof(err));
		latency_add(n, "cc-switch", (sched_now_ns() - t0) / 1000000); /* LATENCY */
		if (src != 0) {
			resp_errorf(c->out, "ERR CONFIG SET failed (possibly related to argument '%s') - %s",
				    names[cc_pair], err[0] ? err : "protocol switch failed");
			goto out;
		}
	}
	if (stages_pair >= 0) { /* every node's, online (cc/stages.c) */
		err[0] = '\0';
		if (cc_stages_set(&n->cc, c->w->ccw, scratch.cc_stages, err, sizeof(err)) != 0) {
			resp_errorf(c->out, "ERR CONFIG SET failed (possibly related to argument '%s') - %s",
				    names[stages_pair], err[0] ? err : "cc-stages failed");
			goto out;
		}
	}

	pthread_mutex_lock(&n->cfg_lock);
	for (int i = 0; i < npairs; i++) {
		/* Validated above: this cannot fail but for memory. */
		if (cfg_set(&n->cfg, names[i], 1, &values[i], err, sizeof(err)) != 0)
			srv_log(n, LOG_WARNING, "CONFIG SET %s: %s", names[i], err);
	}
	pthread_mutex_unlock(&n->cfg_lock);
	srv_node_limits(n);
	for (int i = 0; i < npairs; i++)
		if (strcasecmp(names[i], "requirepass") == 0)
			acl_set_requirepass(n, values[i]); /* the default user's password */
	for (int i = 0; i < npairs; i++)
		srv_log(n, LOG_NOTICE, "CONFIG SET %s %s", names[i],
			strcasecmp(names[i], "requirepass") == 0 ? "(hidden)" : values[i]);
	resp_status(c->out, "OK");
	goto out;
oom:
	resp_error(c->out, "ERR out of memory");
out:
	if (have_scratch)
		cfg_free(&scratch);
	for (int i = 0; names && values && i < npairs; i++) {
		free(names[i]);
		free(values[i]);
	}
	free(names);
	free(values);
}

/*
 * Zero every worker's statistics. Each counter is owned by its worker,
 * which increments it with plain stores; a store of 0 here may race with
 * such an increment and lose the reset of that one counter (it then keeps
 * its old value plus one), which is as exact as Redis's own RESETSTAT
 * needs to be.
 */
static void zero_words(void *p, size_t size)
{
	uint64_t *word = p;
	for (size_t k = 0; k < size / sizeof(uint64_t); k++)
		ck_pr_store_64(&word[k], 0);
}

static void reset_stats(struct node *n)
{
	static_assert(sizeof(struct srv_stats) % sizeof(uint64_t) == 0,
		      "srv_stats is made of 64-bit counters only");
	static_assert(sizeof(struct cc_stats) % sizeof(uint64_t) == 0,
		      "cc_stats is made of 64-bit counters only");
	for (int i = 0; i < n->nworkers; i++) {
		if (!n->workers[i])
			continue;
		zero_words(&n->workers[i]->stats, sizeof(struct srv_stats));
		zero_words(cc_worker_stats(n->workers[i]->ccw), sizeof(struct cc_stats));
	}
	cmdstat_reset(n);
}

static void config_rewrite(struct cmd_ctx *c)
{
	struct node *n = c->node;
	if (!n->config_file) {
		resp_error(c->out, "ERR The server is running without a config file");
		return;
	}
	char err[256];
	pthread_mutex_lock(&n->cfg_lock);
	int rc = cfg_rewrite(&n->cfg, n->config_file, err, sizeof(err));
	pthread_mutex_unlock(&n->cfg_lock);
	if (rc != 0) {
		srv_log(n, LOG_WARNING, "CONFIG REWRITE failed: %s", err);
		resp_errorf(c->out, "ERR Rewriting config file: %s", err);
		return;
	}
	srv_log(n, LOG_NOTICE, "CONFIG REWRITE executed with success.");
	resp_status(c->out, "OK");
}

static const char *const config_help[] = {
	"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"GET <pattern>",
	"    Return parameters matching the glob-like <pattern> and their values.",
	"SET <directive> <value>",
	"    Set the configuration <directive> to <value>.",
	"RESETSTAT",
	"    Reset statistics reported by the INFO command.",
	"REWRITE",
	"    Rewrite the configuration file.",
	"HELP",
	"    Prints this help.",
};

int cmd_config(struct cmd_ctx *c)
{
	const char *sub = resolve_sub(c, "CONFIG");
	if (!sub)
		return 0;
	if (strcmp(sub, "get") == 0) {
		config_get(c);
	} else if (strcmp(sub, "set") == 0) {
		config_set(c);
	} else if (strcmp(sub, "resetstat") == 0) {
		reset_stats(c->node);
		resp_status(c->out, "OK");
	} else if (strcmp(sub, "rewrite") == 0) {
		config_rewrite(c);
	} else {
		reply_help(c, config_help, (int)(sizeof(config_help) / sizeof(config_help[0])));
	}
	return 0;
}

/* ======================= INFO ======================= */

static void add_words(void *dst, const void *src, size_t size)
{
	uint64_t *d = dst;
	const uint64_t *s = src;
	for (size_t k = 0; k < size / sizeof(uint64_t); k++)
		d[k] += ck_pr_load_64((uint64_t *)&s[k]);
}

/* Sum of every worker's stats, the server's and cc's, read with relaxed
 * loads (node.h, cc/node.h). */
static void sum_stats(struct node *n, struct srv_stats *sum, struct cc_stats *csum)
{
	memset(sum, 0, sizeof(*sum));
	memset(csum, 0, sizeof(*csum));
	for (int i = 0; i < n->nworkers; i++) {
		if (!n->workers[i])
			continue;
		add_words(sum, &n->workers[i]->stats, sizeof(*sum));
		add_words(csum, cc_worker_stats(n->workers[i]->ccw), sizeof(*csum));
	}
}

/* Redis's bytesToHuman. */
static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

struct info_ctx {
	struct node *n;
	struct worker *w;             /* the worker INFO runs on */
	struct srv_sbuf *b;
	struct srv_stats st;
	struct cc_stats cst;
	time_t now;
};

static void info_server(struct info_ctx *x)
{
	struct node *n = x->n;
	struct utsname un;
	char os[256] = "Linux";
	if (uname(&un) == 0)
		snprintf(os, sizeof(os), "%s %s %s", un.sysname, un.release, un.machine);
	struct timeval tv;
	gettimeofday(&tv, NULL);
	long long uptime = (long long)(x->now - n->start_time);
	pthread_mutex_lock(&n->cfg_lock);
	srv_sbuf_printf(x->b,
			"# Server\r\n"
			"redis_version:" SRV_REDIS_VERSION "\r\n"
			"redis_git_sha1:00000000\r\n"
			"redis_git_dirty:0\r\n"
			"redis_build_id:0\r\n"
			"redis_mode:standalone\r\n"
			"os:%s\r\n"
			"arch_bits:%d\r\n"
			"monotonic_clock:POSIX clock_gettime\r\n"
			"multiplexing_api:epoll\r\n"
			"gcc_version:%d.%d.%d\r\n"
			"process_id:%ld\r\n"
			"process_supervised:no\r\n"
			"run_id:%s\r\n"
			"tcp_port:%d\r\n"
			"server_time_usec:%lld\r\n"
			"uptime_in_seconds:%lld\r\n"
			"uptime_in_days:%lld\r\n"
			"executable:%s\r\n"
			"config_file:%s\r\n"
			"server_name:rckv\r\n"
			"worker_threads:%d\r\n"
			"coroutines_per_worker:%d\r\n",
			os, (int)(sizeof(long) * 8), __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__,
			(long)getpid(), n->run_id, n->cfg.port,
			(long long)tv.tv_sec * 1000000 + tv.tv_usec, uptime, uptime / 86400,
			n->executable, n->config_file ? n->config_file : "", n->nworkers,
			n->cfg.coroutines);
	pthread_mutex_unlock(&n->cfg_lock);
}

static void info_clients(struct info_ctx *x)
{
	srv_sbuf_printf(x->b,
			"# Clients\r\n"
			"connected_clients:%llu\r\n"
			"cluster_connections:0\r\n"
			"maxclients:%d\r\n"
			"blocked_clients:%llu\r\n"
			"tracking_clients:0\r\n"
			"clients_in_timeout_table:0\r\n",
			(unsigned long long)ck_pr_load_64(&x->n->connected_clients),
			ck_pr_load_int(&x->n->cfg.maxclients),
			(unsigned long long)ck_pr_load_64(&x->n->blocked_clients));
}

/*
 * INFO memory, with Redis 7's field names and formats where a field means
 * what it does in Redis (server/memory.h says what used_memory counts):
 * used_memory_dataset is the MemStore's blocks in use, used_memory_overhead
 * the heap. rckv_* fields describe the region: its size, the bytes still
 * free for blocks, its fixed index, and what of each is resident (touched
 * pages of the mapping: what the region adds to used_memory_rss).
 */
static void info_memory(struct info_ctx *x)
{
	struct node *n = x->n;
	struct srv_mem m;
	srv_mem_sample(n, &m);
	unsigned long long rss = srv_mem_rss(), total = 0;
	long page = sysconf(_SC_PAGESIZE), pages = sysconf(_SC_PHYS_PAGES);
	if (page > 0 && pages > 0)
		total = (unsigned long long)page * (unsigned long long)pages;
	const struct st_layout *L = st_region_layout(n->cc.region);
	int64_t res_region = st_region_resident(n->cc.region, 0, L->size);
	int64_t res_index = st_region_resident(n->cc.region, L->index_off, L->index_buckets * 64);
	int64_t res_blocks = st_region_resident(n->cc.region, L->slab_off,
						L->slab_count * (uint64_t)ST_SLAB_BYTES);
	uint64_t maxmem = ck_pr_load_64((uint64_t *)&n->cfg.maxmemory);
	char h_used[32], h_rss[32], h_peak[32], h_total[32], h_max[32], h_region[32], h_free[32];
	srv_bytes_human(h_used, sizeof(h_used), m.used);
	srv_bytes_human(h_rss, sizeof(h_rss), rss);
	srv_bytes_human(h_peak, sizeof(h_peak), m.peak);
	srv_bytes_human(h_total, sizeof(h_total), total);
	srv_bytes_human(h_max, sizeof(h_max), maxmem);
	srv_bytes_human(h_region, sizeof(h_region), m.st.region_bytes);
	srv_bytes_human(h_free, sizeof(h_free), m.st.free_bytes);
	pthread_mutex_lock(&n->cfg_lock);
	char policy[32];
	snprintf(policy, sizeof(policy), "%s", n->cfg.maxmemory_policy);
	pthread_mutex_unlock(&n->cfg_lock);
	srv_sbuf_printf(x->b,
			"# Memory\r\n"
			"used_memory:%llu\r\n"
			"used_memory_human:%s\r\n"
			"used_memory_rss:%llu\r\n"
			"used_memory_rss_human:%s\r\n"
			"used_memory_peak:%llu\r\n"
			"used_memory_peak_human:%s\r\n"
			"used_memory_peak_perc:%.2f%%\r\n"
			"used_memory_overhead:%llu\r\n"
			"used_memory_dataset:%llu\r\n"
			"used_memory_dataset_perc:%.2f%%\r\n"
			"total_system_memory:%llu\r\n"
			"total_system_memory_human:%s\r\n"
			"maxmemory:%llu\r\n"
			"maxmemory_human:%s\r\n"
			"maxmemory_policy:%s\r\n"
			"mem_fragmentation_ratio:%.2f\r\n"
			"mem_allocator:libc\r\n"
			"rckv_region_bytes:%llu\r\n"
			"rckv_region_human:%s\r\n"
			"rckv_region_free:%llu\r\n"
			"rckv_region_free_human:%s\r\n"
			"rckv_region_resident:%lld\r\n"
			"rckv_blocks_used:%llu\r\n"
			"rckv_blocks_bytes:%llu\r\n"
			"rckv_blocks_resident:%lld\r\n"
			"rckv_slabs:%llu\r\n"
			"rckv_slabs_assigned:%llu\r\n"
			"rckv_index_bytes:%llu\r\n"
			"rckv_index_resident:%lld\r\n"
			"rckv_heap_bytes:%llu\r\n",
			(unsigned long long)m.used, h_used, rss, h_rss, (unsigned long long)m.peak,
			h_peak, m.peak ? 100.0 * (double)m.used / (double)m.peak : 100.0,
			(unsigned long long)m.heap, (unsigned long long)m.store,
			m.used ? 100.0 * (double)m.store / (double)m.used : 0.0, total, h_total,
			(unsigned long long)maxmem, h_max, policy,
			m.used ? (double)rss / (double)m.used : 0.0,
			(unsigned long long)m.st.region_bytes, h_region,
			(unsigned long long)m.st.free_bytes, h_free, (long long)res_region,
			(unsigned long long)m.st.blocks_used, (unsigned long long)m.st.used_bytes,
			(long long)res_blocks, (unsigned long long)m.st.slabs,
			(unsigned long long)m.st.slabs_assigned,
			(unsigned long long)(L->index_buckets * 64), (long long)res_index,
			(unsigned long long)m.heap);
	uint64_t nscripts = 0, script_bytes = 0;
	if (n->scripts)
		script_cache_stats(n->scripts, &nscripts, &script_bytes);
	srv_sbuf_printf(x->b, "number_of_cached_scripts:%llu\r\nused_memory_scripts_eval:%llu\r\n",
			(unsigned long long)nscripts, (unsigned long long)script_bytes);
}

/*
 * The recovery_* fields describe what this process's start did about the
 * transactions the previous process left unfinished (server/recovery.c
 * srv_recover_local): all 0 after a clean stop or on a new region. They are
 * written once before the workers start, so they are read without a lock.
 * The persistence_group_* fields count group commit (persistence power,
 * cc/durable.c): flusher rounds, the commit points they made durable, and
 * the ratio (every writing transaction waits for 3 rounds, one of them its
 * commit point, so a lone client shows 0.33 and concurrent ones share
 * rounds); all 0 in the other modes.
 */
static void info_persistence(struct info_ctx *x)
{
	struct node *n = x->n;
	const struct st_log_stats *rs = &n->recovery;
	const uint64_t gc_flushes = ck_pr_load_64(&n->cc.gc_flushes);
	const uint64_t gc_commits = ck_pr_load_64(&n->cc.gc_commits);
	struct srv_save_info sv;
	srv_save_get_info(n, &sv);
	pthread_mutex_lock(&n->cfg_lock);
	const char *mode = n->cfg.persistence ? n->cfg.persistence : "";
	/* What the data survives (conf/rckv.conf "persistence"). */
	const char *durable = strcasecmp(mode, "none") == 0    ? "nothing (lost at exit)"
			      : strcasecmp(mode, "power") == 0 ? "power loss"
			      : strcasecmp(mode, "power-everysec") == 0
				      ? "process crash; power loss but the last second"
				      : "process crash";
	srv_sbuf_printf(x->b,
			"# Persistence\r\n"
			"loading:0\r\n"
			"async_loading:0\r\n"
			"rdb_changes_since_last_save:%llu\r\n"
			"rdb_bgsave_in_progress:%d\r\n"
			"rdb_last_save_time:%lld\r\n"
			"rdb_last_bgsave_status:%s\r\n"
			"rdb_last_bgsave_time_sec:%lld\r\n"
			"rdb_current_bgsave_time_sec:%lld\r\n"
			"rdb_saves:%llu\r\n"
			"aof_enabled:0\r\n"
			"aof_rewrite_in_progress:0\r\n"
			"persistence:%s\r\n"
			"persistence_durable_on:%s\r\n"
			"dir:%s\r\n"
			"recovered_keys:%llu\r\n"
			"last_stop_clean:%d\r\n"
			"recovery_ms:%llu\r\n"
			"recovered_txns_rolled_back:%llu\r\n"
			"recovered_records_undone:%llu\r\n"
			"recovered_txns_committed:%llu\r\n"
			"recovered_locks_released:%llu\r\n"
			"persistence_group_flushes:%llu\r\n"
			"persistence_group_commits:%llu\r\n"
			"persistence_commits_per_flush:%.2f\r\n",
			(unsigned long long)sv.changes, sv.in_progress ? 1 : 0, (long long)sv.lastsave,
			sv.last_ok ? "ok" : "err", sv.last_secs, sv.current_secs,
			(unsigned long long)sv.saves, mode, durable, n->cfg.dir ? n->cfg.dir : "",
			(unsigned long long)n->recovered_keys, n->recovered_unclean ? 0 : 1,
			(unsigned long long)n->recovery_ms, (unsigned long long)rs->txns_rolled_back,
			(unsigned long long)rs->records_undone, (unsigned long long)rs->txns_committed,
			(unsigned long long)rs->locks_released, (unsigned long long)gc_flushes,
			(unsigned long long)gc_commits,
			gc_flushes ? (double)gc_commits / (double)gc_flushes : 0.0);
	srv_sbuf_printf(x->b, "persistence_path:%s\r\n", srv_durable_path(n));
	struct st_wal_stats ws;
	st_wal_get_stats(n->cc.region, &ws);
	struct durable_stats ds;
	durable_get_stats(&n->cc, &ds);
	if (st_region_is_wal(n->cc.region)) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t now = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
		if (n->fsync_rate_at_us == 0 || now - n->fsync_rate_at_us >= 1000000u) {
			if (n->fsync_rate_at_us)
				n->fsync_rate = (double)(ws.fsyncs - n->fsync_rate_count) * 1e6 /
						(double)(now - n->fsync_rate_at_us);
			n->fsync_rate_at_us = now;
			n->fsync_rate_count = ws.fsyncs;
		}
		time_t t = time(NULL);
		srv_sbuf_printf(
			x->b,
			"log_bytes:%llu\r\n"
			"log_segment:%llu\r\n"
			"log_records:%llu\r\n"
			"log_fsyncs:%llu\r\n"
			"log_fsyncs_per_sec:%.1f\r\n"
			"log_commits_per_fsync:%.2f\r\n"
			"log_rounds_synced_by_worker:%llu\r\n"
			"log_last_error:%s\r\n"
			"log_replayed_records:%llu\r\n"
			"log_torn_bytes_ignored:%llu\r\n"
			"checkpoint_log_size:%lld\r\n"
			"checkpoints:%llu\r\n"
			"checkpoint_in_progress:%d\r\n"
			"checkpoint_age_sec:%lld\r\n"
			"checkpoint_last_ms:%.1f\r\n"
			"checkpoint_last_copy_ms:%.1f\r\n"
			"checkpoint_last_bytes:%llu\r\n"
			"checkpoint_last_error:%s\r\n",
			(unsigned long long)ws.log_bytes, (unsigned long long)ws.segment,
			(unsigned long long)ws.records, (unsigned long long)ws.fsyncs, n->fsync_rate,
			ws.fsyncs ? (double)gc_commits / (double)ws.fsyncs : 0.0,
			(unsigned long long)ds.inline_rounds,
			ws.flush_err ? strerror(-ws.flush_err) : "none",
			(unsigned long long)ws.replayed_records, (unsigned long long)ws.torn_bytes,
			n->cfg.checkpoint_log_size, (unsigned long long)ws.checkpoints,
			ws.checkpoint_running ? 1 : 0,
			ws.checkpoint_at ? (long long)(t - (time_t)ws.checkpoint_at) : -1LL,
			(double)ws.checkpoint_us / 1000.0, (double)ws.checkpoint_copy_us / 1000.0,
			(unsigned long long)ws.checkpoint_bytes,
			ws.checkpoint_err ? strerror(-ws.checkpoint_err) : "none");
	}
	if (n->cfg.power_sim) /* the count power-sim-crash-after cuts at */
		srv_sbuf_printf(x->b, "power_sim_persists:%llu\r\n",
				(unsigned long long)(st_region_is_wal(n->cc.region)
							     ? ws.sim_persists
							     : st_region_sim_persists(n->cc.region)));
	pthread_mutex_unlock(&n->cfg_lock);
}

static void info_stats(struct info_ctx *x)
{
	const struct srv_stats *s = &x->st;
	const struct cc_stats *cs = &x->cst;
	srv_sbuf_printf(x->b,
			"# Stats\r\n"
			"total_connections_received:%llu\r\n"
			"total_commands_processed:%llu\r\n"
			"instantaneous_ops_per_sec:0\r\n"
			"total_net_input_bytes:%llu\r\n"
			"total_net_output_bytes:%llu\r\n"
			"instantaneous_input_kbps:0.00\r\n"
			"instantaneous_output_kbps:0.00\r\n"
			"rejected_connections:%llu\r\n"
			"expired_keys:%llu\r\n"
			"evicted_keys:0\r\n"
			"keyspace_hits:%llu\r\n"
			"keyspace_misses:%llu\r\n"
			"pubsub_channels:%lld\r\n"
			"pubsub_patterns:%lld\r\n"
			"pubsubshard_channels:%lld\r\n"
			"pubsub_messages_delivered:%llu\r\n"
			"pubsub_clients_cut_off:%llu\r\n"
			"total_error_replies:%llu\r\n"
			"txn_committed:%llu\r\n"
			"txn_aborts:%llu\r\n"
			"txn_retries:%llu\r\n"
			"txn_timeouts:%llu\r\n"
			"txn_watch_failed:%llu\r\n"
			"txn_groups:%llu\r\n"
			"txn_group_splits:%llu\r\n"
			"absent_key_reads:%llu\r\n"
			"rckv_parts_collected:%llu\r\n",
			(unsigned long long)s->conns_received, (unsigned long long)s->commands,
			(unsigned long long)s->net_in, (unsigned long long)s->net_out,
			(unsigned long long)s->conns_rejected,
			(unsigned long long)expire_cycle_expired(x->w->node),
			(unsigned long long)s->keyspace_hits,
			(unsigned long long)s->keyspace_misses,
			ps_node_count(x->w->node, PS_CHANNEL), ps_node_count(x->w->node, PS_PATTERN),
			ps_node_count(x->w->node, PS_SHARD), (unsigned long long)s->pubsub_delivered,
			(unsigned long long)s->pubsub_cutoffs,
			(unsigned long long)(s->error_replies + s->proto_errors),
			(unsigned long long)cs->txn_committed, (unsigned long long)cs->txn_aborts,
			(unsigned long long)cs->txn_retries, (unsigned long long)cs->txn_timeouts,
			(unsigned long long)s->txn_watch_failed, (unsigned long long)s->txn_groups,
			(unsigned long long)s->txn_group_splits, (unsigned long long)s->absent_reads,
			(unsigned long long)expire_cycle_collected(x->w->node));
}

static void info_replication(struct info_ctx *x)
{
	srv_sbuf_printf(x->b,
			"# Replication\r\n"
			"role:master\r\n"
			"connected_slaves:0\r\n"
			"master_failover_state:no-failover\r\n"
			"master_replid:%s\r\n"
			"master_replid2:0000000000000000000000000000000000000000\r\n"
			"master_repl_offset:0\r\n"
			"second_repl_offset:-1\r\n"
			"repl_backlog_active:0\r\n",
			x->n->run_id);
}

static void info_cpu(struct info_ctx *x)
{
	struct rusage self = { 0 }, kids = { 0 };
	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &kids);
	srv_sbuf_printf(x->b,
			"# CPU\r\n"
			"used_cpu_sys:%ld.%06ld\r\n"
			"used_cpu_user:%ld.%06ld\r\n"
			"used_cpu_sys_children:%ld.%06ld\r\n"
			"used_cpu_user_children:%ld.%06ld\r\n",
			(long)self.ru_stime.tv_sec, (long)self.ru_stime.tv_usec,
			(long)self.ru_utime.tv_sec, (long)self.ru_utime.tv_usec,
			(long)kids.ru_stime.tv_sec, (long)kids.ru_stime.tv_usec,
			(long)kids.ru_utime.tv_sec, (long)kids.ru_utime.tv_usec);
}

/*
 * One line per protocol that ran here (and the current one), Redis's
 * "name:k=v,..." form: commits, aborts by cause, and verbs and round trips
 * per committed transaction, its aborted attempts included (RCBench's
 * sigma counts primitive invocations per transaction the same way).
 */
static void info_cc_protocols(struct info_ctx *x, const struct cc_protocol *cur)
{
	const struct cc_protocol *const *all = cc_protocol_all();
	for (int i = 0; all[i] && i < CC_MAX_PROTOCOLS; i++) {
		const struct cc_proto_stats *ps = &x->cst.proto[i];
		uint64_t aborts = 0, verbs = 0;
		for (int k = 0; k < CC_CAUSES; k++)
			aborts += ps->aborts_by_cause[k];
		for (int k = 0; k < FAB_ONESIDED_KINDS; k++)
			verbs += ps->fab.verbs[k];
		if (all[i] != cur && ps->commits + aborts + ps->errors == 0)
			continue;
		char id[32];
		snprintf(id, sizeof(id), "%s", cc_protocol_id(all[i]));
		for (char *c = id; *c; c++)
			if (*c == '/')
				*c = '_';
		srv_sbuf_printf(x->b, "cc_proto_%s:commits=%llu,aborts=%llu,errors=%llu", id,
				(unsigned long long)ps->commits, (unsigned long long)aborts,
				(unsigned long long)ps->errors);
		for (int k = 0; k < CC_CAUSES; k++)
			srv_sbuf_printf(x->b, ",aborts_%s=%llu", cc_cause_name(k),
					(unsigned long long)ps->aborts_by_cause[k]);
		srv_sbuf_printf(x->b,
				",abort_rate=%.4f,verbs_per_txn=%.2f,reads_per_txn=%.2f,"
				"writes_per_txn=%.2f,cas_per_txn=%.2f,faa_per_txn=%.2f,"
				"round_trips_per_txn=%.2f,fetches=%llu,"
				"fetch_round_trips_per_txn=%.2f\r\n",
				ratio(aborts, ps->commits + aborts), ratio(verbs, ps->commits),
				ratio(ps->fab.verbs[FAB_READ], ps->commits),
				ratio(ps->fab.verbs[FAB_WRITE], ps->commits),
				ratio(ps->fab.verbs[FAB_CAS], ps->commits),
				ratio(ps->fab.verbs[FAB_FAA], ps->commits),
				ratio(ps->fab.round_trips, ps->commits),
				(unsigned long long)ps->fetches,
				ratio(ps->fetch_round_trips, ps->commits));
	}
}

/*
 * The stages of the current protocol (RCC's latency breakdown, Fig. 13):
 * per committed transaction, its aborted attempts included (and as totals
 * since the last CONFIG RESETSTAT, for tools that take differences), the
 * time its round trips of the stage took (fab_exec's wall time, charged to the
 * stage of a batch's first op), the one-sided verbs and the RPCs it
 * issued, and the stage's mode. A batch that carries several stages (the
 * one-node commit: records, installs, retire, unlocks) is one round trip,
 * charged to its first stage.
 */
static void info_cc_stages(struct info_ctx *x, const struct cc_protocol *cur)
{
	const uint32_t rpc = ck_pr_load_32(&x->n->cc.rpc_stages);
	char modes[160];
	cc_stages_format(rpc, modes, sizeof(modes));
	srv_sbuf_printf(x->b, "cc_stages:%s\r\n", modes);
	int pi = cur ? cc_protocol_index(cur) : -1;
	if (pi < 0 || pi >= CC_MAX_PROTOCOLS)
		return;
	const struct cc_proto_stats *ps = &x->cst.proto[pi];
	for (int s = 0; s < CC_STAGES; s++) {
		uint64_t v = ps->fab.tag_verbs[s], r = ps->fab.tag_rpcs[s];
		srv_sbuf_printf(x->b,
				"cc_stage_%s:usec_per_txn=%.2f,ops_per_txn=%.2f,verbs_per_txn=%.2f,"
				"rpcs_per_txn=%.2f,mode=%s,usec=%llu,verbs=%llu,rpcs=%llu\r\n",
				cc_stage_name(s), ratio(ps->fab.tag_ns[s], ps->commits) / 1000.0,
				ratio(v + r, ps->commits), ratio(v, ps->commits), ratio(r, ps->commits),
				(rpc >> s) & 1u ? "rpc" : "onesided",
				(unsigned long long)(ps->fab.tag_ns[s] / 1000), (unsigned long long)v,
				(unsigned long long)r);
	}
}

static void info_cc(struct info_ctx *x)
{
	struct node *n = x->n;
	const struct cc_stats *s = &x->cst;
	const struct cc_protocol *p = ck_pr_load_ptr(&n->cc.proto);
	uint64_t verbs = 0;
	for (int k = 0; k < FAB_ONESIDED_KINDS; k++)
		verbs += s->fab.verbs[k];
	uint64_t attempts = s->txn_committed + s->txn_aborts;
	pthread_mutex_lock(&n->cfg_lock);
	const char *name = p ? p->name : (n->cfg.cc ? n->cfg.cc : "");
	srv_sbuf_printf(x->b,
			"# CC\r\n"
			"cc_protocol:%s\r\n"
			"cc_epoch:%llu\r\n"
			"cc_txn_committed:%llu\r\n"
			"cc_aborts:%llu\r\n",
			name, (unsigned long long)ck_pr_load_64(&n->cc.proto_epoch),
			(unsigned long long)s->txn_committed, (unsigned long long)s->txn_aborts);
	for (int k = 0; k < CC_CAUSES; k++)
		srv_sbuf_printf(x->b, "cc_aborts_%s:%llu\r\n", cc_cause_name(k),
				(unsigned long long)s->aborts_by_cause[k]);
	srv_sbuf_printf(x->b,
			"cc_lock_waits:%llu\r\n"
			"cc_wounds:%llu\r\n"
			"cc_lease_renewals:%llu\r\n"
			"cc_lease_hits:%llu\r\n"
			"cc_retries:%llu\r\n"
			"cc_abort_rate:%.4f\r\n"
			"cc_verbs_per_txn:%.2f\r\n"
			"cc_reads_per_txn:%.2f\r\n"
			"cc_writes_per_txn:%.2f\r\n"
			"cc_cas_per_txn:%.2f\r\n"
			"cc_faa_per_txn:%.2f\r\n"
			"cc_round_trips_per_txn:%.2f\r\n"
			"cc_rpcs_per_txn:%.2f\r\n"
			"cc_addr_cache_hits:%llu\r\n"
			"cc_addr_cache_misses:%llu\r\n",
			(unsigned long long)s->lock_waits, (unsigned long long)s->wounds,
			(unsigned long long)s->lease_renewals, (unsigned long long)s->lease_hits,
			(unsigned long long)s->txn_retries, ratio(s->txn_aborts, attempts),
			ratio(verbs, s->fab_txns), ratio(s->fab.verbs[FAB_READ], s->fab_txns),
			ratio(s->fab.verbs[FAB_WRITE], s->fab_txns),
			ratio(s->fab.verbs[FAB_CAS], s->fab_txns),
			ratio(s->fab.verbs[FAB_FAA], s->fab_txns),
			ratio(s->fab.round_trips, s->fab_txns),
			ratio(s->fab.verbs[FAB_RPC], s->fab_txns),
			(unsigned long long)s->addr_cache_hits, (unsigned long long)s->addr_cache_misses);
	pthread_mutex_unlock(&n->cfg_lock);
	struct calvin_stats cs;
	uint64_t digest;
	calvin_stats_get(&n->cc, &cs, &digest);
	struct calvin_ring_stats rs;
	calvin_acquire_stats(&n->cc, &rs);
	srv_sbuf_printf(x->b,
			"calvin_epoch:%llu\r\n"
			"calvin_epochs_closed:%llu\r\n"
			"calvin_epochs_processed:%llu\r\n"
			"calvin_txns_sequenced:%llu\r\n"
			"calvin_txns_scheduled:%llu\r\n"
			"calvin_lock_waits:%llu\r\n"
			"calvin_cancelled:%llu\r\n"
			"calvin_values_forwarded:%llu\r\n"
			"calvin_values_adopted:%llu\r\n"
			"calvin_order_digest:%016llx\r\n"
			"calvin_acquire_rpcs:%llu\r\n"
			"calvin_acquire_rpc_bytes:%llu\r\n"
			"calvin_acquire_writes:%llu\r\n"
			"calvin_acquire_write_bytes:%llu\r\n"
			"calvin_acquire_hellos:%llu\r\n"
			"calvin_acquire_doorbells:%llu\r\n"
			"calvin_acquire_refused:%llu\r\n"
			"calvin_acquire_buffers:%llu\r\n",
			(unsigned long long)cs.epoch, (unsigned long long)cs.epochs_closed,
			(unsigned long long)cs.epochs_processed, (unsigned long long)cs.txns_sequenced,
			(unsigned long long)cs.txns_scheduled, (unsigned long long)cs.lock_waits,
			(unsigned long long)cs.cancelled, (unsigned long long)cs.values_forwarded,
			(unsigned long long)cs.values_adopted, (unsigned long long)digest,
			(unsigned long long)rs.acquire_rpcs, (unsigned long long)rs.acquire_rpc_bytes,
			(unsigned long long)rs.acquire_writes, (unsigned long long)rs.acquire_write_bytes,
			(unsigned long long)rs.hellos, (unsigned long long)rs.doorbells,
			(unsigned long long)rs.refused, (unsigned long long)rs.buffers);
	info_cc_protocols(x, p);
	info_cc_stages(x, p);
}

static void info_fabric(struct info_ctx *x)
{
	struct node *n = x->n;
	const struct cc_stats *s = &x->cst;
	pthread_mutex_lock(&n->cfg_lock);
	srv_sbuf_printf(x->b,
			"# Fabric\r\n"
			"fabric:%s\r\n"
			"fabric_delay_us:%d\r\n"
			"fabric_txns:%llu\r\n"
			"fabric_reads:%llu\r\n"
			"fabric_writes:%llu\r\n"
			"fabric_cas:%llu\r\n"
			"fabric_faa:%llu\r\n"
			"fabric_rpcs:%llu\r\n"
			"fabric_round_trips:%llu\r\n"
			"fabric_read_bytes:%llu\r\n"
			"fabric_write_bytes:%llu\r\n",
			n->cfg.fabric ? n->cfg.fabric : "", n->cfg.fabric_delay_us,
			(unsigned long long)s->fab_txns, (unsigned long long)s->fab.verbs[FAB_READ],
			(unsigned long long)s->fab.verbs[FAB_WRITE],
			(unsigned long long)s->fab.verbs[FAB_CAS],
			(unsigned long long)s->fab.verbs[FAB_FAA],
			(unsigned long long)s->fab.verbs[FAB_RPC],
			(unsigned long long)s->fab.round_trips,
			(unsigned long long)s->fab.bytes[FAB_READ],
			(unsigned long long)s->fab.bytes[FAB_WRITE]);
	pthread_mutex_unlock(&n->cfg_lock);
}

static void info_cluster(struct info_ctx *x)
{
	/* rckv shows every node as a standalone Redis (DESIGN.md section 7):
	 * cluster_enabled stays 0 so that cluster-aware clients do not refuse
	 * cross-slot MULTI; the layout is in the rckv_ fields and RCKV NODES. */
	struct node *n = x->n;
	const struct slot_map *m = ck_pr_load_ptr(&n->slots);
	srv_sbuf_printf(x->b,
			"# Cluster\r\n"
			"cluster_enabled:0\r\n"
			"rckv_node:%d\r\n"
			"rckv_cluster_size:%d\r\n"
			"rckv_cluster_id:%016llx\r\n"
			"rckv_fabric:%s\r\n",
			n->cfg.node_id, m ? m->nnodes : 1,
			(unsigned long long)cluster_id_of(n), fab_backend_name(n->cc.fab));
	const struct pl_map *pm = cc_placement_begin(x->w->ccw);
	srv_sbuf_printf(x->b, "rckv_replicas:%d\r\nrckv_epoch:%llu\r\n", pm->replicas,
			(unsigned long long)pm->epoch);
	struct mb_view v = { .role = "none" };
	if (n->membership) {
		/* The Raft group (server/membership.h): who leads, this node's
		 * lease, the configuration applied and the one in use. */
		mb_view(n->membership, &v);
		srv_sbuf_printf(x->b,
				"rckv_raft_role:%s\r\nrckv_raft_leader:%u\r\nrckv_raft_term:%llu\r\n"
				"rckv_config_applied:%llu\r\nrckv_lease_ms:%llu\r\n"
				"rckv_config_changes:%llu\r\nrckv_rejoin_copied_keys:%llu\r\n",
				v.role, v.leader, (unsigned long long)v.term,
				(unsigned long long)v.epoch, (unsigned long long)v.lease_ms_left,
				(unsigned long long)v.failovers, (unsigned long long)v.copied_keys);
	}
	for (int i = 0; m && i < m->nnodes; i++) {
		const struct slot_node *sn = &m->nodes[i];
		unsigned first = SLOT_COUNT, last = 0, count = 0, backup = 0;
		for (unsigned sl = 0; sl < SLOT_COUNT; sl++) {
			const struct pl_set *set = pl_slot_set(pm, sl);
			if (set->node[0] == sn->id) {
				if (first == SLOT_COUNT)
					first = sl;
				last = sl;
				count++;
			}
			for (int r = 1; r < set->n; r++)
				backup += set->node[r] == sn->id;
		}
		uint64_t b = 1ull << sn->id;
		srv_sbuf_printf(x->b,
				"rckv_node%d:addr=%s:%d,fabric=%s,state=%s,slots=%u,first_slot=%u,"
				"last_slot=%u,backup_slots=%u%s\r\n",
				sn->id, sn->host, sn->port, sn->fabric_addr[0] ? sn->fabric_addr : "-",
				(v.out & b) ? "out" : (v.joining & b) ? "joining" : (v.late & b) ? "late" : "up",
				count, count ? first : 0, count ? last : 0, backup,
				sn->id == n->cfg.node_id ? ",self=1" : "");
	}
	cc_placement_end(x->w->ccw);
}

static void info_commandstats(struct info_ctx *x)
{
	srv_sbuf_printf(x->b, "# Commandstats\r\n");
	cmdstat_info_commands(x->n, x->b);
}

static void info_latencystats(struct info_ctx *x)
{
	srv_sbuf_printf(x->b, "# Latencystats\r\n");
	cmdstat_info_latency(x->n, x->b);
}

static void info_keyspace(struct info_ctx *x)
{
	srv_sbuf_printf(x->b, "# Keyspace\r\n");
	/* A full scan of the local region: INFO is not a hot path. */
	uint64_t keys = cluster_local_count(x->n);
	if (keys)
		srv_sbuf_printf(x->b, "db0:keys=%llu,expires=%llu,avg_ttl=0\r\n",
				(unsigned long long)keys,
				(unsigned long long)expire_cycle_expiring(x->n));
}

static const struct {
	const char *name;
	void (*fn)(struct info_ctx *x);
	bool not_default; /* only by name, "all" or "everything", as in Redis */
} info_sections[] = {
	{ "server", info_server, false },
	{ "clients", info_clients, false },
	{ "memory", info_memory, false },
	{ "persistence", info_persistence, false },
	{ "stats", info_stats, false },
	{ "replication", info_replication, false },
	{ "cpu", info_cpu, false },
	{ "commandstats", info_commandstats, true },
	{ "latencystats", info_latencystats, true },
	{ "cc", info_cc, false },
	{ "fabric", info_fabric, false },
	{ "cluster", info_cluster, false },
	{ "keyspace", info_keyspace, false },
};

#define NSECTIONS ((int)(sizeof(info_sections) / sizeof(info_sections[0])))

int cmd_info(struct cmd_ctx *c)
{
	bool want[NSECTIONS];
	bool everything = false, dflt = c->argc == 1;
	memset(want, 0, sizeof(want));
	for (int i = 1; i < c->argc; i++) {
		const struct resp_arg *a = &c->argv[i];
		if (arg_is(a, "all") || arg_is(a, "everything"))
			everything = true;
		if (arg_is(a, "default"))
			dflt = true;
		for (int k = 0; k < NSECTIONS; k++)
			if (arg_is(a, info_sections[k].name))
				want[k] = true;
		/* An unknown section adds nothing, as in Redis. */
	}
	struct srv_sbuf b = { 0 };
	struct info_ctx x = { .n = c->node, .w = c->w, .b = &b, .now = time(NULL) };
	sum_stats(c->node, &x.st, &x.cst);
	int emitted = 0;
	for (int k = 0; k < NSECTIONS; k++) {
		if (!everything && !want[k] && !(dflt && !info_sections[k].not_default))
			continue;
		if (emitted++)
			srv_sbuf_printf(&b, "\r\n"); /* a blank line between sections */
		info_sections[k].fn(&x);
	}
	if (b.failed)
		resp_error(c->out, "ERR out of memory");
	else
		resp_verbatim(c->out, b.p ? b.p : "", b.len);
	srv_sbuf_free(&b);
	return 0;
}

/* ======================= TIME SHUTDOWN ======================= */

/* ROLE: every rckv node is a primary to its clients (replicas are the
 * MemStore's, not Redis's replication): Redis's reply of a master with no
 * replicas. */
int cmd_role(struct cmd_ctx *c)
{
	resp_array(c->out, 3);
	resp_bulk_cstr(c->out, "master");
	resp_int(c->out, 0);
	resp_array(c->out, 0);
	return 0;
}

/* WAIT: a commit installs on every replica of its keys before it replies
 * (FORD's coalescent commit, DESIGN.md section 7), so every acknowledged
 * write is already on replicas - 1 other nodes: answered at once. */
int cmd_wait(struct cmd_ctx *c)
{
	long long want, ms;
	if (srv_str2ll(c->argv[1].p, c->argv[1].len, &want) != 0) {
		cmd_reply_not_int(c);
		return 0;
	}
	if (srv_str2ll(c->argv[2].p, c->argv[2].len, &ms) != 0) {
		resp_error(c->out, "ERR timeout is not an integer or out of range");
		return 0;
	}
	if (ms < 0) {
		resp_error(c->out, "ERR timeout is negative");
		return 0;
	}
	resp_int(c->out, c->node->cfg.replicas - 1);
	return 0;
}

int cmd_time(struct cmd_ctx *c)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	resp_array(c->out, 2);
	resp_bulk_ll(c->out, (long long)tv.tv_sec);
	resp_bulk_ll(c->out, (long long)tv.tv_usec);
	return 0;
}

int cmd_shutdown(struct cmd_ctx *c)
{
	bool nosave = false, save = false, abort_ = false, other = false;
	for (int i = 1; i < c->argc; i++) {
		const struct resp_arg *a = &c->argv[i];
		if (arg_is(a, "nosave"))
			nosave = true;
		else if (arg_is(a, "save"))
			save = true;
		else if (arg_is(a, "now") || arg_is(a, "force"))
			other = true;
		else if (arg_is(a, "abort"))
			abort_ = true;
		else {
			cmd_reply_syntax(c);
			return 0;
		}
	}
	if ((abort_ && (nosave || save || other)) || (nosave && save)) {
		cmd_reply_syntax(c);
		return 0;
	}
	if (abort_) {
		/* rckv stops at once, so a shutdown is never in progress. */
		resp_error(c->out, "ERR No shutdown in progress.");
		return 0;
	}
	/* Every commit is already in the region per the persistence policy,
	 * so SAVE and NOSAVE stop the same way: workers finish, main closes
	 * the region cleanly. No reply, as in Redis: the connection closes. */
	struct node *n = c->node;
	n->exit_code = 0;
	srv_request_shutdown(n);
	for (int i = 0; i < n->nworkers; i++)
		if (n->workers[i])
			worker_wake(n->workers[i]); /* stop accepting at once */
	c->cl->flags |= CL_CLOSE_AFTER_REPLY;
	return 0;
}

/* ======================= FUNCTION ======================= */

static const char *const function_help[] = {
	"FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"FLUSH [ASYNC|SYNC]",
	"    Delete all the libraries (rckv has no function libraries: a no-op).",
	"HELP",
	"    Prints this help.",
};

int cmd_function(struct cmd_ctx *c)
{
	const char *sub = resolve_sub(c, "FUNCTION");
	if (!sub)
		return 0;
	if (strcmp(sub, "flush") == 0) {
		if (c->argc > 3) {
			resp_errorf(c->out,
				    "ERR unknown subcommand or wrong number of arguments for '%.*s'. "
				    "Try FUNCTION HELP.",
				    clamp128(c->argv[1].len), c->argv[1].p);
		} else if (c->argc == 3 && !arg_is(&c->argv[2], "sync") &&
			   !arg_is(&c->argv[2], "async")) {
			resp_error(c->out, "ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
		} else {
			/* There are never any functions to delete. */
			resp_status(c->out, "OK");
		}
	} else {
		reply_help(c, function_help, (int)(sizeof(function_help) / sizeof(function_help[0])));
	}
	return 0;
}

/* ======================= DEBUG ======================= */

static const char *const debug_help[] = {
	"DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"ERROR <string>",
	"    Return a Redis protocol error with <string> as message. Useful for clients",
	"    unit tests to simulate Redis errors.",
	"LOG <message>",
	"    Write <message> to the server log.",
	"OBJECT <key>",
	"    Show low level info about the `key` and associated value.",
	"DIGEST-VALUE <key> [<key> ...]",
	"    Output a hex signature of the values of all the specified keys.",
	"RELOAD [option ...]",
	"    Save the RDB on disk and reload it back to memory. Options: MERGE, NOFLUSH,",
	"    NOSAVE. (rckv: a SAVE; the data stays where it is, nothing is reloaded.)",
	"SLEEP <seconds>",
	"    Stop the server for <seconds>. Decimals allowed.",
	"    (rckv: only this connection waits; other clients are served.)",
	"SET-ACTIVE-EXPIRE <0|1>",
	"    Setting it to 0 disables the active expiry of keys (they still read as",
	"    absent once past their time). On a cluster, this node's only.",
	"FABRIC-LOSE-REPLY <node> [<count> [<after>]]",
	"    (rckv, 'testing yes', tcp fabric) After <after> (default 0) more, the",
	"    next <count> (default 1) fabric requests to <node> run there, but their",
	"    replies are lost, as when a connection breaks.",
	"CALVIN-STALL-DELIVER",
	"    (rckv, 'testing yes', cc calvin) The next epoch this node closes is",
	"    delivered to one other node only, and the closing stalls for 30 s, as",
	"    when its initiator hangs or dies between its DELIVERs.",
	"HELP",
	"    Prints this help.",
};

/* Replace CR and LF so that text from a client cannot end a reply line. */
static void one_line(char *s)
{
	for (; *s; s++)
		if (*s == '\r' || *s == '\n')
			*s = ' ';
}

/* DEBUG FABRIC-LOSE-REPLY node [count [after]]: a fault for the tests of
 * what a transaction leaves behind when a reply is lost (fab_lose_replies). */
static void debug_lose_reply(struct cmd_ctx *c)
{
	long long node = 0, count = 1, after = 0;
	if (!c->node->cfg.testing) {
		resp_error(c->out, "ERR DEBUG FABRIC-LOSE-REPLY needs 'testing yes'");
		return;
	}
	if (srv_str2ll(c->argv[2].p, c->argv[2].len, &node) || node < 0 || node >= FAB_MAX_NODES ||
	    (c->argc >= 4 && (srv_str2ll(c->argv[3].p, c->argv[3].len, &count) || count < 0 ||
			      count > 1000000)) ||
	    (c->argc == 5 && (srv_str2ll(c->argv[4].p, c->argv[4].len, &after) || after < 0 ||
			      after > 1000000))) {
		resp_error(c->out, "ERR value is not an integer or out of range");
		return;
	}
	int rc = fab_lose_replies(c->node->cc.fab, (uint16_t)node, (uint32_t)count,
				  (uint32_t)after);
	if (rc == -ENOTSUP)
		resp_error(c->out, "ERR DEBUG FABRIC-LOSE-REPLY needs the tcp fabric");
	else if (rc)
		resp_errorf(c->out, "ERR no peer node %lld", node);
	else
		resp_status(c->out, "OK");
}

/* DEBUG CALVIN-STALL-DELIVER: a fault for the tests of an epoch whose
 * initiator died between its DELIVERs (calvin_stall_deliver). */
static void debug_calvin_stall(struct cmd_ctx *c)
{
	if (!c->node->cfg.testing) {
		resp_error(c->out, "ERR DEBUG CALVIN-STALL-DELIVER needs 'testing yes'");
		return;
	}
	calvin_stall_deliver(&c->node->cc);
	resp_status(c->out, "OK");
}

int cmd_debug(struct cmd_ctx *c)
{
	const struct resp_arg *sub = &c->argv[1];
	if (c->argc == 2 && arg_is(sub, "help")) {
		reply_help(c, debug_help, (int)(sizeof(debug_help) / sizeof(debug_help[0])));
	} else if (c->argc == 3 && arg_is(sub, "log")) {
		srv_log(c->node, LOG_WARNING, "DEBUG LOG: %.*s", (int)c->argv[2].len, c->argv[2].p);
		resp_status(c->out, "OK");
	} else if (c->argc == 3 && arg_is(sub, "error")) {
		char *msg = arg_dup(&c->argv[2]);
		if (!msg) {
			resp_error(c->out, "ERR out of memory");
			return 0;
		}
		/* Verbatim, as Redis sends it: no "ERR " added, a leading '-'
		 * kept (resp_error would take it for the reply's own). */
		one_line(msg);
		resp_w_raw(c->out, "-", 1);
		resp_w_raw(c->out, msg, strlen(msg));
		resp_w_raw(c->out, "\r\n", 2);
		free(msg);
	} else if (c->argc == 3 && arg_is(sub, "object")) {
		return cmd_debug_object(c);
	} else if (c->argc >= 2 && arg_is(sub, "digest-value")) {
		return cmd_debug_digest_value(c);
	} else if (arg_is(sub, "reload")) {
		return srv_debug_reload(c);
	} else if (c->argc == 3 && arg_is(sub, "set-active-expire")) {
		expire_cycle_enable(c->node, !(c->argv[2].len == 1 && c->argv[2].p[0] == '0'));
		resp_status(c->out, "OK");
	} else if (c->argc >= 3 && c->argc <= 5 && arg_is(sub, "fabric-lose-reply")) {
		debug_lose_reply(c);
	} else if (c->argc == 2 && arg_is(sub, "calvin-stall-deliver")) {
		debug_calvin_stall(c);
	} else if (c->argc == 3 && arg_is(sub, "sleep")) {
		/* strtod as Redis: text that is not a number sleeps 0 s. */
		char buf[64];
		snprintf(buf, sizeof(buf), "%.*s", (int)(c->argv[2].len < 63 ? c->argv[2].len : 63),
			 c->argv[2].p);
		double secs = strtod(buf, NULL);
		if (!(secs > 0) || !isfinite(secs))
			secs = 0;
		if (secs > 0) {
			uint64_t ns = (uint64_t)(secs * 1e9);
			/* On a coroutine, sleeping yields: the worker keeps serving
			 * its other clients (rckv never busy-waits). */
			if (c->w && c->w->sched && sched_in_coro(c->w->sched)) {
				sched_sleep(c->w->sched, ns);
			} else {
				struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
						       .tv_nsec = (long)(ns % 1000000000u) };
				while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
					;
			}
		}
		resp_status(c->out, "OK");
	} else {
		resp_errorf(c->out,
			    "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try "
			    "DEBUG HELP.",
			    clamp128(sub->len), sub->p);
	}
	return 0;
}
