/*
 * cmd_pubsub.c: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE,
 * SSUBSCRIBE, SUNSUBSCRIBE, PUBLISH, SPUBLISH and PUBSUB, with Redis 7.0's
 * replies (checked against redis-server 7.0.15): the confirmations are
 * push replies in RESP3 and arrays in RESP2; a RESP2 client with a
 * subscription may send only the commands flagged CMD_SUBCTX (dispatch.c).
 * Delivery is server/pubsub.c's.
 *
 * Threads: each handler on the worker that owns ctx->cl.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/client.h"
#include "server/command.h"
#include "server/node.h"
#include "server/pubsub.h"

static const char *const verbs[3][2] = {
	[PS_CHANNEL] = { "subscribe", "unsubscribe" },
	[PS_PATTERN] = { "psubscribe", "punsubscribe" },
	[PS_SHARD] = { "ssubscribe", "sunsubscribe" },
};

/* The count a confirmation carries: channels and patterns together (Redis
 * 7.0's clientSubscriptionsCount), shard channels apart. */
static long sub_count(const struct client *cl, int kind)
{
	if (kind == PS_SHARD)
		return ps_client_count(cl, PS_SHARD);
	return ps_client_count(cl, PS_CHANNEL) + ps_client_count(cl, PS_PATTERN);
}

static void confirm(struct cmd_ctx *c, int kind, bool unsub, const char *name, size_t len)
{
	const char *verb = verbs[kind][unsub];
	resp_push(c->out, 3);
	resp_bulk(c->out, verb, strlen(verb));
	if (name)
		resp_bulk(c->out, name, len);
	else
		resp_null(c->out);
	resp_int(c->out, sub_count(c->cl, kind));
}

static int subscribe(struct cmd_ctx *c, int kind)
{
	for (int i = 1; i < c->argc; i++) {
		if (ps_subscribe(c->cl, kind, c->argv[i].p, c->argv[i].len) < 0) {
			resp_error(c->out, "ERR out of memory");
			return 0;
		}
		confirm(c, kind, false, c->argv[i].p, c->argv[i].len);
	}
	return 0;
}

struct unsub_all {
	struct cmd_ctx *c;
	int kind;
	int n;
};

static void unsub_one(void *arg, const char *name, size_t len)
{
	struct unsub_all *u = arg;
	/* Copied first: unsubscribing frees the name. */
	char stack[256], *copy = len < sizeof(stack) ? stack : malloc(len);
	if (!copy)
		return;
	memcpy(copy, name, len);
	ps_unsubscribe(u->c->cl, u->kind, copy, len);
	confirm(u->c, u->kind, true, copy, len);
	u->n++;
	if (copy != stack)
		free(copy);
}

static int unsubscribe(struct cmd_ctx *c, int kind)
{
	if (c->argc == 1) {
		struct unsub_all u = { .c = c, .kind = kind };
		ps_client_each(c->cl, kind, unsub_one, &u);
		if (u.n == 0)
			confirm(c, kind, true, NULL, 0);
		return 0;
	}
	for (int i = 1; i < c->argc; i++) {
		ps_unsubscribe(c->cl, kind, c->argv[i].p, c->argv[i].len);
		confirm(c, kind, true, c->argv[i].p, c->argv[i].len);
	}
	return 0;
}

int cmd_subscribe(struct cmd_ctx *c) { return subscribe(c, PS_CHANNEL); }
int cmd_psubscribe(struct cmd_ctx *c) { return subscribe(c, PS_PATTERN); }
int cmd_ssubscribe(struct cmd_ctx *c) { return subscribe(c, PS_SHARD); }
int cmd_unsubscribe(struct cmd_ctx *c) { return unsubscribe(c, PS_CHANNEL); }
int cmd_punsubscribe(struct cmd_ctx *c) { return unsubscribe(c, PS_PATTERN); }
int cmd_sunsubscribe(struct cmd_ctx *c) { return unsubscribe(c, PS_SHARD); }

static int publish(struct cmd_ctx *c, int kind)
{
	const struct resp_arg *ch = &c->argv[1], *msg = &c->argv[2];
	/* In EXEC (ctx->txn set), sent once the block committed. */
	long long n = c->txn ? ps_defer(c->w, c->cl, kind, ch->p, ch->len, msg->p, msg->len)
			     : ps_publish(c->w, kind, ch->p, ch->len, msg->p, msg->len);
	if (n == -EMSGSIZE)
		resp_error(c->out, "ERR channel and message are too large to publish across the "
				   "cluster (64 KB together)");
	else if (n < 0)
		resp_error(c->out, "ERR out of memory");
	else
		resp_int(c->out, n);
	return 0;
}

int cmd_publish(struct cmd_ctx *c) { return publish(c, PS_CHANNEL); }
int cmd_spublish(struct cmd_ctx *c) { return publish(c, PS_SHARD); }

/* ---- PUBSUB ---- */

struct names {
	struct resp_w w;
	long n;
};

static void add_name(void *arg, const char *name, size_t len)
{
	struct names *x = arg;
	resp_bulk(&x->w, name, len);
	x->n++;
}

static void channels(struct cmd_ctx *c, int kind)
{
	if (c->argc > 3) { /* Redis's addReplySubcommandSyntaxError */
		resp_errorf(c->out, "ERR unknown subcommand or wrong number of arguments for "
				    "'%.*s'. Try PUBSUB HELP.",
			    (int)(c->argv[1].len > 128 ? 128 : c->argv[1].len), c->argv[1].p);
		return;
	}
	struct names x = { .n = 0 };
	resp_w_init(&x.w, c->out->proto);
	if (c->argc == 3)
		ps_node_channels(c->node, kind, c->argv[2].p, c->argv[2].len, add_name, &x);
	else
		ps_node_channels(c->node, kind, NULL, 0, add_name, &x);
	resp_array(c->out, x.n);
	resp_w_append(c->out, &x.w);
	resp_w_free(&x.w);
}

static void numsub(struct cmd_ctx *c, int kind)
{
	/* An array in RESP3 too, as Redis 7.0 answers. */
	resp_array(c->out, (long)(c->argc - 2) * 2);
	for (int i = 2; i < c->argc; i++) {
		resp_bulk(c->out, c->argv[i].p, c->argv[i].len);
		resp_int(c->out, ps_node_numsub(c->node, kind, c->argv[i].p, c->argv[i].len));
	}
}

static const char *const pubsub_help[] = {
	"PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"CHANNELS [<pattern>]",
	"    Return the currently active channels matching a <pattern> (default: '*').",
	"NUMPAT",
	"    Return number of subscriptions to patterns.",
	"NUMSUB [<channel> ...]",
	"    Return the number of subscribers for the specified channels, excluding",
	"    pattern subscriptions(default: no channels).",
	"SHARDCHANNELS [<pattern>]",
	"    Return the currently active shard level channels matching a <pattern> (default: '*').",
	"SHARDNUMSUB [<shardchannel> ...]",
	"    Return the number of subscribers for the specified shard level channel(s)",
	"HELP",
	"    Prints this help.",
};

int cmd_pubsub(struct cmd_ctx *c)
{
	const struct cmd_def *d = cmd_lookup(c->argv[0].p, c->argv[0].len);
	const struct cmd_def *sub = cmd_lookup_sub(d, c->argv[1].p, c->argv[1].len);
	if (!sub) {
		resp_errorf(c->out, "ERR unknown subcommand '%.*s'. Try PUBSUB HELP.",
			    (int)(c->argv[1].len > 128 ? 128 : c->argv[1].len), c->argv[1].p);
		return 0;
	}
	const char *s = sub->name + strlen("pubsub|");
	if (strcmp(s, "channels") == 0) {
		channels(c, PS_CHANNEL);
	} else if (strcmp(s, "shardchannels") == 0) {
		channels(c, PS_SHARD);
	} else if (strcmp(s, "numsub") == 0) {
		numsub(c, PS_CHANNEL);
	} else if (strcmp(s, "shardnumsub") == 0) {
		numsub(c, PS_SHARD);
	} else if (strcmp(s, "numpat") == 0) {
		resp_int(c->out, ps_node_count(c->node, PS_PATTERN));
	} else {
		int n = (int)(sizeof(pubsub_help) / sizeof(pubsub_help[0]));
		resp_array(c->out, n);
		for (int i = 0; i < n; i++)
			resp_status(c->out, pubsub_help[i]);
	}
	return 0;
}
