/*
 * calvin_ring.h: the one-sided transport of calvin's ACQUIRE (option
 * calvin-acquire write; RCC 4.6's Calvin request buffers, notes-rcc.md
 * 5.6), beside the RPC one (CALVIN_RPC_ACQUIRE, cc/calvin.c).
 *
 * Every participant keeps, for each coordinator node that asked, one
 * buffer in its own MemStore region: a block of its allocator, never
 * linked into the index (as the undo log's extents), of `nslots` slots of
 * `slot_bytes`. The coordinator allocates it there one-sidedly (st_alloc)
 * and offers it in a HELLO, which the participant answers inline, adopting
 * it if it has none: its handler needs no coroutine, which a loaded node
 * may not have free. A coordinator's coroutine owns one slot per participant:
 * worker w's coroutine c (sched_index) writes slot w * SLOTS_PER_WORKER +
 * c, and a coroutine has at most one ACQUIRE chunk to a node in flight, so
 * no flow control is needed: the slot is free again once its doorbell
 * was answered.
 *
 * A chunk goes as a one-sided WRITE of its bytes (opaque here: the
 * payload is calvin.c's) into the slot, then, in the same batch and on
 * the same endpoint, a doorbell: a small RPC (CALVIN_RPC_RING_BELL)
 * naming the slot, the length and a checksum of the bytes. The fabric
 * runs an RPC after every op posted before it on its endpoint took effect
 * (rdma/fab.h), so the handler finds the bytes in place; it copies them,
 * checks the sum, and hands them to calvin's acquire_take, whose result
 * is the doorbell's reply status, as it is h_acquire's. The participant
 * never polls its buffers (DESIGN.md principle 6): the doorbell wakes it.
 *
 * A coordinator learns a participant's buffer once (CALVIN_RPC_RING_HELLO:
 * one round trip, or for a new buffer the allocation's three and a second
 * HELLO, on the first transaction that finds none) and caches it
 * node-wide. Until then, for a chunk bigger than a slot, and for a
 * coroutine beyond the slots, the chunk goes by RPC as before.
 *
 * Invariants:
 *  (1) A cached buffer is dropped before its participant's new
 *      incarnation is reached (calvin_ring_peer_gone, from
 *      calvin_peer_failed, which cc_peer_restarted calls first), and when
 *      this node's flush_epoch moved (a FLUSHALL frees every block on
 *      every node, each quiesced): no WRITE lands in a block that its
 *      owner freed.
 *  (2) The participant hands a buffer out only while it owns the block:
 *      at every HELLO it checks the block's slab still has its class and
 *      the block still its generation and its bit (st_block_owned_local),
 *      and forgets it otherwise (then adopts the block the coordinator
 *      offers, checked the same way). A FLUSHALL frees the block; an
 *      allocation of that class that then picks it finds its lock word
 *      still ST_LOCK_CLAIMED (no slot covers it) and leaves it alone
 *      (alloc.c invariant (5)), so a block that passes the check is
 *      written by no one else; one of another class changes the slab's
 *      class first, which the check sees.
 *  (3) A doorbell hands acquire_take only bytes whose checksum it names,
 *      copied out of the slot first: a late doorbell (its call failed,
 *      the coroutine moved on and wrote the slot again) is refused, never
 *      taken for another transaction's chunk.
 *  (4) A doorbell that was not answered with its buffer's token (refused,
 *      or the call failed) drops the cached buffer at the coroutine's
 *      next post to that node: a stale address is asked for again rather
 *      than written to for good.
 *
 * Threads: the caches and buffers are node-wide, under the ring's mutex;
 * a coroutine's doorbell state belongs to its worker's thread.
 */
#ifndef RCKV_CC_CALVIN_RING_H
#define RCKV_CC_CALVIN_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdma/fab.h"

struct cc_node;
struct txn;
struct calvin_ring;

/* RPC handler ids (fab_rpc_register), apart from calvin.h's. */
enum {
	CALVIN_RPC_RING_HELLO = 16,
	CALVIN_RPC_RING_BELL,
};

/* A slot's size: a chunk that does not fit goes by RPC. */
#define CALVIN_RING_SLOT_BYTES 1024u
/* Slots a coordinator node asks for per worker (coroutines beyond go by
 * RPC), and a buffer's largest size (fewer slots then). */
#define CALVIN_RING_SLOTS_PER_WORKER 64
#define CALVIN_RING_MAX_BYTES (2u << 20)

/* Counters for INFO (cc section): this node's, as coordinator and as
 * participant. */
struct calvin_ring_stats {
	uint64_t acquire_rpcs;        /* ACQUIRE chunks sent by RPC */
	uint64_t acquire_rpc_bytes;   /* ... their payload bytes */
	uint64_t acquire_writes;      /* ACQUIRE chunks sent by WRITE + doorbell */
	uint64_t acquire_write_bytes; /* ... their payload bytes */
	uint64_t hellos;              /* buffers asked for (HELLO calls) */
	uint64_t doorbells;           /* doorbells taken here (participant) */
	uint64_t refused;             /* doorbells refused here: unknown buffer, bad sum */
	uint64_t buffers;             /* buffers this node holds for coordinators */
};

/* With the node (calvin_create); NULL if out of memory. */
struct calvin_ring *calvin_ring_create(struct cc_node *n);
void calvin_ring_destroy(struct calvin_ring *r);
/* Register the two handlers on the node's fabric (calvin_attach): 0 or
 * -EINVAL with a message in err. */
int calvin_ring_attach(struct calvin_ring *r, char *err, size_t errlen);

/*
 * calvin_ring_prepare - on t's coroutine, before its ACQUIREs: under
 * calvin-acquire write, ask the participants in `nodes` (a bit per node,
 * never this one) whose buffer is not known yet, one round trip for all;
 * nothing if none (the usual case) or another coroutine asks already.
 */
void calvin_ring_prepare(struct calvin_ring *r, struct txn *t, uint64_t nodes);

/*
 * calvin_ring_post - post an ACQUIRE chunk (len bytes at b, kept valid
 * until the exec) for node nd on t's batch as WRITE + doorbell: true if
 * posted (rr gets the doorbell's status at the exec, which is
 * acquire_take's, or -EBUSY if the participant refused the doorbell);
 * false when the chunk must go by RPC (calvin-acquire rpc, no buffer
 * known, a chunk bigger than a slot, a coroutine without a slot).
 */
bool calvin_ring_post(struct calvin_ring *r, struct txn *t, uint16_t nd, const void *b,
		      uint32_t len, struct fab_rpc_reply *rr);
/* A chunk of len bytes went by RPC (for the counters). */
void calvin_ring_note_rpc(struct calvin_ring *r, uint32_t len);

/* Node `peer` failed or restarted: its buffer is asked for again
 * (invariant (1)). Any thread. */
void calvin_ring_peer_gone(struct calvin_ring *r, uint16_t peer);
/* This node's region was wiped (calvin_reset): every buffer, known or
 * held, is forgotten. */
void calvin_ring_reset(struct calvin_ring *r);
void calvin_ring_stats_get(struct calvin_ring *r, struct calvin_ring_stats *out);

/* cc/calvin.c: take an ACQUIRE's wire bytes from `from`, on worker
 * `worker` (acquire_take there): 0 or the -errno its coordinator sees. */
int calvin_acquire_take(struct cc_node *n, uint16_t from, int worker, const void *req,
			uint32_t len);
/* cc/calvin.c: the node's counters (INFO). Any thread. */
void calvin_acquire_stats(struct cc_node *n, struct calvin_ring_stats *out);

#endif
