/*
 * verbs_wire: the pure parts of the verbs fabric backend (see verbs.c),
 * kept apart so that they are unit-tested on machines without an RDMA
 * device: the queue-pair bootstrap messages, the per-endpoint bounce ring,
 * the bounce layout of a part, fence planning, GID choice, and small
 * parsers. Nothing here calls into a device.
 *
 * Bootstrap messages (the control plane carries them; verbs.c sends a
 * request with fab_config.ctl_call and answers one in its ctl hook). Both
 * are fixed-size and little-endian. Bytes 0-5 (magic, version) keep their
 * place in every future version, so a node can always tell "not ours" from
 * "another version of ours".
 *
 *   request, VERBS_REQ_BYTES = 40        reply, VERBS_REP_BYTES = 64
 *    0 u32 magic  VERBS_REQ_MAGIC          0 u32 magic  VERBS_REP_MAGIC
 *    4 u16 version                         4 u16 version
 *    6 u16 from   requester node id        6 u16 status enum verbs_status
 *    8 u16 worker requester worker id      8 u16 lid
 *   10 u16 lid    requester port LID      10 u16 reserved (0)
 *   12 u8[16] gid requester GID           12 u8[16] gid
 *   28 u32 qpn    requester QP (24 bits)  28 u32 qpn    responder QP (24 bits)
 *   32 u32 psn    its first send PSN      32 u32 psn    its first send PSN
 *   36 u8  mtu    enum ibv_mtu (1..5)     36 u8  mtu    enum ibv_mtu (1..5)
 *   37 u8  rd_atomic READ/atomic requests 37 u8  rd_atomic granted: the
 *          it wants outstanding (>= 1)           responder's max_dest_rd_atomic
 *   38 u16 reserved (0)                   38 u16 reserved (0)
 *                                         40 u32 rkey   of the region
 *                                         44 u32 err    errno detail (status QP)
 *                                         48 u64 base   region's virtual address
 *                                         56 u64 size   region bytes
 *
 * The rd_atomic pair is an addition to the minimal exchange: an initiator's
 * max_rd_atomic must not exceed what the responder's QP accepts, and only
 * the responder knows its device's limit.
 *
 * Two-sided RPC (fab_rpc) travels as SENDs on the queue pairs the
 * one-sided ops use, each message a 16-byte header and its body, also
 * little-endian:
 *
 *   call (initiator -> target)             answer (target -> initiator)
 *    0 u32 magic  VERBS_CALL_MAGIC           0 u32 magic  VERBS_ANSWER_MAGIC
 *    4 u32 tag    the initiator's, echoed    4 u32 tag    the call's
 *    8 u16 handler id (< FAB_RPC_HANDLERS)   8 i32 status handler's, or -errno
 *   10 u16 reserved (0)                     12 u32 len    body bytes (0 if
 *   12 u32 cap    reply capacity, bytes                   status < 0)
 *   16 request body (the message's rest)    16 reply body
 *
 * A body is at most FAB_RPC_MAX bytes, so a receive buffer of
 * VERBS_MSG_BYTES holds any message.
 *
 * Threads: every function is pure or works on caller-owned state only.
 */
#ifndef RCKV_VERBS_WIRE_H
#define RCKV_VERBS_WIRE_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdma/fab.h"

#define VERBS_REQ_MAGIC 0x5152564bu /* "KVRQ" on the wire */
#define VERBS_REP_MAGIC 0x5052564bu /* "KVRP" on the wire */
#define VERBS_WIRE_VERSION 1
#define VERBS_REQ_BYTES 40
#define VERBS_REP_BYTES 64
#define VERBS_QPN_MAX 0xffffffu  /* QP numbers are 24 bits */
#define VERBS_QPN_MIN 2u         /* 0 and 1 are the special SMI/GSI QPs */
#define VERBS_PSN_MASK 0xffffffu /* packet sequence numbers are 24 bits */

/* Reply status. Only VERBS_ST_OK carries a connected QP. */
enum verbs_status {
	VERBS_ST_OK = 0,
	VERBS_ST_BADREQ = 1,   /* request malformed or out of bounds */
	VERBS_ST_VERSION = 2,  /* request of another version; reply's version is ours */
	VERBS_ST_NOREGION = 3, /* responder has not registered its region yet */
	VERBS_ST_QP = 4,       /* responder could not create or connect its QP; err says why */
	VERBS_ST_LINK = 5,     /* requester's address does not fit our link layer (IB vs RoCE) */
	VERBS_ST_COUNT
};

struct verbs_qp_req {
	uint16_t from;      /* requester node id */
	uint16_t worker;    /* requester worker id */
	uint16_t lid;       /* port LID (InfiniBand); 0 on RoCE */
	uint8_t gid[16];    /* port GID at the requester's GID index */
	uint32_t qpn;
	uint32_t psn;
	uint8_t mtu;        /* enum ibv_mtu */
	uint8_t rd_atomic;
};

struct verbs_qp_rep {
	uint16_t status;    /* enum verbs_status */
	uint16_t lid;
	uint8_t gid[16];
	uint32_t qpn;
	uint32_t psn;
	uint8_t mtu;
	uint8_t rd_atomic;
	uint32_t rkey;
	uint32_t err;       /* positive errno when status is VERBS_ST_QP */
	uint64_t base;
	uint64_t size;
};

/* Write r as VERBS_REQ_BYTES bytes at out. */
void verbs_req_encode(const struct verbs_qp_req *r, uint8_t *out);
/* Write r as VERBS_REP_BYTES bytes at out (version is always ours). */
void verbs_rep_encode(const struct verbs_qp_rep *r, uint8_t *out);

/*
 * verbs_req_decode / verbs_rep_decode - parse a message of len bytes.
 * @version: if not NULL, receives the message's version once the magic
 *           matched (so that a caller can name the peer's version).
 * Returns 0, or
 *   -EMSGSIZE        len shorter than the header, or not the message size,
 *   -EBADMSG         wrong magic (not a bootstrap message of this kind),
 *   -EPROTONOSUPPORT another version,
 *   -ERANGE          a field out of bounds (node id, 24-bit QPN/PSN, MTU,
 *                    rd_atomic, status, region size or base + size overflow).
 * A reply whose status is not VERBS_ST_OK is not checked beyond its status.
 */
int verbs_req_decode(const void *buf, size_t len, struct verbs_qp_req *r, uint16_t *version);
int verbs_rep_decode(const void *buf, size_t len, struct verbs_qp_rep *r, uint16_t *version);

/* What a reply status means, for error messages. Never NULL. */
const char *verbs_status_str(unsigned status);

/* ---- bounce memory ---- */

/*
 * A byte ring from which a QP's parts take their bounce memory and give it
 * back in allocation order (RC completes a QP's parts in posting order).
 * head and tail count bytes ever allocated and released; an allocation is
 * contiguous, so one that would straddle the end skips to offset 0 and the
 * skipped bytes are released with it. Every size is a multiple of 8, so
 * every offset is 8-aligned when cap is.
 */
struct verbs_ring {
	uint64_t cap;
	uint64_t head;
	uint64_t tail;
};

void verbs_ring_init(struct verbs_ring *r, uint64_t cap);
/*
 * verbs_ring_alloc - take `bytes` contiguous bytes.
 * @off:      receives the offset in the ring's memory.
 * @consumed: receives what verbs_ring_free must give back (bytes + skip).
 * Returns 0, -E2BIG if bytes > cap (never fits), -ENOSPC if not now.
 */
int verbs_ring_alloc(struct verbs_ring *r, uint64_t bytes, uint64_t *off, uint64_t *consumed);
/* Release the oldest allocation, which consumed `consumed` bytes. */
void verbs_ring_free(struct verbs_ring *r, uint64_t consumed);

/*
 * Bounce layout of a part: op i's bytes follow op i-1's, each op taking its
 * length rounded up to 8 (READ, WRITE), one 8-byte slot (CAS, FAA), or its
 * call message (RPC: VERBS_RPC_HDR and the request, rounded up to 8), so
 * every atomic's result slot is 8-aligned when the area is. Fill copies an
 * RPC's request after its header's place; the header is the caller's.
 */
uint64_t verbs_op_bounce(const struct fab_op *op);
uint64_t verbs_part_bounce(struct fab_op *const *ops, int n);
/* Copy the WRITE payloads of ops into their places in area. */
void verbs_bounce_fill(char *area, struct fab_op *const *ops, int n);
/* Copy READ data and CAS/FAA old values (host order) from area to the ops. */
void verbs_bounce_drain(const char *area, struct fab_op *const *ops, int n);

/*
 * verbs_plan_fences - which WRs of a part need IBV_SEND_FENCE.
 * A WRITE or atomic may start before an earlier RDMA READ or atomic of the
 * same send queue has finished, so a later op could change bytes that an
 * earlier READ/atomic still has to see. fence[i] is set when op i is a
 * WRITE, CAS or FAA whose byte range overlaps the range of an earlier READ,
 * CAS or FAA of the part; operations on disjoint bytes are not held back.
 * An RPC's handler may touch any bytes, so the first RPC after a READ, CAS
 * or FAA of the part is fenced (the RPCs after it follow it anyway).
 * Returns the number of fences set.
 */
int verbs_plan_fences(struct fab_op *const *ops, int n, bool *fence);

/* ---- RPC messages ---- */

#define VERBS_CALL_MAGIC 0x4c43564bu   /* "KVCL" on the wire */
#define VERBS_ANSWER_MAGIC 0x4e41564bu /* "KVAN" on the wire */
#define VERBS_RPC_HDR 16
#define VERBS_MSG_BYTES (VERBS_RPC_HDR + FAB_RPC_MAX)

struct verbs_call_hdr {
	uint32_t tag;
	uint16_t handler;
	uint32_t cap;
	uint32_t len;       /* decode: the body's bytes (the message's rest) */
};

struct verbs_answer_hdr {
	uint32_t tag;
	int32_t status;
	uint32_t len;
};

/* Write h as VERBS_RPC_HDR bytes at out (h->len is not on the wire). */
void verbs_call_encode(const struct verbs_call_hdr *h, uint8_t *out);
void verbs_answer_encode(const struct verbs_answer_hdr *h, uint8_t *out);
/*
 * verbs_call_decode / verbs_answer_decode - parse a received message of
 * `len` bytes (the completion's byte_len). Returns 0, or -EMSGSIZE (shorter
 * than the header, a body over FAB_RPC_MAX, an answer whose len is not the
 * body's), -EBADMSG (wrong magic), -ERANGE (a handler id, capacity or a
 * negative status with a body out of bounds).
 */
int verbs_call_decode(const void *buf, size_t len, struct verbs_call_hdr *h);
int verbs_answer_decode(const void *buf, size_t len, struct verbs_answer_hdr *h);

/* ---- small policies and parsers ---- */

/*
 * verbs_pick_gid - the GID to use on RoCE when none is configured: the first
 * RoCE v2 GID holding an IPv4-mapped address (::ffff:a.b.c.d, routable and
 * what most RoCE setups and Soft-RoCE use), else the first RoCE v2 GID, else
 * the first non-zero one. Returns the position in e[], or -1 if none.
 */
int verbs_pick_gid(const struct ibv_gid_entry *e, int n);

/*
 * verbs_parse_index - a decimal index in [0, max] (environment settings such
 * as RCKV_VERBS_GID_INDEX). Returns 0 and sets *out, or -EINVAL.
 */
int verbs_parse_index(const char *s, unsigned max, unsigned *out);

/*
 * The error a part gets when one of its WRs completes with status st:
 * -EHOSTDOWN when the peer stopped answering (transport or RNR retries
 * exhausted), -EIO for everything else; 0 for IBV_WC_SUCCESS.
 */
int verbs_wc_errno(enum ibv_wc_status st);

/* Bytes of an enum ibv_mtu value, or 0 if it is not one. */
unsigned verbs_mtu_bytes(unsigned mtu);

#endif
