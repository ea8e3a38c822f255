/*
 * expire: what the expiry commands share (server/cmd_expire.c, SET's
 * options in cmd_string.c), and active expiry: a node removes its keys
 * past their time in the background, as Redis's expire cycle does.
 *
 * Expired keys are absent to every read as soon as their time passes
 * (cc/txn.h txn_meta); active expiry only gives their memory back. It
 * walks the node's own region (st_scan) a bounded slice at a time on a
 * worker's coroutine, and deletes each key it finds past its time in a
 * transaction of its own (txn_reap_expired, which checks the time again
 * under the protocol), so a concurrent write that gave the key a new
 * value or expiry wins. Counted in INFO stats expired_keys.
 *
 * Pacing: a slice every EXPIRE_TICK_MS while the last pass over the
 * region met keys with an expiry; after a pass that met none, the next
 * pass waits longer and longer (up to EXPIRE_IDLE_MAX_MS), so an idle
 * node, or one without expiring keys, wakes rarely and touches little.
 */
#ifndef RCKV_SERVER_EXPIRE_H
#define RCKV_SERVER_EXPIRE_H

#include <stdbool.h>
#include <stdint.h>

struct node;
struct cmd_ctx;

/* Unix ms for a time argument v (seconds if `seconds`), plus base (now for
 * a relative time, 0 for an absolute one). -1 when it overflows. */
int expire_at_ms(long long v, bool seconds, long long base, long long *when);
/* ERR invalid expire time in '<cmd>' command */
void cmd_reply_bad_expire(struct cmd_ctx *c, const char *cmd);

/* Start and stop the node's active expiry (after its workers run; before
 * they stop). 0 or -errno. */
int expire_cycle_start(struct node *n);
void expire_cycle_stop(struct node *n);
/* A bucketed collection's root went (DEL, UNLINK): its parts are orphans
 * now; the cycle forgets the live gens it saw and resumes its short pace
 * (server/expire.c). Any thread; cheap. */
void expire_cycle_poke(struct node *n);
/* Orphan parts it deleted so far (INFO stats rckv_parts_collected). */
uint64_t expire_cycle_collected(const struct node *n);
/* Keys it deleted so far (INFO stats expired_keys). */
uint64_t expire_cycle_expired(const struct node *n);

#endif
