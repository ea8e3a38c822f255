/*
 * latency.c: the latency monitor (latency.h) and the LATENCY command, with
 * Redis 7.0's replies: per event, up to 160 samples of [unix time, ms],
 * one per second (a second's samples keep their maximum), and the
 * all-time maximum; HISTOGRAM is INFO latencystats' histograms (cmdstat.c).
 * LATENCY GRAPH is not built.
 */
#include "server/latency.h"

#include <ck_pr.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "server/cmdstat.h"
#include "server/command.h"
#include "server/node.h"
#include "server/strutil.h"

#define LAT_SAMPLES 160
#define LAT_EVENTS 16

struct lat_event {
	char name[32];        /* "" : a free slot */
	struct {
		int64_t time;
		uint64_t ms;
	} s[LAT_SAMPLES];
	int next;             /* where the next sample goes */
	uint64_t max;
};

struct latency {
	pthread_mutex_t mu;   /* guards ev */
	struct lat_event ev[LAT_EVENTS];
};

int latency_create(struct node *n)
{
	struct latency *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	pthread_mutex_init(&l->mu, NULL);
	n->latency = l;
	return 0;
}

void latency_destroy(struct node *n)
{
	struct latency *l = n->latency;
	if (!l)
		return;
	pthread_mutex_destroy(&l->mu);
	free(l);
	n->latency = NULL;
}

uint64_t latency_threshold(struct node *n)
{
	return ck_pr_load_64((uint64_t *)&n->cfg.latency_threshold_ms);
}

static struct lat_event *find_locked(struct latency *l, const char *name, size_t len, bool add)
{
	struct lat_event *free_slot = NULL;
	for (int i = 0; i < LAT_EVENTS; i++) {
		struct lat_event *e = &l->ev[i];
		if (!e->name[0]) {
			if (!free_slot)
				free_slot = e;
		} else if (strlen(e->name) == len && memcmp(e->name, name, len) == 0) {
			return e;
		}
	}
	if (!add || !free_slot || len >= sizeof(free_slot->name))
		return NULL;
	memset(free_slot, 0, sizeof(*free_slot));
	memcpy(free_slot->name, name, len);
	return free_slot;
}

void latency_add(struct node *n, const char *event, uint64_t ms)
{
	uint64_t thr = latency_threshold(n);
	struct latency *l = n->latency;
	if (!thr || ms < thr || !l)
		return;
	int64_t now = (int64_t)time(NULL);
	pthread_mutex_lock(&l->mu);
	struct lat_event *e = find_locked(l, event, strlen(event), true);
	if (e) {
		int prev = (e->next + LAT_SAMPLES - 1) % LAT_SAMPLES;
		if (e->s[prev].time == now) {
			if (ms > e->s[prev].ms)
				e->s[prev].ms = ms;
		} else {
			e->s[e->next].time = now;
			e->s[e->next].ms = ms;
			e->next = (e->next + 1) % LAT_SAMPLES;
		}
		if (ms > e->max)
			e->max = ms;
	}
	pthread_mutex_unlock(&l->mu);
}

/* ---- LATENCY ---- */

static const char *const latency_help[] = {
	"LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"DOCTOR",
	"    Return a human readable latency analysis report.",
	"HISTORY <event>",
	"    Return time-latency samples for the <event> class.",
	"LATEST",
	"    Return the latest latency samples for all events.",
	"RESET [<event> ...]",
	"    Reset latency data of one or more <event> classes.",
	"    (default: reset all data for all event classes)",
	"HISTOGRAM [COMMAND ...]",
	"    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
	"    If no commands are specified then all histograms are replied.",
	"HELP",
	"    Prints this help.",
};

static int nsamples(const struct lat_event *e)
{
	int k = 0;
	for (int i = 0; i < LAT_SAMPLES; i++)
		k += e->s[i].time != 0;
	return k;
}

static void latest(struct cmd_ctx *c, struct latency *l)
{
	int k = 0;
	for (int i = 0; i < LAT_EVENTS; i++)
		k += l->ev[i].name[0] != '\0';
	resp_array(c->out, k);
	for (int i = 0; i < LAT_EVENTS; i++) {
		const struct lat_event *e = &l->ev[i];
		if (!e->name[0])
			continue;
		int last = (e->next + LAT_SAMPLES - 1) % LAT_SAMPLES;
		resp_array(c->out, 4);
		resp_bulk_cstr(c->out, e->name);
		resp_int(c->out, e->s[last].time);
		resp_int(c->out, (long long)e->s[last].ms);
		resp_int(c->out, (long long)e->max);
	}
}

static void history(struct cmd_ctx *c, struct latency *l)
{
	const struct lat_event *e = find_locked(l, c->argv[2].p, c->argv[2].len, false);
	if (!e) {
		resp_array(c->out, 0);
		return;
	}
	resp_array(c->out, nsamples(e));
	for (int k = 0; k < LAT_SAMPLES; k++) { /* oldest first */
		int i = (e->next + k) % LAT_SAMPLES;
		if (!e->s[i].time)
			continue;
		resp_array(c->out, 2);
		resp_int(c->out, e->s[i].time);
		resp_int(c->out, (long long)e->s[i].ms);
	}
}

static void reset(struct cmd_ctx *c, struct latency *l)
{
	long long k = 0;
	for (int i = 0; i < LAT_EVENTS; i++) {
		struct lat_event *e = &l->ev[i];
		if (!e->name[0])
			continue;
		bool hit = c->argc == 2;
		for (int a = 2; a < c->argc && !hit; a++)
			hit = strlen(e->name) == c->argv[a].len &&
			      memcmp(e->name, c->argv[a].p, c->argv[a].len) == 0;
		if (hit) {
			e->name[0] = '\0';
			k++;
		}
	}
	resp_int(c->out, k);
}

static const char *advice_of(const char *event)
{
	if (strcmp(event, "command") == 0 || strcmp(event, "fast-command") == 0)
		return "- Check the slow log (SLOWLOG GET) for the commands that were slow: in rckv "
		       "a command is a transaction, and a slow one usually waited for the fabric "
		       "(other nodes, fabric-delay-us), for locks held by others, or retried after "
		       "CC aborts (its slow log entry says how many times).\n";
	if (strcmp(event, "cc-switch") == 0)
		return "- A protocol switch (CONFIG SET cc) quiesces every node of the cluster: "
		       "commands wait until in-flight transactions finish and item metadata is "
		       "reset. Switch when the load is light.\n";
	if (strcmp(event, "fabric-wait") == 0)
		return "- A transaction's round trip to the nodes of its keys waited long: a node "
		       "slow to answer (loaded, swapping, or a slow network; fabric-delay-us adds "
		       "this on purpose). INFO cc's per-stage round trips say where transactions "
		       "spend their trips.\n";
	if (strcmp(event, "recovery") == 0)
		return "- Recovery at start rolled back the transactions that were in flight when "
		       "the node stopped; a clean SHUTDOWN avoids it.\n";
	return NULL;
}

static void doctor(struct cmd_ctx *c, struct latency *l)
{
	struct srv_sbuf b = { 0 };
	int k = 0;
	for (int i = 0; i < LAT_EVENTS; i++) {
		const struct lat_event *e = &l->ev[i];
		if (!e->name[0])
			continue;
		if (k++ == 0)
			srv_sbuf_printf(&b, "Dave, I have observed latency spikes in this Redis instance. "
					    "You don't mind talking about it, do you Dave?\n\n");
		uint64_t sum = 0, first = 0, last = 0;
		int ns = 0;
		for (int j = 0; j < LAT_SAMPLES; j++) {
			if (!e->s[j].time)
				continue;
			sum += e->s[j].ms;
			ns++;
			if (!first || (uint64_t)e->s[j].time < first)
				first = (uint64_t)e->s[j].time;
			if ((uint64_t)e->s[j].time > last)
				last = (uint64_t)e->s[j].time;
		}
		uint64_t avg = ns ? sum / (uint64_t)ns : 0, dev = 0;
		for (int j = 0; j < LAT_SAMPLES; j++)
			if (e->s[j].time)
				dev += e->s[j].ms > avg ? e->s[j].ms - avg : avg - e->s[j].ms;
		srv_sbuf_printf(&b, "%d. %s: %d latency spikes (average %llums, mean deviation "
				    "%llums, period %.2f sec). Worst all time event %llums.\n",
				k, e->name, ns, (unsigned long long)avg,
				(unsigned long long)(ns ? dev / (uint64_t)ns : 0),
				ns > 1 ? (double)(last - first) / (ns - 1) : 1.0,
				(unsigned long long)e->max);
	}
	if (k == 0 && !latency_threshold(c->node)) {
		srv_sbuf_printf(&b, "I'm sorry, Dave, I can't do that. Latency monitoring is disabled "
				    "in this Redis instance. You may use \"CONFIG SET "
				    "latency-monitor-threshold <milliseconds>.\" in order to enable it. "
				    "If we weren't in a deep space mission I'd suggest to take a look at "
				    "https://redis.io/topics/latency-monitor.\n");
	} else if (k == 0) {
		srv_sbuf_printf(&b, "Dave, no latency spike was observed during the lifetime of this "
				    "Redis instance, not in the slightest bit. I honestly think you "
				    "ought to sit down calmly, take a stress pill, and think things "
				    "over.\n");
	} else {
		srv_sbuf_printf(&b, "\nI have a few advices for you:\n\n");
		const char *said[LAT_EVENTS];
		int nsaid = 0;
		for (int i = 0; i < LAT_EVENTS; i++) {
			const char *a = l->ev[i].name[0] ? advice_of(l->ev[i].name) : NULL;
			bool dup = false;
			for (int j = 0; j < nsaid && !dup; j++)
				dup = said[j] == a;
			if (a && !dup) {
				srv_sbuf_printf(&b, "%s", a);
				said[nsaid++] = a;
			}
		}
	}
	if (b.failed)
		resp_error(c->out, "ERR out of memory");
	else
		resp_verbatim(c->out, b.p, b.len);
	srv_sbuf_free(&b);
}

int cmd_latency(struct cmd_ctx *c)
{
	struct latency *l = c->node->latency;
	const char *s = c->argv[1].p;
	size_t len = c->argv[1].len;
#define IS(w) (len == strlen(w) && strncasecmp(s, w, len) == 0)
	pthread_mutex_lock(&l->mu);
	if (IS("latest"))
		latest(c, l);
	else if (IS("history"))
		history(c, l);
	else if (IS("reset"))
		reset(c, l);
	else if (IS("doctor"))
		doctor(c, l);
	else if (IS("histogram"))
		cmdstat_reply_histogram(c->node, c->out, c->argc - 2, c->argv + 2);
	else {
		int k = (int)(sizeof(latency_help) / sizeof(latency_help[0]));
		resp_array(c->out, k);
		for (int i = 0; i < k; i++)
			resp_status(c->out, latency_help[i]);
	}
	pthread_mutex_unlock(&l->mu);
#undef IS
	return 0;
}
