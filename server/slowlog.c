/*
 * slowlog.c: the slow log and the SLOWLOG command, with Redis 7.0's
 * entries: [id, unix time, duration in us, [args], "ip:port", name].
 *
 * A transaction's entry (EXEC, a script, or any command whose transaction
 * was retried after CC aborts) carries one more string at the end of its
 * arguments, "(rckv: cc=<protocol> retries=<n>)". There, because Redis
 * itself puts text that is not an argument in that array ("... (2 more
 * arguments)", "... (10 more bytes)"), so every client and tool that reads
 * slow logs already takes it; an extra seventh element would break the
 * parsers that expect six (redis-py's among them), and the client name
 * field is what operators match clients by (CLIENT LIST, CLIENT KILL).
 */
#include "server/slowlog.h"

#include <ck_pr.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/client.h"
#include "server/command.h"
#include "server/node.h"
#include "server/strutil.h"

#define SLOWLOG_MAX_ARGC 32
#define SLOWLOG_MAX_ARGLEN 128

struct entry {
	struct entry *next; /* older */
	uint64_t id;
	long long time, us;
	int argc;
	struct resp_arg *argv; /* one allocation with the bytes */
	char addr[64];
	char *name;
};

struct slowlog {
	pthread_mutex_t mu; /* guards every field */
	struct entry *head; /* newest */
	long long len;
	uint64_t next_id;
};

int slowlog_create(struct node *n)
{
	struct slowlog *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->mu, NULL);
	n->slowlog = s;
	return 0;
}

static void entry_free(struct entry *e)
{
	free(e->argv);
	free(e->name);
	free(e);
}

static void free_list(struct entry *e)
{
	while (e) {
		struct entry *next = e->next;
		entry_free(e);
		e = next;
	}
}

void slowlog_destroy(struct node *n)
{
	struct slowlog *s = n->slowlog;
	if (!s)
		return;
	free_list(s->head);
	pthread_mutex_destroy(&s->mu);
	free(s);
	n->slowlog = NULL;
}

bool slowlog_wants(struct node *n, uint64_t us)
{
	long long t = (long long)ck_pr_load_64((uint64_t *)&n->cfg.slowlog_slower_than);
	return t >= 0 && (long long)us >= t;
}

/* Cut the list to `max` entries; returns the cut tail to free. Locked. */
static struct entry *trim_locked(struct slowlog *s, long long max)
{
	if (s->len <= max)
		return NULL;
	struct entry **p = &s->head;
	for (long long i = 0; i < max; i++)
		p = &(*p)->next;
	struct entry *tail = *p;
	*p = NULL;
	s->len = max;
	return tail;
}

void slowlog_add(struct node *n, const struct client *cl, int argc, const struct resp_arg *argv,
		 uint64_t us, const char *note)
{
	struct slowlog *s = n->slowlog;
	int keep = argc > SLOWLOG_MAX_ARGC ? SLOWLOG_MAX_ARGC : argc;
	int total = keep + (note ? 1 : 0);
	char more_args[64], more_bytes[SLOWLOG_MAX_ARGC][64];
	size_t bytes = 0;
	if (argc > SLOWLOG_MAX_ARGC)
		snprintf(more_args, sizeof(more_args), "... (%d more arguments)",
			 argc - SLOWLOG_MAX_ARGC + 1);
	for (int i = 0; i < keep; i++) {
		if (i == SLOWLOG_MAX_ARGC - 1 && argc > SLOWLOG_MAX_ARGC) {
			bytes += strlen(more_args);
		} else if (argv[i].len > SLOWLOG_MAX_ARGLEN) {
			snprintf(more_bytes[i], sizeof(more_bytes[i]), "... (%zu more bytes)",
				 argv[i].len - SLOWLOG_MAX_ARGLEN);
			bytes += SLOWLOG_MAX_ARGLEN + strlen(more_bytes[i]);
		} else {
			bytes += argv[i].len;
		}
	}
	if (note)
		bytes += strlen(note);
	struct entry *e = calloc(1, sizeof(*e));
	char *mem = malloc((size_t)total * sizeof(struct resp_arg) + bytes + 1);
	if (!e || !mem) {
		free(e);
		free(mem);
		return;
	}
	e->argv = (struct resp_arg *)mem;
	char *p = mem + (size_t)total * sizeof(struct resp_arg);
	for (int i = 0; i < keep; i++) {
		const char *src = argv[i].p;
		size_t len = argv[i].len, tail = 0;
		const char *tailp = NULL;
		if (i == SLOWLOG_MAX_ARGC - 1 && argc > SLOWLOG_MAX_ARGC) {
			src = more_args;
			len = strlen(more_args);
		} else if (len > SLOWLOG_MAX_ARGLEN) {
			len = SLOWLOG_MAX_ARGLEN;
			tailp = more_bytes[i];
			tail = strlen(tailp);
		}
		e->argv[i].p = p;
		e->argv[i].len = len + tail;
		memcpy(p, src, len);
		if (tail)
			memcpy(p + len, tailp, tail);
		p += len + tail;
	}
	if (note) {
		e->argv[keep].p = p;
		e->argv[keep].len = strlen(note);
		memcpy(p, note, strlen(note));
	}
	e->argc = total;
	e->time = (long long)time(NULL);
	e->us = (long long)us;
	snprintf(e->addr, sizeof(e->addr), "%s", cl->addr);
	e->name = cl->name ? strdup(cl->name) : NULL;

	long long max = (long long)ck_pr_load_64((uint64_t *)&n->cfg.slowlog_max_len);
	pthread_mutex_lock(&s->mu);
	e->id = s->next_id++;
	e->next = s->head;
	s->head = e;
	s->len++;
	struct entry *cut = trim_locked(s, max);
	pthread_mutex_unlock(&s->mu);
	free_list(cut);
}

/* ---- SLOWLOG ---- */

static const char *const slowlog_help[] = {
	"SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"GET [<count>]",
	"    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
	"    Entries are made of:",
	"    id, timestamp, time in microseconds, arguments array, client IP and port,",
	"    client name",
	"LEN",
	"    Return the length of the slowlog.",
	"RESET",
	"    Reset the slowlog.",
	"HELP",
	"    Prints this help.",
};

static void slowlog_get(struct cmd_ctx *c, struct slowlog *s)
{
	long long count = 10;
	if (c->argc == 3 &&
	    (srv_str2ll(c->argv[2].p, c->argv[2].len, &count) != 0 || count < -1)) {
		resp_error(c->out, "ERR count should be greater than or equal to -1");
		return;
	}
	pthread_mutex_lock(&s->mu);
	long long n = count < 0 || count > s->len ? s->len : count;
	resp_array(c->out, n);
	struct entry *e = s->head;
	for (long long i = 0; i < n; i++, e = e->next) {
		resp_array(c->out, 6);
		resp_int(c->out, (long long)e->id);
		resp_int(c->out, e->time);
		resp_int(c->out, e->us);
		resp_array(c->out, e->argc);
		for (int k = 0; k < e->argc; k++)
			resp_bulk(c->out, e->argv[k].p, e->argv[k].len);
		resp_bulk_cstr(c->out, e->addr);
		resp_bulk_cstr(c->out, e->name ? e->name : "");
	}
	pthread_mutex_unlock(&s->mu);
}

int cmd_slowlog(struct cmd_ctx *c)
{
	struct slowlog *s = c->node->slowlog;
	const struct cmd_def *d = cmd_lookup(c->argv[0].p, c->argv[0].len);
	const struct cmd_def *sub = cmd_lookup_sub(d, c->argv[1].p, c->argv[1].len);
	const char *name = sub ? sub->name + strlen("slowlog|") : "help";
	if (strcmp(name, "get") == 0) {
		if (c->argc > 3) { /* Redis's addReplySubcommandSyntaxError */
			resp_errorf(c->out, "ERR unknown subcommand or wrong number of arguments "
					    "for '%.*s'. Try SLOWLOG HELP.",
				    (int)(c->argv[1].len > 128 ? 128 : c->argv[1].len), c->argv[1].p);
			return 0;
		}
		slowlog_get(c, s);
	} else if (strcmp(name, "len") == 0) {
		pthread_mutex_lock(&s->mu);
		long long len = s->len;
		pthread_mutex_unlock(&s->mu);
		resp_int(c->out, len);
	} else if (strcmp(name, "reset") == 0) {
		pthread_mutex_lock(&s->mu);
		struct entry *all = s->head;
		s->head = NULL;
		s->len = 0;
		pthread_mutex_unlock(&s->mu);
		free_list(all);
		resp_status(c->out, "OK");
	} else {
		int k = (int)(sizeof(slowlog_help) / sizeof(slowlog_help[0]));
		resp_array(c->out, k);
		for (int i = 0; i < k; i++)
			resp_status(c->out, slowlog_help[i]);
	}
	return 0;
}
