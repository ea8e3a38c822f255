/*
 * save.c: SAVE, BGSAVE and LASTSAVE (save.h).
 *
 * rckv has no dump file: the region is the database, and a save makes it
 * durable now in whatever way the persistence mode keeps it
 * (st_region_save: a checkpoint of the write-ahead log, or a flush of
 * the mapping's dirty pages). The two commands differ only in who waits:
 *  - BGSAVE starts the job thread and replies "+Background saving
 *    started" at once;
 *  - SAVE starts it too, and its coroutine sleeps until the job ended
 *    (waking every few ms: the worker serves its other clients
 *    meanwhile; Redis's SAVE blocks every client, rckv's only the caller)
 *    to reply +OK or the error; or until the server shuts down (the
 *    worker cannot exit while the coroutine waits), replying an error.
 * One job at a time: either command while one runs gets Redis's "ERR
 * Background save already in progress".
 *
 * On a cluster a save is every node's (node_cluster_ops.save_all): rckv
 * shows the cluster as one Redis, whose keys, and the parts of each
 * cross-node transaction, are spread over all nodes, so a SAVE that left
 * some of them unsaved would not be what the user asked for. The job
 * asks every peer (CTL_SAVE: each saves its own region, in parallel with
 * this one) and succeeds when all did; LASTSAVE on any node is the last
 * save that node's region took part in. A hung peer fails the save after
 * a bounded silence, and a shutdown cancels it (cluster.c, save_all).
 *
 * persistence none keeps the region in /dev/shm, removed when the server
 * exits: there is nothing durable to make it, so SAVE and BGSAVE are an
 * error that says so, rather than a +OK that would promise what a
 * restart does not keep.
 *
 * rdb_changes_since_last_save counts the changes committed (each
 * worker's `dirty`, added to by dispatch, groups and EXEC after a commit
 * from cc_txn.changes: each key set, each present key deleted) since the
 * start of the last successful save, as Redis's dirty counter does: MSET
 * of 3 keys adds 3, a SET NX that sets nothing or a DEL of an absent key
 * adds nothing. (RENAME adds 2 where Redis adds 1; FLUSHALL, outside the
 * transactions, adds nothing.)
 */
#include "server/save.h"

#include <ck_pr.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cc/sched.h"
#include "resp/resp.h"
#include "server/command.h"
#include "server/log.h"
#include "server/node.h"
#include "server/worker.h"
#include "storage/st.h"

struct srv_save {
	pthread_mutex_t lock;     /* guards everything below */
	bool running;             /* a job runs (BGSAVE or SAVE) */
	bool joinable;            /* thread is a job's, not yet joined */
	pthread_t thread;
	uint64_t jobs_done;       /* jobs that ended */
	int last_rc;              /* the last job's result */
	char last_err[256];
	time_t lastsave;          /* the last successful save (job or CTL_SAVE) */
	uint64_t saves;
	time_t started;           /* the running job's start */
	long long last_secs;      /* the last job's length; -1: none yet */
	uint64_t dirty_start;     /* dirty counter at the running job's start */
	uint64_t dirty_saved;     /* ... at the last successful job's start */
	pthread_mutex_t local_lock; /* one st_region_save at a time */
	/* Set (ck_pr) by srv_save_stop, never cleared: a cluster's save
	 * stops waiting for its peers (srv_save_cancelled). Any thread reads. */
	int cancel;
};

/* Polling of a SAVE that waits for its job: from 1 ms up to 50 ms. */
#define WAIT_MIN_NS 1000000ull
#define WAIT_MAX_NS 50000000ull

static const char ERR_IN_PROGRESS[] = "ERR Background save already in progress";
static const char ERR_NONE[] =
	"ERR persistence none: the data lives in shared memory (/dev/shm) and is removed when "
	"the server exits, so there is nothing durable to save it to (start the server with "
	"'persistence process' or 'persistence power')";

static uint64_t dirty_now(struct node *n)
{
	uint64_t sum = 0;
	for (int i = 0; i < n->nworkers; i++)
		if (n->workers && n->workers[i])
			sum += ck_pr_load_64(&n->workers[i]->dirty);
	return sum;
}

static bool persistence_none(const struct node *n)
{
	return n->cfg.persistence && strcasecmp(n->cfg.persistence, "none") == 0;
}

int srv_save_create(struct node *n)
{
	struct srv_save *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->local_lock, NULL);
	s->lastsave = time(NULL);
	s->last_secs = -1;
	n->save = s;
	return 0;
}

void srv_save_stop(struct node *n)
{
	struct srv_save *s = n->save;
	if (!s)
		return;
	ck_pr_store_int(&s->cancel, 1);
	pthread_mutex_lock(&s->lock);
	bool join = s->joinable;
	s->joinable = false;
	pthread_mutex_unlock(&s->lock);
	if (join)
		pthread_join(s->thread, NULL);
}

bool srv_save_cancelled(struct node *n)
{
	return n->save && ck_pr_load_int(&n->save->cancel);
}

void srv_save_destroy(struct node *n)
{
	struct srv_save *s = n->save;
	if (!s)
		return;
	srv_save_stop(n);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->local_lock);
	free(s);
	n->save = NULL;
}

int srv_save_local(struct node *n, char *err, size_t errlen)
{
	struct srv_save *s = n->save;
	pthread_mutex_lock(&s->local_lock);
	int rc = st_region_save(n->cc.region);
	pthread_mutex_unlock(&s->local_lock);
	if (rc == -ENOTSUP) {
		snprintf(err, errlen, "node %d has persistence none: nothing durable to save to",
			 n->cfg.node_id);
	} else if (rc) {
		snprintf(err, errlen, "node %d: %s", n->cfg.node_id, strerror(-rc));
		srv_log(n, LOG_WARNING, "SAVE failed: %s", strerror(-rc));
	} else {
		pthread_mutex_lock(&s->lock);
		s->lastsave = time(NULL);
		pthread_mutex_unlock(&s->lock);
	}
	return rc;
}

static void *job_main(void *arg)
{
	struct node *n = arg;
	struct srv_save *s = n->save;
	char err[256] = "";
	int rc = n->cops && n->cops->save_all ? n->cops->save_all(n, err, sizeof(err))
					      : srv_save_local(n, err, sizeof(err));
	time_t end = time(NULL);
	pthread_mutex_lock(&s->lock);
	s->last_rc = rc;
	snprintf(s->last_err, sizeof(s->last_err), "%s", rc ? err : "");
	s->last_secs = (long long)(end - s->started);
	if (rc == 0) {
		s->lastsave = end;
		s->saves++;
		s->dirty_saved = s->dirty_start;
	}
	s->jobs_done++;
	s->running = false;
	pthread_mutex_unlock(&s->lock);
	if (rc == 0)
		srv_log(n, LOG_NOTICE, "DB saved on disk");
	return NULL;
}

/* Start a job unless one runs. 0 with *job (its number, for SAVE to wait
 * for), -EBUSY, or -errno (no thread). */
static int job_start(struct node *n, uint64_t *job)
{
	struct srv_save *s = n->save;
	pthread_mutex_lock(&s->lock);
	if (s->running) {
		pthread_mutex_unlock(&s->lock);
		return -EBUSY;
	}
	if (s->joinable) { /* the last job's thread has ended (running is false) */
		pthread_join(s->thread, NULL);
		s->joinable = false;
	}
	s->running = true;
	s->started = time(NULL);
	s->dirty_start = dirty_now(n);
	*job = s->jobs_done + 1;
	int rc = -pthread_create(&s->thread, NULL, job_main, n);
	if (rc)
		s->running = false;
	else
		s->joinable = true;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* What may not start: none, or a job already running. True with the
 * error replied. */
static bool refuse(struct cmd_ctx *c, int rc)
{
	if (rc == -EBUSY)
		resp_error(c->out, ERR_IN_PROGRESS);
	else if (rc)
		resp_errorf(c->out, "ERR cannot start a save: %s", strerror(-rc));
	return rc != 0;
}

int srv_debug_reload(struct cmd_ctx *c)
{
	bool nosave = false;
	for (int i = 2; i < c->argc; i++) {
		if (arg_is(&c->argv[i], "nosave")) {
			nosave = true;
		} else if (!arg_is(&c->argv[i], "merge") && !arg_is(&c->argv[i], "noflush")) {
			resp_error(c->out,
				   "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.");
			return 0;
		}
	}
	if (nosave || persistence_none(c->node)) {
		resp_status(c->out, "OK");
		return 0;
	}
	return cmd_save(c);
}

int cmd_save(struct cmd_ctx *c)
{
	struct node *n = c->node;
	struct srv_save *s = n->save;
	uint64_t job;
	if (persistence_none(n)) {
		resp_error(c->out, ERR_NONE);
		return 0;
	}
	if (refuse(c, job_start(n, &job)))
		return 0;
	uint64_t wait = WAIT_MIN_NS;
	pthread_mutex_lock(&s->lock);
	while (s->jobs_done < job) {
		pthread_mutex_unlock(&s->lock);
		/* The worker exits only when its coroutines are idle: stop
		 * waiting, and let srv_save_stop cancel the job. */
		if (ck_pr_load_int(&n->shutdown)) {
			resp_error(c->out, "ERR SAVE aborted: the server is shutting down");
			return 0;
		}
		sched_sleep(c->w->sched, wait);
		wait = wait * 2 > WAIT_MAX_NS ? WAIT_MAX_NS : wait * 2;
		pthread_mutex_lock(&s->lock);
	}
	int rc = s->last_rc;
	char err[sizeof(s->last_err)];
	memcpy(err, s->last_err, sizeof(err));
	pthread_mutex_unlock(&s->lock);
	if (rc)
		resp_errorf(c->out, "ERR SAVE failed: %s", err);
	else
		resp_status(c->out, "OK");
	return 0;
}

/* BGSAVE [SCHEDULE]: SCHEDULE changes nothing here (Redis schedules only
 * behind another kind of child, which rckv never has). Queued in MULTI,
 * Redis replies "scheduled" (it starts after EXEC); rckv starts it then. */
int cmd_bgsave(struct cmd_ctx *c)
{
	uint64_t job;
	if (c->argc > 2 || (c->argc == 2 && !(c->argv[1].len == 8 &&
					      strncasecmp(c->argv[1].p, "schedule", 8) == 0))) {
		cmd_reply_syntax(c);
		return 0;
	}
	if (persistence_none(c->node)) {
		resp_error(c->out, ERR_NONE);
		return 0;
	}
	if (refuse(c, job_start(c->node, &job)))
		return 0;
	resp_status(c->out, c->txn ? "Background saving scheduled" : "Background saving started");
	return 0;
}

int cmd_lastsave(struct cmd_ctx *c)
{
	struct srv_save *s = c->node->save;
	pthread_mutex_lock(&s->lock);
	time_t t = s->lastsave;
	pthread_mutex_unlock(&s->lock);
	resp_int(c->out, (long long)t);
	return 0;
}

void srv_save_get_info(struct node *n, struct srv_save_info *out)
{
	struct srv_save *s = n->save;
	memset(out, 0, sizeof(*out));
	out->last_secs = out->current_secs = -1;
	out->last_ok = true;
	if (!s)
		return;
	uint64_t dirty = dirty_now(n);
	pthread_mutex_lock(&s->lock);
	out->changes = dirty >= s->dirty_saved ? dirty - s->dirty_saved : 0;
	out->in_progress = s->running;
	out->lastsave = s->lastsave;
	out->last_ok = s->jobs_done == 0 || s->last_rc == 0;
	out->last_secs = s->last_secs;
	out->current_secs = s->running ? (long long)(time(NULL) - s->started) : -1;
	out->saves = s->saves;
	pthread_mutex_unlock(&s->lock);
}
