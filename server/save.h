/*
 * save: SAVE, BGSAVE and LASTSAVE (server/save.c): make the region durable
 * now, whatever the persistence mode (storage st_region_save), on every
 * node of a cluster, on a thread of its own so that no client waits for
 * the disk but the one that asked (SAVE).
 *
 * State (struct srv_save, one per node): written under its lock by the
 * job thread and the command handlers; read under it by INFO and
 * LASTSAVE.
 */
#ifndef RCKV_SRV_SAVE_H
#define RCKV_SRV_SAVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct cmd_ctx;
struct node;
struct srv_save;

/* Create n->save (lastsave starts at the start time, as Redis's does: the
 * data found at start is what the medium held). Main thread, before the
 * workers start. 0 or -ENOMEM. */
int srv_save_create(struct node *n);
/* Cancel and wait for a running save: a cluster's save stops waiting for
 * its peers (srv_save_cancelled); this node's own st_region_save, if it
 * runs, ends first. Main thread, after the workers stopped, before the
 * control plane stops (a cluster's save asks the peers through it) and the
 * region closes. */
void srv_save_stop(struct node *n);
/* Has srv_save_stop been called? Any thread (the job's save_all polls it). */
bool srv_save_cancelled(struct node *n);
/* Free n->save (NULL-safe): after the control plane stopped (its threads
 * serve the peers' CTL_SAVE through it). */
void srv_save_destroy(struct node *n);

/*
 * srv_save_local - this node's own save, now, on the calling thread
 * (blocking: the job thread, or a control thread serving a peer's SAVE).
 * One at a time per node. Records a success as the node's last save.
 * Returns 0, or -errno with err filled (-ENOTSUP: persistence none).
 */
int srv_save_local(struct node *n, char *err, size_t errlen);

/*
 * srv_debug_reload - DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: Redis saves
 * its RDB and loads it back; rckv's data is its MemStore, which nothing
 * needs to load: a SAVE (as cmd_save, all nodes) unless NOSAVE or
 * persistence none, and the data as it was.
 */
int srv_debug_reload(struct cmd_ctx *c);

/* For INFO persistence. */
struct srv_save_info {
	uint64_t changes;        /* changes committed since the last save began */
	bool in_progress;
	time_t lastsave;         /* unix time of the last successful save */
	bool last_ok;            /* the last save (if any) succeeded */
	long long last_secs;     /* how long it took; -1: none yet */
	long long current_secs;  /* the running one's age; -1: none runs */
	uint64_t saves;          /* successful saves since start */
};
void srv_save_get_info(struct node *n, struct srv_save_info *out);

#endif
