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
 * Pacing: every EXPIRE_TICK_MS (100 ms, Redis's hz 10) the thread scans
 * for at most 1 ms (more slices at once while a slice fills with keys
 * due), while the last pass over the region met keys with an expiry;
 * after a pass that met none, the next pass waits longer and longer (up
 * to EXPIRE_IDLE_MAX_MS), so an idle node, or one without expiring keys,
 * wakes rarely and touches little. A scan that finds nothing due wakes
 * no worker. DEBUG SET-ACTIVE-EXPIRE 0 pauses it (Redis's tests use it).
 * Not done: Redis also deletes an expired key when a command touches it
 * (lazy expiry); here such a key reads absent and waits for the cycle,
 * so DBSIZE counts it until then.
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
/* DEBUG SET-ACTIVE-EXPIRE: pause (false) or resume it. */
void expire_cycle_enable(struct node *n, bool on);
/* Keys with an expiry its last whole pass over the region met (INFO
 * keyspace expires=: a count as of that pass, up to a tick or a backoff
 * old). */
uint64_t expire_cycle_expiring(const struct node *n);
/* A bucketed collection's root went (DEL, UNLINK): its parts are orphans
 * now; the cycle forgets the live gens it saw and resumes its short pace
 * (server/expire.c). Any thread; cheap. */
void expire_cycle_poke(struct node *n);
/* Orphan parts it deleted so far (INFO stats rckv_parts_collected). */
uint64_t expire_cycle_collected(const struct node *n);
/* Keys it deleted so far (INFO stats expired_keys). */
uint64_t expire_cycle_expired(const struct node *n);

#endif
