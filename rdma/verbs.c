/*
 * verbs.c: the rdma-core fabric backend (DESIGN.md section 8): one-sided
 * READ, WRITE, CAS and FAA on RC queue pairs, and two-sided RPC (fab_rpc)
 * as SEND/RECV on the same queue pairs, for nodes with an RDMA NIC
 * (InfiniBand or RoCE) or Soft-RoCE.
 *
 * Objects and who owns them:
 *  - struct verbs_dev (fab->bdata): the device context, protection domain,
 *    the port's attributes (MTU, LID, GID) and the device's limits (atomic
 *    capability, queue depths), all queried at open and read-only after;
 *    the own region's memory region (MR, attach_self); the responder QPs
 *    that answer other nodes' (and this node's) requester QPs, each with
 *    its CQ, receive buffers and answer slots; the completion channel of
 *    those CQs; and the calls received and not yet answered.
 *  - struct verbs_worker (fab_worker->bdata, owner thread only): a
 *    completion channel and CQ, a registered bounce area, and one endpoint
 *    per attached node, this node included (a loopback QP: NIC atomics are
 *    not atomic with CPU atomics, so the own region is reached by the NIC
 *    too, and fab_attach leaves peers[self].direct false).
 *  - struct verbs_ep: one requester RC QP connected to a responder QP on the
 *    target node, that node's rkey and region base, a bounce ring, the FIFO
 *    of parts in flight and the FIFO of parts waiting for room, and (from
 *    its first call) the receives its answers land in and its calls.
 *
 * Bootstrap (verbs_worker_init -> ep_connect; target side verbs_ctl ->
 * respond): the worker creates its QP and brings it to INIT, sends
 * {node, worker, LID, GID, QPN, PSN, MTU, rd_atomic} (verbs_wire.h) through
 * fab_config.ctl_call (a direct call of verbs_ctl for the own node); the
 * target creates a responder QP, brings it to RTR and RTS against the
 * requester's address and answers with its own address, the region's rkey,
 * base and size; the worker then brings its QP to RTR and RTS.
 *
 * Data path: fab_exec gives post() one part per node. post copies WRITE
 * payloads into bounce memory, builds one WR per op chained in order, flags
 * only the last one IBV_SEND_SIGNALED and rings the doorbell once
 * (ibv_post_send of the chain). READ data and atomic results land in bounce
 * memory and are copied to op->buf / op->old when the part's completion is
 * polled, then fab_part_done runs. poll() is driven by the completion
 * channel's fd in the worker's epoll.
 *
 * RPC, initiator (rpc_in_post: fab_exec gives post() parts whose last ops
 * are calls): each call is a SEND in the part's chain, after its one-sided
 * prefix, so RC order runs it after them; its message (verbs_wire.h: a tag,
 * the handler id, the reply capacity, the request) is in bounce memory.
 * Its answer arrives in one of the receives the QP keeps posted
 * (VERBS_EP_CALLS); the tag finds the call, the reply is copied to
 * op->rep, the receive is posted again. The part completes (passive ack)
 * when its chain's completion and every answer came, in either order.
 *
 * RPC, target: every responder QP keeps VERBS_RESP_RECV receives posted.
 * Its CQ raises events on the device's channel, whose fd every worker
 * watches; the worker that wakes copies each call out, posts the receive
 * again, and hands the call to fab_rpc_deliver with the requester's worker
 * id as the hint. The call's done (any worker) sends the answer from one of
 * the responder's slots; a slot is free again at the SEND's completion.
 * An idle node's CQs are all armed and its fds quiet: nothing spins.
 *
 * Invariants:
 * (1) Per endpoint, parts reach the send queue in the order post() received
 *     them: while a part waits for room, every later part waits behind it.
 * (2) Every WR of a part carries wr_id = the part and only the last is
 *     signaled. RC completes a QP's WRs in order, so a successful CQE
 *     completes the part at the head of its endpoint's in-flight FIFO,
 *     together with all of that part's unsignaled WRs.
 * (3) A part's send-queue slots and bounce bytes are returned when its
 *     signaled CQE is polled, not before: the slots of unsignaled WRs are
 *     freed by the next signaled completion, and the NIC may write READ
 *     data and atomic results into bounce memory until then.
 * (4) After the first failed CQE of a QP (or a failed post), the endpoint is
 *     broken: every part in flight or waiting fails, later parts fail at
 *     post, and the QP's remaining CQEs (flush errors, which come for
 *     unsignaled WRs too) are dropped without reading their wr_id, which
 *     may name a part that no longer exists.
 * (5) The CQ has one entry per send-queue slot of every endpoint of the
 *     worker (a flushed WR completes even when unsignaled), so it cannot
 *     overrun.
 * (6) vw->armed is true when the CQ is armed or an event it raised is not
 *     yet consumed. poll() consumes events first, and returns only after
 *     it found the CQ empty with armed true (poll, re-arm, poll again), so
 *     a completion that arrives later always makes the channel's fd
 *     readable and no completion is missed.
 * (7) The NIC only ever touches registered memory this backend owns (the
 *     region MR, bounce areas, receive buffers, answer slots): op buffers
 *     may live anywhere (coroutine stacks, heap) and are copied.
 * (8) A part posted on an endpoint holds part->resp_len = its calls + 1:
 *     one for its chain's completion, one per call unanswered. It is
 *     completed when that reaches 0, or by ep_fail, which sets it to 0 and
 *     completes each part it finds once (in flight, or holding calls), so
 *     the calls still unanswered get the error, the answered ones keep
 *     theirs. A call holds a slot of ep->rpc->calls from post to answer,
 *     and the QP has a receive posted for every call it holds.
 *
 * Responders (struct verbs_resp; all under verbs_dev.rpc_mu):
 * (R1) A responder leaves the device's list when its requester reconnects
 *      (a new one replaces it), its own worker stops, or the fabric
 *      closes; its QP, CQ and buffers go then, its struct when its last
 *      call is answered or dropped (calls count them), since a handler may
 *      still hold one.
 * (R2) Answers go out in the order their calls answered, each from a free
 *      slot (reply_free); one that finds none waits in wait_head, and every
 *      answer's completion frees its slot and sends the next.
 * (R3) Once its QP failed, a responder answers nothing: its requester's
 *      calls fail when the requester's QP does, or when the configuration
 *      fences this node there.
 * (R4) Only the holder of rpc_mu takes events off the channel, polls a
 *      responder's CQ or re-arms it (as invariant (6)), and calls are
 *      delivered after it let go (a done may run at once).
 *
 * Threads: open, attach_self, attach_peer and close run on the main thread
 * before workers start or after they stopped. ctl runs on the control
 * plane's thread and, for the own node, in worker_init; the responder list
 * and the region MR are guarded by verbs_dev.lock. Everything of a
 * verbs_worker belongs to its owner thread (fab.h's _st rule), except that
 * worker_init and worker_fini may run on the main thread while the worker
 * thread is not running.
 */
#include <ck_pr.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "rdma/fab_internal.h"
#include "rdma/verbs_wire.h"

/* ---- queue-pair parameters, with their units ---- */

#define VERBS_PORT_DEFAULT 1     /* HCA port numbers start at 1 */
#define VERBS_PKEY_INDEX 0       /* index into the port's P_Key table: the default partition */
#define VERBS_SL 0               /* service level (InfiniBand QoS lane) */
#define VERBS_TRAFFIC_CLASS 0    /* GRH traffic class (RoCE v2: the IP DSCP/ECN byte) */
#define VERBS_HOP_LIMIT 64       /* GRH hop limit, in router hops (RoCE v2: the IP TTL) */
/* Local ACK timeout, encoded as 4.096 us x 2^n: 14 gives 67 ms before a
 * request is retransmitted. */
#define VERBS_ACK_TIMEOUT 14
/* Retransmissions before a WR fails with IBV_WC_RETRY_EXC_ERR (3-bit
 * field, 7 is the most): a dead peer is noticed after about
 * (7 + 1) x 67 ms = 0.5 s. */
#define VERBS_RETRY_CNT 7
/* Receiver-not-ready retries of a requester QP. One-sided ops never
 * consume a receive, but RPC calls are SENDs, each taking a receive the
 * target pre-posted (VERBS_RESP_RECV per responder); a burst that finds
 * them all taken is NAKed, and the requester sends again after the
 * responder's min_rnr_timer. 7 means "retry forever": a target that is
 * alive re-posts its buffers at its next poll, and one that is not is
 * fenced by the configuration (fab_fence puts the QP in error). */
#define VERBS_RNR_RETRY_REQ 7
/* A responder's SENDs are answers, each into a receive its requester
 * posted before the call left (VERBS_EP_CALLS), so an RNR NAK there is a
 * bug: 0 turns one into an error at once. */
#define VERBS_RNR_RETRY_RESP 0
/* The RNR NAK timer a QP asks its sender to wait, IB encoding: 7 is
 * 0.12 ms, a few polls of a busy target's workers. */
#define VERBS_MIN_RNR_TIMER 7
/* RDMA READ + atomic requests a requester QP keeps outstanding (initiator
 * depth), before the device's and the responder's limits lower it. */
#define VERBS_RD_ATOMIC_WANT 16
/* A requester QP never serves READs or atomics, and a responder QP never
 * issues them; 1 is the smallest depth every provider accepts. */
#define VERBS_IDLE_RD_ATOMIC 1
/* Send WRs per requester QP before the device's limits lower it: eight
 * full batches in flight per endpoint. Never below FAB_BATCH_MAX (one part
 * must always fit an empty send queue). */
#define VERBS_SQ_DEPTH_WANT (8 * FAB_BATCH_MAX)
/*
 * RPC over SEND/RECV (fab_rpc). A requester QP has a receive posted for
 * every call it may have unanswered: VERBS_EP_CALLS, as many as a part
 * holds ops, so an empty endpoint always takes a part (a part whose calls
 * find too few free waits, as for send-queue room: invariant (1)). Each
 * is VERBS_MSG_BYTES (any answer fits), 4 MiB per endpoint, registered at
 * its first call: endpoints that never carry one cost nothing.
 */
#define VERBS_EP_CALLS FAB_BATCH_MAX
/*
 * Receives a responder QP keeps posted for calls. A call is copied out of
 * its buffer at the first poll that sees it, and the buffer posted again
 * there, so they only need to cover what arrives between two polls of the
 * node's workers: a part's calls in the batched cases (16 covers the
 * largest fan-outs of the CC stages). A larger burst, or a node whose
 * workers are all busy in long handlers, meets RNR NAKs and the requester
 * retries (VERBS_RNR_RETRY_REQ). 16 x 64 KiB per responder, and a node has
 * one per worker of every node.
 */
#define VERBS_RESP_RECV 16
/* Answers a responder has in flight (posted, not yet acknowledged), each
 * from a registered slot of VERBS_MSG_BYTES; more wait for a slot, in
 * order. */
#define VERBS_RESP_REPLY 4
/* wr_id of a responder's answer SEND: this plus its slot (receives: the
 * slot itself). A requester's receives are 0..VERBS_EP_CALLS-1, its sends
 * carry a part's address (never below a page). */
#define VERBS_WRID_ANSWER 0x10000u
/* Bounce bytes per endpoint (a slice of the worker's registered area). A
 * part needing more gets a buffer of its own registered for its lifetime. */
#define VERBS_EP_BOUNCE_BYTES (1u << 20)
#define VERBS_POLL_BATCH 32      /* work completions taken per ibv_poll_cq */
#define VERBS_PAGE 4096          /* alignment of registered buffers, in bytes */

/* ---- types ---- */

struct verbs_call;

/*
 * A responder QP: the target end of one requester QP. It serves that
 * requester's one-sided ops (the NIC alone) and its calls: its own CQ
 * (on the device's completion channel, which every worker watches), its
 * registered buffers: VERBS_RESP_RECV receives, then VERBS_RESP_REPLY
 * answer slots. qp, from and worker are set before it is listed and
 * never change; the rest is guarded by verbs_dev.rpc_mu.
 */
struct verbs_resp {
	struct verbs_dev *d;
	struct ibv_qp *qp;       /* NULL once dead */
	struct ibv_cq *cq;
	uint16_t from;   /* requester's node */
	uint16_t worker; /* requester's worker */
	char *area;
	struct ibv_mr *mr;
	uint32_t reply_free;     /* bit per free answer slot */
	bool armed;              /* as invariant (6), for cq */
	bool broken;             /* its QP failed: answers are dropped (R3) */
	bool dead;               /* unlisted (replaced, dropped): freed when calls is 0 */
	int calls;               /* its calls not yet answered or dropped */
	struct verbs_call *wait_head, *wait_tail; /* answers waiting for a slot (R2) */
	struct verbs_resp *next;
};

/* A call received by a responder, on its way through fab_rpc_deliver to a
 * worker and back (verbs_call_done). Its reply buffer (cap bytes), then its
 * request, follow it. On the device's list of live calls (rpc_mu), so
 * that close frees those a handler still holds. */
struct verbs_call {
	struct fab_rpc_call c;
	struct verbs_resp *r;
	uint32_t tag;
	int32_t status;
	uint32_t len;
	struct verbs_call *wnext;          /* verbs_resp.wait_head */
	struct verbs_call *lprev, *lnext;  /* verbs_dev.calls */
};

struct verbs_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	uint8_t port;
	bool roce;               /* Ethernet link layer: addresses are GIDs (GRH) */
	unsigned gid_index;
	union ibv_gid gid;
	char name[IBV_SYSFS_NAME_MAX];
	/* The responders' CQs raise their events here; its fd is in every
	 * worker's set (verbs_worker_fds), and whichever worker wakes polls
	 * them under rpc_mu (resp_poll). Non-blocking. */
	struct ibv_comp_channel *resp_ch;
	pthread_mutex_t lock;    /* guards region_mr and resp; taken before rpc_mu */
	struct ibv_mr *region_mr; /* own region; set by attach_self */
	struct verbs_resp *resp;
	/* Guards every responder's RPC state (struct verbs_resp), the list of
	 * live calls, and the polling of resp_ch and the responders' CQs. */
	pthread_mutex_t rpc_mu;
	struct verbs_call *calls;
};

/* A part in flight on an endpoint. */
struct verbs_flight {
	struct fab_part *part;
	char *area;              /* its bounce bytes (verbs_wire.h layout) */
	uint64_t consumed;       /* ring bytes to release; 0 with own_mr */
	struct ibv_mr *own_mr;   /* private buffer of an oversize part, or NULL */
	uint32_t nwr;            /* send-queue slots it holds */
};

/* A call of an endpoint waiting for its answer (invariant (8)). */
struct verbs_ep_call {
	struct fab_part *part;
	struct fab_op *op;
	uint32_t tag;            /* slot | generation << 8; 0: free */
};

/* An endpoint's RPC state, made at its first call (ep_rpc_setup). */
struct verbs_ep_rpc {
	char *area;              /* VERBS_EP_CALLS receives of VERBS_MSG_BYTES */
	struct ibv_mr *mr;
	struct verbs_ep_call calls[VERBS_EP_CALLS];
	uint32_t used;           /* calls unanswered */
	uint32_t gen;            /* tags' generation, bumped per call */
};

struct verbs_ep {
	struct ibv_qp *qp;
	uint16_t node;
	bool broken;             /* invariant (4) */
	int fail_err;            /* what parts get once broken */
	uint32_t back;           /* fab_peer.back at the last connect: if it moved
				    since, the node rejoined, and a broken endpoint
				    makes a new queue pair (ep_reconnect) */
	uint8_t fenced;          /* its QP was put in error by verbs_fence (ck_pr,
				    under qp_mu): broken at the next post */
	uint32_t rkey;           /* target region's key, base and size */
	uint64_t rbase;
	uint64_t rsize;
	uint32_t sq_depth;
	uint32_t sq_used;        /* slots held by parts in flight, invariant (3) */
	struct verbs_ring ring;
	char *bounce;            /* this endpoint's slice of the worker's area */
	struct verbs_flight *fl; /* FIFO of sq_depth slots (a part holds >= 1 WR) */
	uint32_t fl_head;
	uint32_t fl_n;
	struct fab_part *wait_head, *wait_tail; /* invariant (1) */
	struct verbs_ep_rpc *rpc; /* NULL until the first call */
};

struct verbs_worker {
	struct fab_worker *fw;
	struct verbs_dev *d;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	bool armed;              /* invariant (6) */
	char *bounce;
	size_t bounce_bytes;
	struct ibv_mr *bounce_mr;
	uint32_t sq_depth;
	int nep;
	int slots;               /* endpoints the CQ and bounce area have room for */
	struct verbs_ep *list[FAB_MAX_NODES]; /* endpoints, for the QPN lookup */
	struct verbs_ep *eps[FAB_MAX_NODES];  /* by node id */
	pthread_mutex_t qp_mu;   /* an endpoint's qp changing (ep_reconnect), or
				    being put in error by a fence (verbs_fence) */
	/* Scratch for one post (owner thread; post is not reentrant). */
	struct ibv_send_wr wr[FAB_BATCH_MAX];
	struct ibv_sge sge[FAB_BATCH_MAX];
	bool fence[FAB_BATCH_MAX];
};

static void resp_kill_locked(struct verbs_resp *r);
static void call_free_locked(struct verbs_call *k);

/* ibv_modify_qp and friends return a positive errno, or -1 with errno. */
static int verbs_errno(int rc)
{
	if (rc > 0)
		return rc;
	return errno ? errno : EINVAL;
}

static bool gid_is_zero(const uint8_t *gid)
{
	static const uint8_t zero[16];
	return memcmp(gid, zero, 16) == 0;
}

/* A PSN a stale packet of an earlier QP with the same number is unlikely
 * to carry. */
static uint32_t random_psn(void)
{
	uint32_t v;
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		v = (uint32_t)ts.tv_nsec ^ ((uint32_t)getpid() << 8);
	}
	return v & VERBS_PSN_MASK;
}

static uint8_t min_u8(unsigned a, unsigned b)
{
	unsigned m = a < b ? a : b;
	return (uint8_t)(m > 255 ? 255 : m);
}

/* ---- open and close ---- */

static int pick_device(struct fab *f, struct ibv_device **list, int n, struct ibv_device **out,
		       char *err, size_t errlen)
{
	/* The config's device, else the environment's (until the server has a
	 * device option), else the first device. */
	const char *want = f->device[0] ? f->device : getenv("RCKV_VERBS_DEVICE");
	if (!want || !*want) {
		*out = list[0];
		return 0;
	}
	for (int i = 0; i < n; i++) {
		if (strcmp(ibv_get_device_name(list[i]), want) == 0) {
			*out = list[i];
			return 0;
		}
	}
	size_t len = (size_t)snprintf(err, errlen,
				      "verbs fabric: RDMA device '%s' not found; devices found:", want);
	for (int i = 0; i < n && len < errlen; i++)
		len += (size_t)snprintf(err + len, errlen - len, "%s %s", i ? "," : "",
					ibv_get_device_name(list[i]));
	return -ENODEV;
}

/* The GID index: RCKV_VERBS_GID_INDEX if set, else on RoCE the choice of
 * verbs_pick_gid, else (InfiniBand) 0, the port GID. */
static int pick_gid(struct verbs_dev *d, char *err, size_t errlen)
{
	int tbl = d->pattr.gid_tbl_len;
	if (tbl > 256)
		tbl = 256; /* an address vector's sgid_index is 8 bits */
	const char *env = getenv("RCKV_VERBS_GID_INDEX");
	if (env) {
		unsigned idx;
		if (tbl <= 0 || verbs_parse_index(env, (unsigned)tbl - 1, &idx) != 0) {
			snprintf(err, errlen,
				 "verbs fabric: RCKV_VERBS_GID_INDEX='%s' is not an index of the "
				 "%d-entry GID table of %s port %u",
				 env, tbl, d->name, d->port);
			return -EINVAL;
		}
		d->gid_index = idx;
	} else if (d->roce) {
		struct ibv_gid_entry *e = calloc((size_t)(tbl > 0 ? tbl : 1), sizeof(*e));
		if (!e)
			return -ENOMEM;
		int n = 0;
		for (int i = 0; i < tbl; i++)
			if (ibv_query_gid_ex(d->ctx, d->port, (uint32_t)i, &e[n], 0) == 0)
				n++;
		int k = verbs_pick_gid(e, n);
		if (k >= 0)
			d->gid_index = e[k].gid_index;
		free(e);
		if (k < 0) {
			snprintf(err, errlen,
				 "verbs fabric: %s port %u (RoCE) has no usable GID: give its "
				 "network interface an IP address, or set RCKV_VERBS_GID_INDEX",
				 d->name, d->port);
			return -EADDRNOTAVAIL;
		}
	} else {
		d->gid_index = 0;
	}
	if (ibv_query_gid(d->ctx, d->port, (int)d->gid_index, &d->gid) != 0) {
		snprintf(err, errlen, "verbs fabric: cannot read GID %u of %s port %u: %s",
			 d->gid_index, d->name, d->port, strerror(errno));
		return -EADDRNOTAVAIL;
	}
	if (d->roce && gid_is_zero(d->gid.raw)) {
		snprintf(err, errlen, "verbs fabric: GID %u of %s port %u is empty; choose another "
			 "with RCKV_VERBS_GID_INDEX (see `ibv_devinfo -v`)",
			 d->gid_index, d->name, d->port);
		return -EADDRNOTAVAIL;
	}
	return 0;
}

/* Device and port checks after both were queried. */
static int check_caps(struct verbs_dev *d, char *err, size_t errlen)
{
	struct ibv_device_attr *a = &d->dattr;
	if (a->atomic_cap != IBV_ATOMIC_HCA && a->atomic_cap != IBV_ATOMIC_GLOB) {
		snprintf(err, errlen,
			 "verbs fabric: device %s has no RDMA atomics (atomic_cap is %s); rckv's "
			 "CAS and FAA need IBV_ATOMIC_HCA or IBV_ATOMIC_GLOB",
			 d->name, a->atomic_cap == IBV_ATOMIC_NONE ? "IBV_ATOMIC_NONE" : "unknown");
		return -EOPNOTSUPP;
	}
	if (a->max_qp_init_rd_atom < 1 || a->max_qp_rd_atom < 1) {
		snprintf(err, errlen,
			 "verbs fabric: device %s allows no outstanding RDMA READ/atomic per QP "
			 "(max_qp_init_rd_atom %d, max_qp_rd_atom %d)",
			 d->name, a->max_qp_init_rd_atom, a->max_qp_rd_atom);
		return -EOPNOTSUPP;
	}
	if (a->max_qp_wr < FAB_BATCH_MAX || a->max_sge < 1) {
		snprintf(err, errlen,
			 "verbs fabric: device %s allows %d send WRs per QP; a batch needs %d",
			 d->name, a->max_qp_wr, FAB_BATCH_MAX);
		return -EOPNOTSUPP;
	}
	if (d->pattr.state != IBV_PORT_ACTIVE) {
		snprintf(err, errlen,
			 "verbs fabric: %s port %u is %s, not ACTIVE (link down, or on "
			 "InfiniBand no subnet manager); `ibv_devinfo` shows the ports",
			 d->name, d->port, ibv_port_state_str(d->pattr.state));
		return -ENETDOWN;
	}
	if (!d->roce && d->pattr.lid == 0) {
		snprintf(err, errlen, "verbs fabric: %s port %u has no LID (is a subnet manager "
			 "running?)", d->name, d->port);
		return -ENETDOWN;
	}
	if (verbs_mtu_bytes(d->pattr.active_mtu) == 0) {
		snprintf(err, errlen, "verbs fabric: %s port %u reports an invalid MTU (%d)",
			 d->name, d->port, (int)d->pattr.active_mtu);
		return -EPROTO;
	}
	return 0;
}

static void verbs_close(struct fab *f)
{
	struct verbs_dev *d = f->bdata;
	if (!d)
		return;
	/* The workers are gone: what their handlers still hold is freed too. */
	pthread_mutex_lock(&d->rpc_mu);
	struct verbs_resp *r;
	while ((r = d->resp)) {
		d->resp = r->next;
		resp_kill_locked(r);
	}
	while (d->calls)
		call_free_locked(d->calls);
	pthread_mutex_unlock(&d->rpc_mu);
	if (d->resp_ch)
		ibv_destroy_comp_channel(d->resp_ch);
	if (d->region_mr)
		ibv_dereg_mr(d->region_mr);
	if (d->pd)
		ibv_dealloc_pd(d->pd);
	if (d->ctx)
		ibv_close_device(d->ctx);
	pthread_mutex_destroy(&d->lock);
	pthread_mutex_destroy(&d->rpc_mu);
	free(d);
	f->bdata = NULL;
}

static int verbs_open(struct fab *f, char *err, size_t errlen)
{
	int ndev = 0;
	struct ibv_device **list = ibv_get_device_list(&ndev);
	if (!list || ndev <= 0) {
		if (list)
			ibv_free_device_list(list);
		snprintf(err, errlen,
			 "verbs fabric: no RDMA device found (ibv_get_device_list returned none); "
			 "use --fabric shm or tcp, or see README 'Running on RDMA hardware'");
		return -ENODEV;
	}
	struct ibv_device *dev = NULL;
	int rc = pick_device(f, list, ndev, &dev, err, errlen);
	if (rc) {
		ibv_free_device_list(list);
		return rc;
	}
	struct verbs_dev *d = calloc(1, sizeof(*d));
	if (!d) {
		ibv_free_device_list(list);
		snprintf(err, errlen, "verbs fabric: out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&d->lock, NULL);
	pthread_mutex_init(&d->rpc_mu, NULL);
	f->bdata = d;
	snprintf(d->name, sizeof(d->name), "%s", ibv_get_device_name(dev));
	if (dev->transport_type != IBV_TRANSPORT_IB) {
		ibv_free_device_list(list);
		snprintf(err, errlen,
			 "verbs fabric: %s is not an InfiniBand or RoCE device (iWARP and others "
			 "need a connection manager this backend does not use)", d->name);
		rc = -EOPNOTSUPP;
		goto fail;
	}
	d->ctx = ibv_open_device(dev);
	ibv_free_device_list(list);
	if (!d->ctx) {
		rc = -verbs_errno(-1);
		snprintf(err, errlen, "verbs fabric: cannot open %s: %s", d->name, strerror(-rc));
		goto fail;
	}
	if ((rc = ibv_query_device(d->ctx, &d->dattr)) != 0) {
		rc = -verbs_errno(rc);
		snprintf(err, errlen, "verbs fabric: cannot query %s: %s", d->name, strerror(-rc));
		goto fail;
	}
	unsigned port = VERBS_PORT_DEFAULT;
	const char *penv = getenv("RCKV_VERBS_PORT");
	if (penv && (verbs_parse_index(penv, d->dattr.phys_port_cnt, &port) != 0 || port == 0)) {
		snprintf(err, errlen, "verbs fabric: RCKV_VERBS_PORT='%s' is not a port of %s "
			 "(1 to %u)", penv, d->name, d->dattr.phys_port_cnt);
		rc = -EINVAL;
		goto fail;
	}
	d->port = (uint8_t)port;
	if ((rc = ibv_query_port(d->ctx, d->port, &d->pattr)) != 0) {
		rc = -verbs_errno(rc);
		snprintf(err, errlen, "verbs fabric: cannot query %s port %u: %s", d->name, d->port,
			 strerror(-rc));
		goto fail;
	}
	d->roce = d->pattr.link_layer == IBV_LINK_LAYER_ETHERNET;
	if ((rc = check_caps(d, err, errlen)) != 0 || (rc = pick_gid(d, err, errlen)) != 0)
		goto fail;
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd) {
		rc = -verbs_errno(-1);
		snprintf(err, errlen, "verbs fabric: cannot allocate a protection domain on %s: %s",
			 d->name, strerror(-rc));
		goto fail;
	}
	d->resp_ch = ibv_create_comp_channel(d->ctx);
	int fl = d->resp_ch ? fcntl(d->resp_ch->fd, F_GETFL) : -1;
	if (fl < 0 || fcntl(d->resp_ch->fd, F_SETFL, fl | O_NONBLOCK) != 0) {
		rc = -verbs_errno(-1);
		snprintf(err, errlen, "verbs fabric: cannot create a completion channel on %s: %s",
			 d->name, strerror(-rc));
		goto fail;
	}
	return 0;
fail:
	verbs_close(f);
	return rc;
}

/* ---- regions and peers ---- */

static int verbs_attach_self(struct fab *f, char *err, size_t errlen)
{
	struct verbs_dev *d = f->bdata;
	struct fab_peer *p = &f->peers[f->cfg.self];
	if ((uintptr_t)p->base & 7) {
		snprintf(err, errlen, "verbs fabric: region at %p is not 8-aligned", p->base);
		return -EINVAL;
	}
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
		     IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_mr *mr = ibv_reg_mr(d->pd, p->base, p->size, access);
	if (!mr) {
		/* The two usual causes: the pinned-memory limit (ENOMEM, EPERM),
		 * and kernels that refuse long-term pins of writable shared
		 * mappings of files on disk file systems (EFAULT). */
		int e = verbs_errno(-1);
		snprintf(err, errlen,
			 "verbs fabric: cannot register the %llu-byte region with %s: %s (%s; "
			 "see README 'Running on RDMA hardware')",
			 (unsigned long long)p->size, d->name, strerror(e),
			 e == EFAULT ? "a region file on a disk file system cannot be pinned "
				       "by this kernel: use persistence none, or a dir on tmpfs"
				     : "raise the locked-memory limit: ulimit -l unlimited");
		return -e;
	}
	pthread_mutex_lock(&d->lock);
	struct ibv_mr *old = d->region_mr;
	d->region_mr = mr;
	pthread_mutex_unlock(&d->lock);
	if (old)
		ibv_dereg_mr(old);
	return 0;
}

static int verbs_attach_peer(struct fab *f, const struct fab_peer_info *pi, char *err,
			     size_t errlen)
{
	struct fab_peer *p = &f->peers[pi->node];
	p->direct = false;
	p->base = NULL;
	if (pi->region_size == 0) {
		snprintf(err, errlen, "verbs fabric: node %u announced an empty region", pi->node);
		return -EINVAL;
	}
	if (!f->cfg.ctl_call) {
		snprintf(err, errlen, "verbs fabric: no control-plane channel to exchange queue "
			 "pairs with node %u", pi->node);
		return -ENOTCONN;
	}
	return 0;
}

/* ---- queue pairs ---- */

/* The far end of a QP as the bootstrap exchange described it. */
struct verbs_far {
	uint16_t lid;
	const uint8_t *gid;
	uint32_t qpn;
	uint32_t psn;
	uint8_t mtu;
};

static struct ibv_qp *qp_create(struct verbs_dev *d, struct ibv_cq *cq, uint32_t send_wr,
				uint32_t recv_wr)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0, /* invariant (2): we choose which WRs signal */
		.cap = { .max_send_wr = send_wr, .max_recv_wr = recv_wr,
			 .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 0 },
	};
	return ibv_create_qp(d->pd, &ia);
}

/* RESET -> INIT. Returns 0 or a positive errno. */
static int qp_init(struct verbs_dev *d, struct ibv_qp *qp, int access)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = VERBS_PKEY_INDEX,
				 .port_num = d->port, .qp_access_flags = (unsigned)access };
	int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					       IBV_QP_ACCESS_FLAGS);
	return rc ? verbs_errno(rc) : 0;
}

/*
 * INIT -> RTR -> RTS against the far end. dest_rd_atomic: READ/atomic
 * requests this QP serves at once; rd_atomic: those it issues at once.
 * Returns 0 or a positive errno.
 */
static int qp_connect(struct verbs_dev *d, struct ibv_qp *qp, const struct verbs_far *far,
		      uint32_t my_psn, uint8_t dest_rd_atomic, uint8_t rd_atomic, uint8_t rnr_retry)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = far->mtu < d->pattr.active_mtu ? (enum ibv_mtu)far->mtu
							    : d->pattr.active_mtu,
		.dest_qp_num = far->qpn,
		.rq_psn = far->psn,
		.max_dest_rd_atomic = dest_rd_atomic,
		.min_rnr_timer = VERBS_MIN_RNR_TIMER,
		.ah_attr = { .dlid = far->lid, .sl = VERBS_SL, .src_path_bits = 0,
			     .port_num = d->port },
	};
	if (d->roce) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, far->gid, 16);
		a.ah_attr.grh.sgid_index = (uint8_t)d->gid_index;
		a.ah_attr.grh.hop_limit = VERBS_HOP_LIMIT;
		a.ah_attr.grh.traffic_class = VERBS_TRAFFIC_CLASS;
	}
	int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		return verbs_errno(rc);
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .timeout = VERBS_ACK_TIMEOUT,
				  .retry_cnt = VERBS_RETRY_CNT, .rnr_retry = rnr_retry,
				  .sq_psn = my_psn, .max_rd_atomic = rd_atomic };
	rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	return rc ? verbs_errno(rc) : 0;
}

/* ---- target side: responders and the calls they receive ---- */

static char *resp_slot(const struct verbs_resp *r, uint32_t slot)
{
	return r->area + (size_t)slot * VERBS_MSG_BYTES;
}

static int resp_post_recv(struct verbs_resp *r, uint32_t slot)
{
	struct ibv_sge sge = { .addr = (uint64_t)(uintptr_t)resp_slot(r, slot),
			       .length = VERBS_MSG_BYTES, .lkey = r->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;
	return ibv_post_recv(r->qp, &wr, &bad);
}

/* Free a call that is answered or dropped, and its responder if that was
 * dead and this its last call (R1). Caller holds rpc_mu. */
static void call_free_locked(struct verbs_call *k)
{
	struct verbs_dev *d = k->r->d;
	struct verbs_resp *r = k->r;
	if (k->lprev)
		k->lprev->lnext = k->lnext;
	else
		d->calls = k->lnext;
	if (k->lnext)
		k->lnext->lprev = k->lprev;
	free(k);
	if (--r->calls == 0 && r->dead)
		free(r);
}

static void resp_drop_answers_locked(struct verbs_resp *r)
{
	struct verbs_call *k;
	while ((k = r->wait_head)) {
		r->wait_head = k->wnext;
		call_free_locked(k);
	}
	r->wait_tail = NULL;
}

/* R3: r's QP failed (or is given up): it answers nothing more; its
 * requester's calls fail when its QP does (or the node is fenced). */
static void resp_break_locked(struct verbs_resp *r, const char *why)
{
	if (r->broken)
		return;
	r->broken = true;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	ibv_modify_qp(r->qp, &a, IBV_QP_STATE);
	if (why)
		fprintf(stderr, "verbs fabric: responder for node %u worker %u failed: %s; its "
			"calls are not answered\n", r->from, r->worker, why);
	resp_drop_answers_locked(r);
}

/* R1: r is unlisted: its device objects go now, the struct with its last
 * call. Caller holds rpc_mu. */
static void resp_kill_locked(struct verbs_resp *r)
{
	resp_drop_answers_locked(r);
	if (r->qp)
		ibv_destroy_qp(r->qp);
	if (r->cq)
		ibv_destroy_cq(r->cq); /* every event was acknowledged in resp_poll */
	if (r->mr)
		ibv_dereg_mr(r->mr);
	free(r->area);
	r->qp = NULL;
	r->cq = NULL;
	r->mr = NULL;
	r->area = NULL;
	r->dead = true;
	if (r->calls == 0)
		free(r);
}

/* R2: send the answers waiting for a slot, in order. Caller holds rpc_mu. */
static void resp_answer_locked(struct verbs_resp *r)
{
	struct verbs_call *k;
	while (!r->broken && r->reply_free && (k = r->wait_head)) {
		r->wait_head = k->wnext;
		if (!r->wait_head)
			r->wait_tail = NULL;
		uint32_t slot = (uint32_t)__builtin_ctz(r->reply_free);
		uint8_t *out = (uint8_t *)resp_slot(r, VERBS_RESP_RECV + slot);
		struct verbs_answer_hdr h = { .tag = k->tag, .status = k->status, .len = k->len };
		verbs_answer_encode(&h, out);
		if (k->len)
			memcpy(out + VERBS_RPC_HDR, k->c.resp, k->len);
		struct ibv_sge sge = { .addr = (uint64_t)(uintptr_t)out,
				       .length = VERBS_RPC_HDR + k->len, .lkey = r->mr->lkey };
		struct ibv_send_wr wr = { .wr_id = VERBS_WRID_ANSWER + slot, .sg_list = &sge,
					  .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad = NULL;
		call_free_locked(k);
		int rc = ibv_post_send(r->qp, &wr, &bad);
		if (rc) {
			char why[96];
			snprintf(why, sizeof(why), "ibv_post_send: %s", strerror(verbs_errno(rc)));
			resp_break_locked(r, why);
			return;
		}
		r->reply_free &= ~(1u << slot);
	}
}

/* fab_rpc_call.done of a call a responder received: any worker's thread. */
static void verbs_call_done(struct fab_rpc_call *c, int32_t status, uint32_t len)
{
	struct verbs_call *k = (struct verbs_call *)c;
	struct verbs_resp *r = k->r;
	pthread_mutex_lock(&r->d->rpc_mu);
	k->status = status;
	k->len = status >= 0 ? len : 0;
	if (r->dead || r->broken) {
		call_free_locked(k); /* no one to answer */
	} else {
		k->wnext = NULL;
		if (r->wait_tail)
			r->wait_tail->wnext = k;
		else
			r->wait_head = k;
		r->wait_tail = k;
		resp_answer_locked(r);
	}
	pthread_mutex_unlock(&r->d->rpc_mu);
}

/* A call that arrived in receive `slot`: copied out, the receive posted
 * again, and the call appended to *deliver. Caller holds rpc_mu. */
static void resp_call_locked(struct fab *f, struct verbs_resp *r, uint32_t slot, uint32_t bytes,
			     struct verbs_call ***deliver)
{
	struct verbs_dev *d = r->d;
	const uint8_t *msg = (const uint8_t *)resp_slot(r, slot);
	struct verbs_call_hdr h;
	if (verbs_call_decode(msg, bytes, &h) != 0) {
		resp_break_locked(r, "a malformed call");
		return;
	}
	/* A node the configuration took out may be a hung one that woke up:
	 * its calls are not run (as tcp refuses its requests). */
	struct verbs_call *k = fab_fenced(f, r->from) ? NULL
						      : malloc(sizeof(*k) + (size_t)h.cap + h.len);
	if (k) {
		char *resp = (char *)(k + 1), *req = resp + h.cap;
		memcpy(req, msg + VERBS_RPC_HDR, h.len);
		*k = (struct verbs_call){ .r = r, .tag = h.tag, .lnext = d->calls };
		k->c = (struct fab_rpc_call){ .from = r->from, .handler = h.handler, .len = h.len,
					      .cap = h.cap, .req = req, .resp = resp,
					      .done = verbs_call_done, .bctx = k };
		if (d->calls)
			d->calls->lprev = k;
		d->calls = k;
		r->calls++;
		**deliver = k;
		*deliver = &k->wnext;
	} else if (!fab_fenced(f, r->from)) {
		resp_break_locked(r, "out of memory for a call");
		return;
	}
	if (resp_post_recv(r, slot) != 0)
		resp_break_locked(r, "ibv_post_recv failed");
}

static void resp_wc_locked(struct fab *f, struct verbs_resp *r, const struct ibv_wc *wc,
			   struct verbs_call ***deliver)
{
	if (wc->wr_id >= VERBS_WRID_ANSWER) {
		r->reply_free |= 1u << (wc->wr_id - VERBS_WRID_ANSWER);
		if (wc->status != IBV_WC_SUCCESS) {
			char why[128];
			snprintf(why, sizeof(why), "an answer: %s", ibv_wc_status_str(wc->status));
			resp_break_locked(r, why);
		}
		resp_answer_locked(r);
		return;
	}
	/* A receive that failed is a flush: the QP is in error already. */
	if (wc->status != IBV_WC_SUCCESS)
		resp_break_locked(r, NULL);
	else if (!r->broken)
		resp_call_locked(f, r, (uint32_t)wc->wr_id, wc->byte_len, deliver);
}

/* Everything on r's CQ, then re-armed as invariant (6) says. */
static void resp_drain_locked(struct fab *f, struct verbs_resp *r, struct verbs_call ***deliver)
{
	for (;;) {
		struct ibv_wc wc[VERBS_POLL_BATCH];
		int k;
		do {
			k = ibv_poll_cq(r->cq, VERBS_POLL_BATCH, wc);
			for (int i = 0; i < k; i++)
				resp_wc_locked(f, r, &wc[i], deliver);
		} while (k == VERBS_POLL_BATCH);
		if (k < 0 || r->armed || ibv_req_notify_cq(r->cq, 0) != 0)
			break;
		r->armed = true;
	}
}

/*
 * The responders' side of a worker's poll (R4): whichever worker finds the
 * device's channel readable takes its events under rpc_mu, drains the CQs
 * they name, and hands the calls to fab_rpc_deliver (the requester's worker
 * id picks the worker) after letting go of the lock, since a done callback
 * may run at once (no worker: -EAGAIN). A worker that finds the lock taken
 * leaves it to the holder: events the holder does not take keep the fd
 * readable, so nothing is missed.
 */
static void resp_poll(struct fab *f, struct verbs_dev *d)
{
	if (pthread_mutex_trylock(&d->rpc_mu) != 0)
		return;
	struct verbs_call *deliver = NULL, **tail = &deliver;
	struct ibv_cq *cq;
	void *ctx;
	while (ibv_get_cq_event(d->resp_ch, &cq, &ctx) == 0) {
		struct verbs_resp *r = ctx;
		ibv_ack_cq_events(cq, 1);
		r->armed = false;
		resp_drain_locked(f, r, &tail);
	}
	pthread_mutex_unlock(&d->rpc_mu);
	while (deliver) {
		struct verbs_call *k = deliver;
		deliver = k->wnext;
		fab_rpc_deliver(f, k->r->worker, &k->c);
	}
}

/* Remember r as the responder of (from, worker), ending the one a
 * previous incarnation of that worker used. Caller holds d->lock. */
static void resp_insert_locked(struct verbs_dev *d, struct verbs_resp *r)
{
	pthread_mutex_lock(&d->rpc_mu);
	for (struct verbs_resp **pp = &d->resp; *pp; pp = &(*pp)->next) {
		struct verbs_resp *o = *pp;
		if (o->from == r->from && o->worker == r->worker) {
			*pp = o->next;
			resp_kill_locked(o);
			break;
		}
	}
	r->next = d->resp;
	d->resp = r;
	pthread_mutex_unlock(&d->rpc_mu);
}

/* End the responder of (from, worker), if any (own workers' fini). */
static void resp_drop(struct verbs_dev *d, uint16_t from, uint16_t worker)
{
	pthread_mutex_lock(&d->lock);
	pthread_mutex_lock(&d->rpc_mu);
	for (struct verbs_resp **pp = &d->resp; *pp; pp = &(*pp)->next) {
		struct verbs_resp *o = *pp;
		if (o->from == from && o->worker == worker) {
			*pp = o->next;
			resp_kill_locked(o);
			break;
		}
	}
	pthread_mutex_unlock(&d->rpc_mu);
	pthread_mutex_unlock(&d->lock);
}

/* A responder's CQ, buffers and QP, in INIT with every receive posted and
 * its CQ armed; NULL with a positive errno in *e. */
static struct verbs_resp *resp_create(struct verbs_dev *d, int *e)
{
	struct verbs_resp *r = calloc(1, sizeof(*r));
	if (!r) {
		*e = ENOMEM;
		return NULL;
	}
	r->d = d;
	r->reply_free = (1u << VERBS_RESP_REPLY) - 1;
	const size_t bytes = (size_t)(VERBS_RESP_RECV + VERBS_RESP_REPLY) * VERBS_MSG_BYTES;
	*e = 0;
	r->cq = ibv_create_cq(d->ctx, VERBS_RESP_RECV + VERBS_RESP_REPLY, r, d->resp_ch, 0);
	if (!r->cq)
		goto fail_errno;
	if (posix_memalign((void **)&r->area, VERBS_PAGE, bytes) != 0) {
		r->area = NULL;
		*e = ENOMEM;
		goto fail;
	}
	r->mr = ibv_reg_mr(d->pd, r->area, bytes, IBV_ACCESS_LOCAL_WRITE);
	if (!r->mr)
		goto fail_errno;
	r->qp = qp_create(d, r->cq, VERBS_RESP_REPLY, VERBS_RESP_RECV);
	if (!r->qp)
		goto fail_errno;
	*e = qp_init(d, r->qp, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
				       IBV_ACCESS_REMOTE_ATOMIC);
	for (uint32_t i = 0; !*e && i < VERBS_RESP_RECV; i++)
		if (resp_post_recv(r, i) != 0)
			*e = verbs_errno(-1);
	if (!*e && ibv_req_notify_cq(r->cq, 0) != 0)
		*e = verbs_errno(-1);
	if (*e)
		goto fail;
	r->armed = true;
	return r;
fail_errno:
	*e = verbs_errno(-1);
fail:
	pthread_mutex_lock(&d->rpc_mu);
	resp_kill_locked(r); /* not listed, no calls: freed here */
	pthread_mutex_unlock(&d->rpc_mu);
	return NULL;
}

/* Create and connect the responder QP for the requester rq. */
static void respond(struct verbs_dev *d, const struct verbs_qp_req *rq, struct verbs_qp_rep *rp)
{
	memset(rp, 0, sizeof(*rp));
	if (d->roce ? gid_is_zero(rq->gid) : rq->lid == 0) {
		rp->status = VERBS_ST_LINK;
		return;
	}
	pthread_mutex_lock(&d->lock);
	if (!d->region_mr) {
		rp->status = VERBS_ST_NOREGION;
		goto out;
	}
	int e = 0;
	struct verbs_resp *r = resp_create(d, &e);
	uint32_t psn = random_psn();
	uint8_t grant = min_u8(rq->rd_atomic, (unsigned)d->dattr.max_qp_rd_atom);
	if (r) {
		struct verbs_far far = { .lid = rq->lid, .gid = rq->gid, .qpn = rq->qpn,
					 .psn = rq->psn, .mtu = rq->mtu };
		e = qp_connect(d, r->qp, &far, psn, grant, VERBS_IDLE_RD_ATOMIC,
			       VERBS_RNR_RETRY_RESP);
		if (e) {
			pthread_mutex_lock(&d->rpc_mu);
			resp_kill_locked(r);
			pthread_mutex_unlock(&d->rpc_mu);
		}
	}
	if (e) {
		rp->status = VERBS_ST_QP;
		rp->err = (uint32_t)e;
		goto out;
	}
	r->from = rq->from;
	r->worker = rq->worker;
	resp_insert_locked(d, r);
	rp->status = VERBS_ST_OK;
	rp->lid = d->pattr.lid;
	memcpy(rp->gid, d->gid.raw, 16);
	rp->qpn = r->qp->qp_num;
	rp->psn = psn;
	rp->mtu = (uint8_t)d->pattr.active_mtu;
	rp->rd_atomic = grant;
	rp->rkey = d->region_mr->rkey;
	rp->base = (uint64_t)(uintptr_t)d->region_mr->addr;
	rp->size = d->region_mr->length;
out:
	pthread_mutex_unlock(&d->lock);
}

/*
 * The ctl hook: answer a queue-pair request relayed by the control plane.
 * *resp_len is the capacity of resp on entry and the reply's size on
 * return. Returns 0 with a reply (whose status may be an error), -EPROTO if
 * req is not a verbs bootstrap request, -ENOBUFS if resp is too small.
 */
static int verbs_ctl(struct fab *f, const void *req, size_t len, void *resp, size_t *resp_len)
{
	struct verbs_dev *d = f->bdata;
	if (*resp_len < VERBS_REP_BYTES)
		return -ENOBUFS;
	struct verbs_qp_req rq;
	struct verbs_qp_rep rp = { 0 };
	int rc = verbs_req_decode(req, len, &rq, NULL);
	if (rc == -EBADMSG || (rc == -EMSGSIZE && len < 6))
		return -EPROTO;
	if (rc == -EPROTONOSUPPORT)
		rp.status = VERBS_ST_VERSION;
	else if (rc)
		rp.status = VERBS_ST_BADREQ;
	else
		respond(d, &rq, &rp);
	verbs_rep_encode(&rp, resp);
	*resp_len = VERBS_REP_BYTES;
	return 0;
}

/* ---- initiator side: endpoints ---- */

static void flight_release(struct verbs_ep *ep, struct verbs_flight *fl)
{
	if (fl->own_mr) {
		ibv_dereg_mr(fl->own_mr);
		free(fl->area);
	} else {
		verbs_ring_free(&ep->ring, fl->consumed);
	}
	ep->sq_used -= fl->nwr;
}

/* Invariant (4): fail everything of ep; returns the parts completed. */
static int ep_fail(struct verbs_worker *vw, struct verbs_ep *ep, int err, const char *why)
{
	if (!ep->broken) {
		ep->broken = true;
		ep->fail_err = err;
		/* A QP whose WR failed is in the error state already; one given up
		 * for another reason is put there, so that the NIC stops. */
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
		ibv_modify_qp(ep->qp, &a, IBV_QP_STATE);
		if (why) /* once per endpoint: there is no logger below the server */
			fprintf(stderr,
				"verbs fabric: node %u worker %d: queue pair to node %u failed: %s; "
				"its operations now fail with %s\n",
				vw->fw->f->cfg.self, vw->fw->id, ep->node, why, strerror(-err));
	}
	/* Each part once (invariant (8)): those in flight, then those whose
	 * calls still wait for answers. */
	int done = 0;
	while (ep->fl_n) {
		struct verbs_flight fl = ep->fl[ep->fl_head];
		ep->fl_head = (ep->fl_head + 1) % ep->sq_depth;
		ep->fl_n--;
		flight_release(ep, &fl);
		if (fl.part->resp_len) {
			fl.part->resp_len = 0;
			fab_part_done(fl.part, err);
			done++;
		}
	}
	for (int i = 0; ep->rpc && i < VERBS_EP_CALLS; i++) {
		struct verbs_ep_call *k = &ep->rpc->calls[i];
		if (!k->tag)
			continue;
		struct fab_part *p = k->part;
		*k = (struct verbs_ep_call){ 0 };
		if (p->resp_len) {
			p->resp_len = 0;
			fab_part_done(p, err); /* its calls unanswered get err */
			done++;
		}
	}
	if (ep->rpc)
		ep->rpc->used = 0;
	struct fab_part *p;
	while ((p = ep->wait_head)) {
		ep->wait_head = p->next;
		fab_part_done(p, err);
		done++;
	}
	ep->wait_tail = NULL;
	return done;
}

static int ep_post_recv(struct verbs_ep *ep, uint32_t slot)
{
	struct ibv_sge sge = { .addr = (uint64_t)(uintptr_t)(ep->rpc->area +
							      (size_t)slot * VERBS_MSG_BYTES),
			       .length = VERBS_MSG_BYTES, .lkey = ep->rpc->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;
	return ibv_post_recv(ep->qp, &wr, &bad);
}

/* Every receive for answers, on ep's QP (a new one: ep_qp_setup). 0 or
 * -EIO. */
static int ep_rpc_post_all(struct verbs_ep *ep)
{
	for (uint32_t i = 0; i < VERBS_EP_CALLS; i++)
		if (ep_post_recv(ep, i) != 0)
			return -EIO;
	return 0;
}

/* ep's answer buffers, at its first call: 0, -ENOMEM (ep unchanged), or
 * -EIO (posting failed: the caller breaks ep). */
static int ep_rpc_setup(struct verbs_worker *vw, struct verbs_ep *ep)
{
	struct verbs_ep_rpc *rpc = calloc(1, sizeof(*rpc));
	const size_t bytes = (size_t)VERBS_EP_CALLS * VERBS_MSG_BYTES;
	if (!rpc)
		return -ENOMEM;
	if (posix_memalign((void **)&rpc->area, VERBS_PAGE, bytes) != 0) {
		free(rpc);
		return -ENOMEM;
	}
	rpc->mr = ibv_reg_mr(vw->d->pd, rpc->area, bytes, IBV_ACCESS_LOCAL_WRITE);
	if (!rpc->mr) {
		free(rpc->area);
		free(rpc);
		return -ENOMEM;
	}
	ep->rpc = rpc;
	return ep_rpc_post_all(ep);
}

static void ep_rpc_free(struct verbs_ep *ep)
{
	if (!ep->rpc)
		return;
	ibv_dereg_mr(ep->rpc->mr);
	free(ep->rpc->area);
	free(ep->rpc);
	ep->rpc = NULL;
}

/* Give op a free call slot and a tag, and write its call header at msg. */
static void ep_call_start(struct verbs_ep_rpc *rpc, struct fab_part *part, struct fab_op *op,
			  uint8_t *msg)
{
	uint32_t i = 0;
	while (rpc->calls[i].tag)
		i++; /* ep_start checked that enough are free */
	rpc->gen = (rpc->gen + 1) & 0xffffffu;
	if (!rpc->gen)
		rpc->gen = 1; /* a tag is never 0 */
	rpc->calls[i] = (struct verbs_ep_call){ .part = part, .op = op, .tag = i | rpc->gen << 8 };
	rpc->used++;
	struct verbs_call_hdr h = { .tag = rpc->calls[i].tag, .handler = (uint16_t)op->off,
				    .cap = op->rep->cap };
	verbs_call_encode(&h, msg);
}

/*
 * Post part as one chain of WRs (one doorbell). Returns 0 when posted,
 * -EAGAIN when the send queue or the bounce ring has no room now, -ENOMEM
 * when an oversize part gets no buffer (the endpoint stays usable), or the
 * endpoint's error after a failed ibv_post_send broke it. In every case but
 * 0, the caller completes part.
 */
static int ep_start(struct verbs_worker *vw, struct verbs_ep *ep, struct fab_part *part)
{
	int n = part->n;
	if (ep->sq_used + (uint32_t)n > ep->sq_depth)
		return -EAGAIN;
	uint32_t calls = 0;
	for (int i = 0; i < n; i++)
		calls += part->ops[i]->kind == FAB_RPC;
	if (calls && !ep->rpc) {
		int rc = ep_rpc_setup(vw, ep);
		if (rc == -EIO) {
			ep_fail(vw, ep, -EIO, "ibv_post_recv failed");
			return -EIO;
		}
		if (rc)
			return rc;
	}
	if (calls && ep->rpc->used + calls > VERBS_EP_CALLS)
		return -EAGAIN; /* answers free them */
	uint64_t need = verbs_part_bounce(part->ops, n);
	struct verbs_flight fl = { .part = part, .nwr = (uint32_t)n };
	uint32_t lkey;
	if (need > ep->ring.cap) {
		void *buf;
		if (posix_memalign(&buf, VERBS_PAGE, need) != 0)
			return -ENOMEM;
		fl.own_mr = ibv_reg_mr(vw->d->pd, buf, need, IBV_ACCESS_LOCAL_WRITE);
		if (!fl.own_mr) {
			free(buf);
			return -ENOMEM;
		}
		fl.area = buf;
		lkey = fl.own_mr->lkey;
	} else {
		uint64_t off;
		if (verbs_ring_alloc(&ep->ring, need, &off, &fl.consumed) != 0)
			return -EAGAIN;
		fl.area = ep->bounce + off;
		lkey = vw->bounce_mr->lkey;
	}
	verbs_bounce_fill(fl.area, part->ops, n);
	verbs_plan_fences(part->ops, n, vw->fence);
	part->resp_len = calls + 1; /* invariant (8) */
	char *slot = fl.area;
	for (int i = 0; i < n; i++) {
		struct fab_op *op = part->ops[i];
		struct ibv_send_wr *wr = &vw->wr[i];
		struct ibv_sge *sge = &vw->sge[i];
		bool data = op->kind == FAB_READ || op->kind == FAB_WRITE;
		*sge = (struct ibv_sge){ .addr = (uint64_t)(uintptr_t)slot,
					 .length = data ? op->len : 8, .lkey = lkey };
		*wr = (struct ibv_send_wr){ .wr_id = (uint64_t)(uintptr_t)part,
					    .next = i + 1 < n ? &vw->wr[i + 1] : NULL,
					    .sg_list = sge, .num_sge = 1 };
		uint64_t remote = ep->rbase + op->off;
		switch (op->kind) {
		case FAB_RPC:
			wr->opcode = IBV_WR_SEND;
			sge->length = VERBS_RPC_HDR + op->len;
			ep_call_start(ep->rpc, part, op, (uint8_t *)slot);
			break;
		case FAB_READ:
		case FAB_WRITE:
			wr->opcode = op->kind == FAB_READ ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
			wr->wr.rdma.remote_addr = remote;
			wr->wr.rdma.rkey = ep->rkey;
			break;
		case FAB_CAS:
			wr->opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
			wr->wr.atomic.remote_addr = remote;
			wr->wr.atomic.compare_add = op->cmp;
			wr->wr.atomic.swap = op->swp;
			wr->wr.atomic.rkey = ep->rkey;
			break;
		default: /* FAB_FAA */
			wr->opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			wr->wr.atomic.remote_addr = remote;
			wr->wr.atomic.compare_add = op->swp;
			wr->wr.atomic.rkey = ep->rkey;
			break;
		}
		wr->send_flags = (vw->fence[i] ? IBV_SEND_FENCE : 0) |
				 (i + 1 == n ? IBV_SEND_SIGNALED : 0);
		slot += verbs_op_bounce(op);
	}
	struct ibv_send_wr *bad = NULL;
	vw->fw->doorbells++;
	int rc = ibv_post_send(ep->qp, vw->wr, &bad);
	if (rc) {
		/* WRs before `bad` may be on the queue, unsignaled: nothing would
		 * ever complete them, so the endpoint is given up. */
		char why[96];
		snprintf(why, sizeof(why), "ibv_post_send: %s", strerror(verbs_errno(rc)));
		if (fl.own_mr) {
			ibv_dereg_mr(fl.own_mr);
			free(fl.area);
		}
		for (int i = 0; calls && i < VERBS_EP_CALLS; i++)
			if (ep->rpc->calls[i].part == part) { /* the caller completes it */
				ep->rpc->calls[i] = (struct verbs_ep_call){ 0 };
				ep->rpc->used--;
			}
		ep_fail(vw, ep, -EIO, why);
		return -EIO;
	}
	ep->fl[(ep->fl_head + ep->fl_n) % ep->sq_depth] = fl;
	ep->fl_n++;
	ep->sq_used += (uint32_t)n;
	return 0;
}

/* Post the waiting parts that fit now, in order; returns parts completed
 * (with an error) here. */
static int ep_drain_wait(struct verbs_worker *vw, struct verbs_ep *ep)
{
	int done = 0;
	while (ep->wait_head && !ep->broken) {
		struct fab_part *p = ep->wait_head;
		ep->wait_head = p->next;
		if (!ep->wait_head)
			ep->wait_tail = NULL;
		p->next = NULL;
		int rc = ep_start(vw, ep, p);
		if (rc == -EAGAIN) {
			/* An empty endpoint always has room for a part (the queue
			 * holds FAB_BATCH_MAX WRs, a part needing more bounce than
			 * the ring gets its own), so this is only waiting. */
			p->next = ep->wait_head;
			ep->wait_head = p;
			if (!ep->wait_tail)
				ep->wait_tail = p;
			break;
		}
		if (rc) {
			fab_part_done(p, rc);
			done++;
		}
	}
	return done;
}

static int ep_qp_setup(struct verbs_worker *vw, struct verbs_ep *ep, char *err, size_t errlen);

static int ep_connect(struct verbs_worker *vw, uint16_t node, char *err, size_t errlen)
{
	struct verbs_ep *ep = calloc(1, sizeof(*ep));
	if (!ep)
		goto oom;
	ep->node = node;
	ep->sq_depth = vw->sq_depth;
	ep->fl = calloc(vw->sq_depth, sizeof(*ep->fl));
	ep->bounce = vw->bounce + (size_t)vw->nep * VERBS_EP_BOUNCE_BYTES;
	verbs_ring_init(&ep->ring, VERBS_EP_BOUNCE_BYTES);
	pthread_mutex_lock(&vw->qp_mu); /* verbs_fence may look at it from here */
	vw->eps[node] = ep;
	vw->list[vw->nep++] = ep; /* from here worker_fini frees it */
	pthread_mutex_unlock(&vw->qp_mu);
	if (ep->fl) {
		ep->back = ck_pr_load_32(&vw->fw->f->peers[node].back);
		return ep_qp_setup(vw, ep, err, errlen);
	}
oom:
	snprintf(err, errlen, "verbs fabric: out of memory");
	return -ENOMEM;
}

/* A new requester QP for ep, connected to a new responder on its node
 * (the bootstrap exchange of the file comment). */
static int ep_qp_setup(struct verbs_worker *vw, struct verbs_ep *ep, char *err, size_t errlen)
{
	struct fab *f = vw->fw->f;
	struct verbs_dev *d = vw->d;
	const uint16_t node = ep->node;
	/* Under qp_mu only the pointer: the exchange below may block, and a
	 * fence meanwhile puts the new QP in error (then it fails to connect). */
	struct ibv_qp *qp = qp_create(d, vw->cq, vw->sq_depth, VERBS_EP_CALLS);
	pthread_mutex_lock(&vw->qp_mu);
	ep->qp = qp;
	pthread_mutex_unlock(&vw->qp_mu);
	int e = ep->qp ? qp_init(d, ep->qp, 0) : verbs_errno(-1);
	if (!e && ep->rpc && ep_rpc_post_all(ep) != 0) /* a new QP after calls */
		e = verbs_errno(-1);
	if (e) {
		snprintf(err, errlen, "verbs fabric: cannot create a queue pair to node %u on %s: %s",
			 node, d->name, strerror(e));
		return -e;
	}

	struct verbs_qp_req rq = { .from = f->cfg.self, .worker = (uint16_t)vw->fw->id,
				   .lid = d->pattr.lid, .qpn = ep->qp->qp_num, .psn = random_psn(),
				   .mtu = (uint8_t)d->pattr.active_mtu,
				   .rd_atomic = min_u8(VERBS_RD_ATOMIC_WANT,
						       (unsigned)d->dattr.max_qp_init_rd_atom) };
	memcpy(rq.gid, d->gid.raw, 16);
	uint8_t req[VERBS_REQ_BYTES], rep[2 * VERBS_REP_BYTES];
	size_t replen = sizeof(rep);
	verbs_req_encode(&rq, req);
	int rc;
	if (node == f->cfg.self)
		rc = verbs_ctl(f, req, sizeof(req), rep, &replen); /* loopback: no network */
	else if (f->cfg.ctl_call)
		rc = f->cfg.ctl_call(f->cfg.ctl_ctx, node, req, sizeof(req), rep, &replen);
	else
		rc = -ENOTCONN;
	if (rc) {
		snprintf(err, errlen, "verbs fabric: queue-pair exchange with node %u failed: %s",
			 node, strerror(rc < 0 ? -rc : rc));
		return rc < 0 ? rc : -rc;
	}
	struct verbs_qp_rep rp;
	uint16_t ver = 0;
	rc = verbs_rep_decode(rep, replen, &rp, &ver);
	if (rc == -EPROTONOSUPPORT) {
		snprintf(err, errlen, "verbs fabric: node %u speaks queue-pair bootstrap version %u, "
			 "this node version %u: run the same rckv on every node",
			 node, ver, VERBS_WIRE_VERSION);
		return rc;
	}
	if (rc) {
		snprintf(err, errlen, "verbs fabric: node %u sent a malformed queue-pair reply "
			 "(%zu bytes: %s)", node, replen, strerror(-rc));
		return -EPROTO;
	}
	if (rp.status != VERBS_ST_OK) {
		snprintf(err, errlen, "verbs fabric: node %u refused a queue pair for worker %d: "
			 "%s%s%s", node, vw->fw->id, verbs_status_str(rp.status),
			 rp.err ? ": " : "", rp.err ? strerror((int)rp.err) : "");
		return rp.status == VERBS_ST_NOREGION ? -EAGAIN : -ECONNREFUSED;
	}
	if (d->roce ? gid_is_zero(rp.gid) : rp.lid == 0) {
		snprintf(err, errlen, "verbs fabric: node %u answered without a %s; are both "
			 "nodes on the same link layer (InfiniBand or RoCE)?",
			 node, d->roce ? "GID" : "LID");
		return -EPROTO;
	}
	if (rp.size < f->peers[node].size) {
		snprintf(err, errlen, "verbs fabric: node %u registered %llu bytes of region but "
			 "announced %llu", node, (unsigned long long)rp.size,
			 (unsigned long long)f->peers[node].size);
		return -EPROTO;
	}
	struct verbs_far far = { .lid = rp.lid, .gid = rp.gid, .qpn = rp.qpn, .psn = rp.psn,
				 .mtu = rp.mtu };
	e = qp_connect(d, ep->qp, &far, rq.psn, VERBS_IDLE_RD_ATOMIC,
		       min_u8(rq.rd_atomic, rp.rd_atomic), VERBS_RNR_RETRY_REQ);
	if (e) {
		snprintf(err, errlen, "verbs fabric: cannot connect the queue pair to node %u: %s",
			 node, strerror(e));
		return -e;
	}
	ep->rkey = rp.rkey;
	ep->rbase = rp.base;
	ep->rsize = rp.size;
	return 0;
}

/* ---- worker hooks ---- */

static void verbs_worker_fini(struct fab_worker *fw)
{
	struct verbs_worker *vw = fw->bdata;
	if (!vw)
		return;
	struct verbs_dev *d = vw->d;
	for (int i = 0; i < vw->nep; i++) {
		struct verbs_ep *ep = vw->list[i];
		if (ep->qp) {
			if (ep->fl)
				ep_fail(vw, ep, -ESHUTDOWN, NULL);
			ibv_destroy_qp(ep->qp);
		}
		ep_rpc_free(ep);
		free(ep->fl);
		free(ep);
	}
	if (fw->f->peers[fw->f->cfg.self].attached)
		resp_drop(d, fw->f->cfg.self, (uint16_t)fw->id);
	if (vw->cq)
		ibv_destroy_cq(vw->cq); /* every event was acknowledged in poll */
	if (vw->bounce_mr)
		ibv_dereg_mr(vw->bounce_mr);
	free(vw->bounce);
	if (vw->ch)
		ibv_destroy_comp_channel(vw->ch);
	pthread_mutex_destroy(&vw->qp_mu);
	free(vw);
	fw->bdata = NULL;
}

static int verbs_worker_init(struct fab_worker *fw, char *err, size_t errlen)
{
	struct fab *f = fw->f;
	struct verbs_dev *d = f->bdata;
	uint16_t nodes[FAB_MAX_NODES];
	int nep = 0;
	for (int i = 0; i < FAB_MAX_NODES; i++)
		if (f->peers[i].attached && !f->peers[i].direct)
			nodes[nep++] = (uint16_t)i;
	if (nep == 0) {
		snprintf(err, errlen, "verbs fabric: no region attached before the worker started");
		return -EINVAL;
	}
	struct verbs_worker *vw = calloc(1, sizeof(*vw));
	if (!vw) {
		snprintf(err, errlen, "verbs fabric: out of memory");
		return -ENOMEM;
	}
	fw->bdata = vw;
	vw->fw = fw;
	vw->d = d;
	pthread_mutex_init(&vw->qp_mu, NULL);
	int rc;

	/* Room for an endpoint to every node of the cluster, also those not
	 * up yet (made at the first post to them, verbs_post). */
	int slots = nep > (int)f->cfg.nodes ? nep : (int)f->cfg.nodes;
	if (slots > FAB_MAX_NODES)
		slots = FAB_MAX_NODES;
	vw->slots = slots;
	/* Queue depths from the device's limits, invariant (5): a CQE for
	 * every send slot and every receive for answers of every endpoint. */
	uint32_t depth = VERBS_SQ_DEPTH_WANT;
	if ((int)depth > d->dattr.max_qp_wr)
		depth = (uint32_t)d->dattr.max_qp_wr;
	if ((uint64_t)(depth + VERBS_EP_CALLS) * (uint64_t)slots > (uint64_t)d->dattr.max_cqe)
		depth = (uint32_t)(d->dattr.max_cqe / slots) - VERBS_EP_CALLS;
	if (d->dattr.max_cqe / slots < FAB_BATCH_MAX + VERBS_EP_CALLS || depth < FAB_BATCH_MAX) {
		snprintf(err, errlen, "verbs fabric: %s allows %d CQEs per CQ; a worker with %d "
			 "endpoints needs %d", d->name, d->dattr.max_cqe, slots,
			 slots * (FAB_BATCH_MAX + VERBS_EP_CALLS));
		rc = -ENOSPC;
		goto fail;
	}
	vw->sq_depth = depth;

	vw->ch = ibv_create_comp_channel(d->ctx);
	if (!vw->ch)
		goto fail_errno;
	/* Non-blocking, so that poll() consumes events without sleeping. */
	int fl = fcntl(vw->ch->fd, F_GETFL);
	if (fl < 0 || fcntl(vw->ch->fd, F_SETFL, fl | O_NONBLOCK) != 0)
		goto fail_errno;
	vw->cq = ibv_create_cq(d->ctx, (int)((depth + VERBS_EP_CALLS) * (uint32_t)slots), vw,
			       vw->ch, 0);
	if (!vw->cq)
		goto fail_errno;
	vw->bounce_bytes = (size_t)slots * VERBS_EP_BOUNCE_BYTES;
	if (posix_memalign((void **)&vw->bounce, VERBS_PAGE, vw->bounce_bytes) != 0) {
		vw->bounce = NULL;
		errno = ENOMEM;
		goto fail_errno;
	}
	vw->bounce_mr = ibv_reg_mr(d->pd, vw->bounce, vw->bounce_bytes, IBV_ACCESS_LOCAL_WRITE);
	if (!vw->bounce_mr)
		goto fail_errno;
	for (int i = 0; i < nep; i++)
		if ((rc = ep_connect(vw, nodes[i], err, errlen)) != 0)
			goto fail;
	/* Invariant (6): armed before the first post. */
	if ((rc = ibv_req_notify_cq(vw->cq, 0)) != 0) {
		errno = verbs_errno(rc);
		goto fail_errno;
	}
	vw->armed = true;
	return 0;
fail_errno:
	rc = -verbs_errno(-1);
	snprintf(err, errlen, "verbs fabric: worker %d setup on %s failed: %s", fw->id, d->name,
		 strerror(-rc));
fail:
	verbs_worker_fini(fw);
	return rc;
}

static int wc_handle(struct verbs_worker *vw, const struct ibv_wc *wc);

/* A connect that failed (err says why): no QP, and broken until the node's
 * next HELLO (ep_reconnect). */
static void ep_give_up(struct verbs_worker *vw, struct verbs_ep *ep, const char *err)
{
	fprintf(stderr, "verbs fabric: node %u worker %d: %s\n", vw->fw->f->cfg.self, vw->fw->id,
		err);
	pthread_mutex_lock(&vw->qp_mu);
	if (ep->qp)
		ibv_destroy_qp(ep->qp);
	ep->qp = NULL;
	pthread_mutex_unlock(&vw->qp_mu);
	ep->broken = true;
	ep->fail_err = -EHOSTDOWN;
}

/*
 * A broken endpoint to a node that rejoined since (fab_peer_back at its
 * HELLO: a restarted process, with new responders) gets a new queue pair.
 * Every part of the old one has failed (invariant (4)); the CQ is drained
 * first, so that no flush of the old QP is left to be taken for one of the
 * new (a QPN may be reused). Owner thread, at a post: the exchange is a
 * blocking control-plane call, as tcp's reconnect is a blocking connect.
 * Returns 0, or the error parts get.
 */
static int ep_reconnect(struct verbs_worker *vw, struct verbs_ep *ep)
{
	uint32_t back = ck_pr_load_32(&vw->fw->f->peers[ep->node].back);
	if (back == ep->back)
		return ep->fail_err;
	ep->back = back;
	struct ibv_wc wc[VERBS_POLL_BATCH];
	int k;
	while ((k = ibv_poll_cq(vw->cq, VERBS_POLL_BATCH, wc)) > 0)
		for (int i = 0; i < k; i++)
			(void)wc_handle(vw, &wc[i]); /* parts of other endpoints complete */
	if (!ep->fl)
		return ep->fail_err; /* never set up (out of memory) */
	pthread_mutex_lock(&vw->qp_mu);
	if (ep->qp)
		ibv_destroy_qp(ep->qp);
	ep->qp = NULL;
	ck_pr_store_8(&ep->fenced, 0);
	pthread_mutex_unlock(&vw->qp_mu);
	ep->broken = false;
	ep->fail_err = 0;
	ep->sq_used = 0;
	ep->fl_head = ep->fl_n = 0;
	verbs_ring_init(&ep->ring, VERBS_EP_BOUNCE_BYTES);
	char err[256];
	int rc = ep_qp_setup(vw, ep, err, sizeof(err));
	if (rc == 0) {
		fprintf(stderr, "verbs fabric: node %u worker %d: new queue pair to node %u, which "
			"rejoined\n", vw->fw->f->cfg.self, vw->fw->id, ep->node);
		return 0;
	}
	ep_give_up(vw, ep, err);
	return ep->fail_err;
}

/* An endpoint to a node attached after this worker started (it was down
 * when the cluster did), in one of the slots kept for it; NULL if there is
 * none. One that cannot connect now is broken, and retried after the node's
 * next HELLO (ep_reconnect). Owner thread. */
static struct verbs_ep *ep_late(struct verbs_worker *vw, uint16_t node)
{
	const struct fab_peer *p = &vw->fw->f->peers[node];
	if (!p->attached || p->direct || vw->nep >= vw->slots)
		return NULL;
	char err[256];
	int rc = ep_connect(vw, node, err, sizeof(err));
	struct verbs_ep *ep = vw->eps[node];
	if (rc && ep)
		ep_give_up(vw, ep, err);
	return ep;
}

static int verbs_post(struct fab_worker *fw, struct fab_part *part)
{
	struct verbs_worker *vw = fw->bdata;
	struct verbs_ep *ep = vw->eps[part->node];
	if (!ep && (ep = ep_late(vw, part->node)) == NULL)
		return -EHOSTDOWN;
	if (ck_pr_load_8(&ep->fenced) && !ep->broken)
		ep_fail(vw, ep, -EHOSTDOWN, NULL); /* its QP is in error: fails all it holds */
	if (ep->broken) {
		int rc = ep_reconnect(vw, ep);
		if (rc)
			return rc;
	}
	uint32_t max_msg = vw->d->pattr.max_msg_sz;
	for (int i = 0; i < part->n; i++)
		if (max_msg && part->ops[i]->len > max_msg)
			return -EMSGSIZE;
	part->next = NULL;
	if (!ep->wait_head) { /* invariant (1) */
		int rc = ep_start(vw, ep, part);
		if (rc == -EIO) {
			/* Some of its WRs may have been posted: not "unsent"
			 * (fab.h), so completed here, as a failure. */
			fab_part_done(part, rc);
			return 0;
		}
		if (rc != -EAGAIN)
			return rc;
	}
	if (ep->wait_tail)
		ep->wait_tail->next = part;
	else
		ep->wait_head = part;
	ep->wait_tail = part;
	return 0;
}

static struct verbs_ep *ep_of_qpn(struct verbs_worker *vw, uint32_t qpn)
{
	for (int i = 0; i < vw->nep; i++)
		if (vw->list[i]->qp && vw->list[i]->qp->qp_num == qpn)
			return vw->list[i];
	return NULL;
}

/* An answer in receive wc->wr_id: its call's reply, the receive posted
 * again; returns the parts completed. */
static int ep_answer(struct verbs_worker *vw, struct verbs_ep *ep, const struct ibv_wc *wc)
{
	struct verbs_ep_rpc *rpc = ep->rpc;
	const uint32_t idx = (uint32_t)wc->wr_id;
	struct verbs_answer_hdr h;
	if (!rpc || verbs_answer_decode(rpc->area + (size_t)idx * VERBS_MSG_BYTES, wc->byte_len,
					&h) != 0)
		return ep_fail(vw, ep, -EPROTO, "a malformed answer");
	struct verbs_ep_call *k = &rpc->calls[(h.tag & 0xff) % VERBS_EP_CALLS];
	if (!h.tag || (h.tag & 0xff) >= VERBS_EP_CALLS || k->tag != h.tag)
		return ep_fail(vw, ep, -EPROTO, "an answer to no call of ours");
	struct fab_rpc_reply *rep = k->op->rep;
	if (h.status >= 0 && h.len > rep->cap) {
		rep->status = -EMSGSIZE; /* the target checks this; a bad one does not */
		rep->len = 0;
	} else {
		if (h.len)
			memcpy(rep->buf, rpc->area + (size_t)idx * VERBS_MSG_BYTES + VERBS_RPC_HDR,
			       h.len);
		rep->status = h.status;
		rep->len = h.len;
	}
	struct fab_part *part = k->part;
	*k = (struct verbs_ep_call){ 0 };
	rpc->used--;
	int done = 0;
	if (--part->resp_len == 0) {
		fab_part_done(part, 0);
		done = 1;
	}
	if (ep_post_recv(ep, idx) != 0)
		done += ep_fail(vw, ep, -EIO, "ibv_post_recv failed");
	return done;
}

/* One work completion; returns the parts it completed. */
static int wc_handle(struct verbs_worker *vw, const struct ibv_wc *wc)
{
	struct verbs_ep *ep = ep_of_qpn(vw, wc->qp_num);
	if (!ep || ep->broken)
		return 0; /* invariant (4): a flush of a broken QP */
	if (wc->status != IBV_WC_SUCCESS) {
		char why[128];
		if (fab_fenced(vw->fw->f, ep->node))
			return ep_fail(vw, ep, -EHOSTDOWN, "the node was taken out (fenced)");
		/* A receive's flush says only that the QP is in error; the send
		 * queue's completions (a flushed WR completes even unsignaled,
		 * invariant (5)) say why, if it holds any. */
		if (wc->wr_id < VERBS_EP_CALLS && wc->status == IBV_WC_WR_FLUSH_ERR) {
			if (ep->fl_n)
				return 0;
			return ep_fail(vw, ep, -EHOSTDOWN, "its queue pair went to the error state");
		}
		snprintf(why, sizeof(why), "%s (vendor error 0x%x)", ibv_wc_status_str(wc->status),
			 wc->vendor_err);
		return ep_fail(vw, ep, verbs_wc_errno(wc->status), why);
	}
	if (wc->wr_id < VERBS_EP_CALLS)
		return ep_answer(vw, ep, wc);
	struct fab_part *part = (struct fab_part *)(uintptr_t)wc->wr_id;
	if (ep->fl_n == 0 || ep->fl[ep->fl_head].part != part) /* breaks invariant (2) */
		return ep_fail(vw, ep, -EPROTO, "a completion out of posting order");
	struct verbs_flight fl = ep->fl[ep->fl_head];
	ep->fl_head = (ep->fl_head + 1) % ep->sq_depth;
	ep->fl_n--;
	verbs_bounce_drain(fl.area, part->ops, part->n);
	flight_release(ep, &fl);
	if (--part->resp_len) /* invariant (8): answers to come */
		return 0;
	fab_part_done(part, 0);
	return 1;
}

static int verbs_poll(struct fab_worker *fw)
{
	struct verbs_worker *vw = fw->bdata;
	int done = 0;
	/* A fenced node's QP was put in error (verbs_fence): its flushes wake
	 * us, but a part that only waits for answers is failed here too. */
	for (int i = 0; i < vw->nep; i++)
		if (ck_pr_load_8(&vw->list[i]->fenced) && !vw->list[i]->broken && vw->list[i]->qp)
			done += ep_fail(vw, vw->list[i], -EHOSTDOWN, NULL);
	/* Consume the channel's events (the fd is non-blocking), invariant (6). */
	unsigned nev = 0;
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	while (ibv_get_cq_event(vw->ch, &ev_cq, &ev_ctx) == 0)
		nev++;
	if (nev) {
		ibv_ack_cq_events(vw->cq, nev);
		vw->armed = false;
	}
	for (;;) {
		struct ibv_wc wc[VERBS_POLL_BATCH];
		int k;
		do {
			k = ibv_poll_cq(vw->cq, VERBS_POLL_BATCH, wc);
			for (int i = 0; i < k; i++)
				done += wc_handle(vw, &wc[i]);
		} while (k == VERBS_POLL_BATCH);
		if (k < 0) {
			for (int i = 0; i < vw->nep; i++)
				done += ep_fail(vw, vw->list[i], -EIO, "ibv_poll_cq failed");
			break;
		}
		if (vw->armed)
			break;
		/* Found empty: arm, then look once more for what came in between. */
		if (ibv_req_notify_cq(vw->cq, 0) != 0)
			break; /* tried again on the next poll */
		vw->armed = true;
	}
	for (int i = 0; i < vw->nep; i++)
		if (vw->list[i]->wait_head)
			done += ep_drain_wait(vw, vw->list[i]);
	resp_poll(fw->f, vw->d); /* the calls it delivers run in fab_worker_poll */
	return done;
}

static int verbs_worker_fds(struct fab_worker *fw, int *fds, int max)
{
	struct verbs_worker *vw = fw->bdata;
	if (!vw || max < 1)
		return 0;
	fds[0] = vw->ch->fd;
	if (max < 2)
		return 1;
	fds[1] = vw->d->resp_ch->fd; /* the responders' calls: resp_poll */
	return 2;
}

/*
 * fab_fence: every worker's queue pair to the node goes to the error
 * state, so the NIC flushes what was posted there at once (a worker
 * waiting on a hung node wakes with -EHOSTDOWN, not after retries that a
 * hung process's NIC would answer forever). Any thread; the workers'
 * list is fab.c's (rpc_mu).
 */
static void verbs_fence(struct fab *f, uint16_t node)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	pthread_mutex_lock(&f->rpc_mu);
	for (int i = 0; i < FAB_MAX_NODES; i++) {
		struct verbs_worker *vw = f->workers[i] ? f->workers[i]->bdata : NULL;
		if (!vw)
			continue;
		pthread_mutex_lock(&vw->qp_mu);
		struct verbs_ep *ep = vw->eps[node];
		if (ep && ep->qp) {
			ibv_modify_qp(ep->qp, &a, IBV_QP_STATE);
			ck_pr_store_8(&ep->fenced, 1);
		}
		pthread_mutex_unlock(&vw->qp_mu);
	}
	pthread_mutex_unlock(&f->rpc_mu);
}

const struct fab_backend fab_verbs_backend = {
	.name = "verbs",
	.open = verbs_open,
	.close = verbs_close,
	.attach_self = verbs_attach_self,
	.attach_peer = verbs_attach_peer,
	.worker_init = verbs_worker_init,
	.worker_fini = verbs_worker_fini,
	.post = verbs_post,
	.poll = verbs_poll,
	.worker_fds = verbs_worker_fds,
	.ctl = verbs_ctl,
	.fence = verbs_fence,
	.rpc_in_post = true,
};
