/*
 * tcp.c: the TCP fabric backend, for nodes on any hosts (DESIGN.md 8).
 *
 * Initiator side: every worker has one connection per peer (its endpoint).
 * A part of a batch (all its ops for one peer) is one request frame. Post
 * only queues it; fab_worker_flush sends every endpoint's queued frames
 * with one write each (the doorbell), so the parts that the worker's
 * coroutines post to one peer in one pass of its loop share a system call
 * on each side. Several parts may be outstanding on an endpoint
 * (outstanding requests) and their responses come back in order, one frame
 * per part (passive ack). The endpoints of a
 * worker sit in a private epoll set whose fd the worker watches, so the
 * backend alone decides when it wants to write.
 *
 * Target side: a NIC-emulation thread per node applies the ops of each
 * request to the node's region (fab_apply_request: noted in the node's
 * journal when it keeps a log), in order per connection, and never enters
 * transaction code. A request that ends in RPCs hands them to the node's
 * workers (fab_rpc_deliver); later requests of the connection are served
 * meanwhile, and their responses wait behind its (struct nic_rpcs). Its connections arrive through the control plane's
 * fabric listener (fab_adopt). A request with a remote flush (fab_flush)
 * parks its connection: the reply, and every later request of that
 * connection, wait until the syncer thread ran the journal's sync, which
 * it starts only after the flush was applied, so that sync covers every
 * write the connection made before it.
 *
 * Wire format, little-endian (all nodes of a cluster are x86-64 here):
 *   hello    struct tcp_hello (tcp_wire.h): "RCKVFAB1", type DATA, from-node,
 *            worker; sent by the initiator before its first request
 *   request  u32 frame bytes (after this field), u32 nops, nops x op
 *            {u8 kind, u8 flags (FAB_OP_FLUSH), u8 pad[2], u32 len, u64 off,
 *            u64 cmp, u64 swp},
 *            then the WRITE payloads in op order
 *   response u32 frame bytes, i32 status, then for each op in order: READ
 *            data (len bytes) or CAS/FAA old value (8 bytes); WRITE: nothing
 */
#include <ck_pr.h>
#include <ck_ring.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rdma/fab_internal.h"
#include "rdma/tcp_wire.h"

/* ck_ring orders a slot before its index with ck_pr fences, inline
 * assembly ThreadSanitizer does not see: the adopt ring's hand-off (an fd
 * the listener accepted, used by the NIC thread) is told to it here. */
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define RING_PUBLISH(ring) __tsan_release(ring)
#define RING_TAKEN(ring) __tsan_acquire(ring)
#else
#define RING_PUBLISH(ring) ((void)(ring))
#define RING_TAKEN(ring) ((void)(ring))
#endif

/* ---- buffers ---- */

struct buf {
	char *p;
	size_t len, off, cap;
};

static int buf_reserve(struct buf *b, size_t more)
{
	if (b->off && b->off == b->len) {
		b->off = b->len = 0;
	}
	if (b->len + more <= b->cap)
		return 0;
	if (b->off) { /* compact before growing */
		memmove(b->p, b->p + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
		if (b->len + more <= b->cap)
			return 0;
	}
	size_t cap = b->cap ? b->cap : 64 * 1024;
	while (cap < b->len + more)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

/* Write what the socket takes of b but its last `held` bytes; 0, or -errno
 * if the connection failed. */
static int buf_flush_held(int fd, struct buf *b, size_t held)
{
	while (b->off < b->len - held) {
		ssize_t k = send(fd, b->p + b->off, b->len - held - b->off, MSG_NOSIGNAL);
		if (k > 0) {
			b->off += (size_t)k;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		return k < 0 ? -errno : -EPIPE;
	}
	if (!held)
		b->off = b->len = 0;
	return 0;
}

static int buf_flush(int fd, struct buf *b) { return buf_flush_held(fd, b, 0); }

/* Read what is there; 0, 1 on EOF, or -errno. */
static int buf_fill(int fd, struct buf *b)
{
	for (;;) {
		if (buf_reserve(b, 64 * 1024))
			return -ENOMEM;
		ssize_t k = recv(fd, b->p + b->len, b->cap - b->len, 0);
		if (k > 0) {
			b->len += (size_t)k;
			if (b->len < b->cap)
				return 0;
			continue;
		}
		if (k == 0)
			return 1;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		return -errno;
	}
}

/* ---- initiator side ---- */

/* part->resp_len of a part with RPCs: its response has no fixed size. */
#define RESP_VARIABLE UINT32_MAX

struct tcp_ep {
	struct fab_worker *fw;
	int fd;
	uint16_t node;
	bool broken;
	uint64_t retry_at;   /* broken: when to try reconnecting (monotonic ns) */
	uint32_t back;       /* fab_peer.back when we last tried: if it moved, the
				peer rejoined, and retry_at is not waited for */
	struct fab_part *head, *tail; /* parts awaiting their response */
	struct buf w, r;
};

struct tcp_worker {
	struct tcp_worker *next; /* on tcp_nic.workers (fab_fence finds them) */
	pthread_mutex_t fd_mu;   /* an endpoint's fd changing, or being shut by a fence */
	int epfd; /* private set of this worker's endpoints */
	struct tcp_ep *eps[FAB_MAX_NODES];
	uint64_t queued; /* nodes whose endpoint holds frames not yet sent */
};

int fab_tcp_connect(const char *addr, int timeout_ms, char *err, size_t errlen)
{
	char host[128];
	const char *colon = strrchr(addr, ':');
	if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof(host)) {
		snprintf(err, errlen, "bad fabric address '%s' (want host:port)", addr);
		return -EINVAL;
	}
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res;
	int gai = getaddrinfo(host, colon + 1, &hints, &res);
	if (gai) {
		snprintf(err, errlen, "fabric address '%s': %s", addr, gai_strerror(gai));
		return -EINVAL;
	}
	int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		freeaddrinfo(res);
		return -errno;
	}
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	int rc = connect(fd, res->ai_addr, res->ai_addrlen);
	int e = errno;
	freeaddrinfo(res);
	if (rc != 0) {
		close(fd);
		snprintf(err, errlen, "connect to %s: %s", addr, strerror(e));
		return -e;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void ep_fail(struct tcp_ep *ep, int err)
{
	if (!ep->broken)
		ep->fw->breaks++; /* fab_worker_breaks */
	ep->broken = true;
	struct fab_part *p;
	while ((p = ep->head)) {
		ep->head = p->next;
		fab_part_done(p, err);
	}
	ep->tail = NULL;
}

static int tcp_attach_peer(struct fab *f, const struct fab_peer_info *pi, char *err, size_t errlen)
{
	struct fab_peer *p = &f->peers[pi->node];
	p->direct = false;
	p->base = NULL;
	if (!strchr(pi->addr, ':')) {
		snprintf(err, errlen, "node %u has no fabric address", pi->node);
		return -EINVAL;
	}
	return 0;
}

static void workers_add(struct fab *f, struct tcp_worker *tw);
static void workers_remove(struct fab *f, struct tcp_worker *tw);

static void tcp_worker_fini(struct fab_worker *fw)
{
	struct tcp_worker *tw = fw->bdata;
	if (!tw)
		return;
	workers_remove(fw->f, tw);
	for (int i = 0; i < FAB_MAX_NODES; i++) {
		struct tcp_ep *ep = tw->eps[i];
		if (!ep)
			continue;
		ep_fail(ep, -ESHUTDOWN);
		close(ep->fd);
		free(ep->w.p);
		free(ep->r.p);
		free(ep);
	}
	close(tw->epfd);
	pthread_mutex_destroy(&tw->fd_mu);
	free(tw);
	fw->bdata = NULL;
}

static int ep_reconnect(struct fab_worker *fw, struct tcp_ep *ep);

/* The worker's endpoint to a node, not connected yet (ep_reconnect
 * connects it at the first post). NULL if out of memory. */
static struct tcp_ep *ep_new(struct fab_worker *fw, uint16_t node)
{
	struct tcp_worker *tw = fw->bdata;
	struct tcp_ep *ep = calloc(1, sizeof(*ep));
	if (!ep)
		return NULL;
	ep->fw = fw;
	ep->fd = -1;
	ep->node = node;
	ep->broken = true; /* not counted as a break: never connected */
	ep->back = ck_pr_load_32(&fw->f->peers[node].back) - 1; /* connect at once */
	pthread_mutex_lock(&tw->fd_mu);
	tw->eps[node] = ep;
	pthread_mutex_unlock(&tw->fd_mu);
	return ep;
}

static int tcp_worker_init(struct fab_worker *fw, char *err, size_t errlen)
{
	struct fab *f = fw->f;
	struct tcp_worker *tw = calloc(1, sizeof(*tw));
	if (!tw)
		return -ENOMEM;
	fw->bdata = tw;
	pthread_mutex_init(&tw->fd_mu, NULL);
	workers_add(f, tw);
	tw->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (tw->epfd < 0)
		goto fail;
	for (int i = 0; i < FAB_MAX_NODES; i++) {
		struct fab_peer *p = &f->peers[i];
		if (!p->attached || p->direct)
			continue;
		if (!ep_new(fw, (uint16_t)i))
			goto fail;
		/* A peer that does not answer now (dead since it joined) is
		 * connected at a later post. A connection made here does not
		 * count as a retry: a break soon after reconnects at once. */
		(void)ep_reconnect(fw, tw->eps[i]);
		tw->eps[i]->retry_at = 0;
	}
	return 0;
fail:
	if (!err[0])
		snprintf(err, errlen, "tcp fabric: worker setup failed: %s", strerror(errno));
	tcp_worker_fini(fw);
	return -EHOSTUNREACH;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define RECONNECT_EVERY_NS (500ull * 1000 * 1000) /* at most twice a second */

/*
 * A broken endpoint (the peer restarted, or the network failed) is
 * reconnected on demand: the first post after RECONNECT_EVERY_NS, or after
 * the peer rejoined (fab_peer_back), tries one short blocking connect
 * (loopback or LAN: refused or accepted at once).
 * Every part of the old connection has already failed (ep_fail), so the
 * new stream starts empty and in order.
 */
static int ep_reconnect(struct fab_worker *fw, struct tcp_ep *ep)
{
	struct tcp_worker *tw = fw->bdata;
	uint64_t now = mono_ns();
	uint32_t back = ck_pr_load_32(&fw->f->peers[ep->node].back);
	if (now < ep->retry_at && back == ep->back)
		return -EHOSTDOWN;
	ep->retry_at = now + RECONNECT_EVERY_NS;
	ep->back = back;
	char err[256];
	int fd = fab_tcp_connect(fw->f->peers[ep->node].info.addr, 200, err, sizeof(err));
	if (fd < 0)
		return -EHOSTDOWN;
	struct tcp_hello h;
	tcp_hello_encode(&h, TCP_HELLO_DATA, fw->f->cfg.self, (uint16_t)fw->id);
	if (send(fd, &h, sizeof(h), MSG_NOSIGNAL) != (ssize_t)sizeof(h)) {
		close(fd);
		return -EHOSTDOWN;
	}
	ioctl_nonblock(fd, 1);
	pthread_mutex_lock(&tw->fd_mu);
	if (ep->fd >= 0) {
		epoll_ctl(tw->epfd, EPOLL_CTL_DEL, ep->fd, NULL);
		close(ep->fd);
	}
	ep->fd = fd;
	pthread_mutex_unlock(&tw->fd_mu);
	ep->w.off = ep->w.len = 0;
	ep->r.off = ep->r.len = 0;
	ep->broken = false;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = ep };
	epoll_ctl(tw->epfd, EPOLL_CTL_ADD, fd, &ev);
	return 0;
}

/* fab_lose_replies: let one through while `lose_after` says so, else take
 * one from the peer's count, if any is left. */
static bool lose_one(struct fab_peer *p)
{
	uint32_t n = ck_pr_load_32(&p->lose);
	if (!n)
		return false;
	uint32_t a = ck_pr_load_32(&p->lose_after);
	while (a && !ck_pr_cas_32_value(&p->lose_after, a, a - 1, &a))
		;
	if (a)
		return false;
	while (n && !ck_pr_cas_32_value(&p->lose, n, n - 1, &n))
		;
	return n != 0;
}

static int tcp_post(struct fab_worker *fw, struct fab_part *part)
{
	struct tcp_worker *tw = fw->bdata;
	struct tcp_ep *ep = tw->eps[part->node];
	if (!ep && !(ep = ep_new(fw, part->node))) /* a peer that joined after this worker */
		return -ENOMEM;
	if (ep->broken && ep_reconnect(fw, ep) != 0)
		return -EHOSTDOWN;
	uint32_t resp = 0;
	for (int i = 0; i < part->n; i++) {
		struct fab_op *op = part->ops[i];
		if (op->kind == FAB_RPC)
			resp = RESP_VARIABLE; /* the replies' lengths say */
		else if (resp == RESP_VARIABLE || op->kind == FAB_WRITE)
			continue;
		else
			resp += op->kind == FAB_READ ? op->len : 8;
	}
	size_t frame = tcp_request_size(part->ops, part->n);
	if (buf_reserve(&ep->w, frame))
		return -ENOMEM;
	char *q = ep->w.p + ep->w.len;
	tcp_request_encode(q, part->ops, part->n);
	ep->w.len += frame;
	part->resp_len = resp;
	part->next = NULL;
	if (ep->tail)
		ep->tail->next = part;
	else
		ep->head = part;
	ep->tail = part;
	if (lose_one(&fw->f->peers[part->node])) {
		/* The request leaves, its reply is lost (fab_lose_replies). */
		(void)buf_flush(ep->fd, &ep->w);
		ep_fail(ep, -EHOSTDOWN);
		return 0; /* already completed with an error */
	}
	tw->queued |= 1ull << part->node;
	return 0;
}

static void tcp_flush(struct fab_worker *fw)
{
	struct tcp_worker *tw = fw->bdata;
	while (tw->queued) {
		int node = __builtin_ctzll(tw->queued);
		tw->queued &= tw->queued - 1;
		struct tcp_ep *ep = tw->eps[node];
		/* What the socket does not take now, EPOLLOUT sends (tcp_poll). */
		if (ep->broken)
			continue;
		fw->doorbells++;
		if (buf_flush(ep->fd, &ep->w) != 0)
			ep_fail(ep, -EHOSTDOWN);
	}
}

/* Deliver complete responses at the head of the endpoint's FIFO. */
static int ep_deliver(struct tcp_ep *ep)
{
	int done = 0;
	while (ep->head) {
		size_t avail = ep->r.len - ep->r.off;
		if (avail < 8)
			break;
		const char *q = ep->r.p + ep->r.off;
		uint32_t flen;
		int32_t status;
		memcpy(&flen, q, 4);
		memcpy(&status, q + 4, 4);
		if (avail < 4 + (size_t)flen)
			break;
		struct fab_part *p = ep->head;
		if (status == 0 &&
		    (flen < 4 || (p->resp_len != RESP_VARIABLE && flen != 4 + p->resp_len) ||
		     tcp_response_decode(q + 8, flen - 4, p->ops, p->n) != 0)) {
			ep_fail(ep, -EPROTO); /* a response of the wrong size: stream lost */
			return done;
		}
		ep->r.off += 4 + (size_t)flen;
		ep->head = p->next;
		if (!ep->head)
			ep->tail = NULL;
		fab_part_done(p, status);
		done++;
	}
	if (ep->r.off == ep->r.len)
		ep->r.off = ep->r.len = 0;
	return done;
}

static int tcp_poll(struct fab_worker *fw)
{
	struct tcp_worker *tw = fw->bdata;
	struct epoll_event evs[FAB_MAX_NODES];
	int k = epoll_wait(tw->epfd, evs, FAB_MAX_NODES, 0);
	int done = 0;
	for (int i = 0; i < k; i++) {
		struct tcp_ep *ep = evs[i].data.ptr;
		if (ep->broken)
			continue;
		if (evs[i].events & EPOLLOUT) {
			if (buf_flush(ep->fd, &ep->w)) {
				ep_fail(ep, -EHOSTDOWN);
				continue;
			}
		}
		if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
			int rc = buf_fill(ep->fd, &ep->r);
			done += ep_deliver(ep);
			if (rc != 0)
				ep_fail(ep, -EHOSTDOWN);
		}
	}
	return done;
}

static int tcp_worker_fds(struct fab_worker *fw, int *fds, int max)
{
	struct tcp_worker *tw = fw->bdata;
	if (!tw || max < 1)
		return 0;
	fds[0] = tw->epfd;
	return 1;
}

/* ---- target side: the NIC-emulation thread ---- */

struct nic_conn;

/* An RPC of a request frame, run by a worker of this node (fab_rpc_deliver);
 * its request copied out of the read buffer, its reply after it. */
struct nic_call {
	struct fab_rpc_call c;
	struct tcp_nic *nic;
	struct nic_rpcs *rpcs; /* its frame's; NULL once the connection closed */
	int32_t status;
	uint32_t len;
	bool answered;         /* counted by its frame (NIC thread) */
	struct nic_call *next; /* tcp_nic.done */
};

/* A request frame whose calls run. Later frames are served meanwhile (a
 * handler may wait for what they do), but their responses follow this
 * one's on the wire: they gather in `after` until it is done. */
struct nic_rpcs {
	struct nic_conn *conn;
	struct nic_call *calls[FAB_BATCH_MAX];
	int ncalls, left;
	bool flush;        /* it had a remote flush: synced once the calls answered */
	struct buf resp;   /* its response: the one-sided part; the replies follow */
	struct buf after;  /* the responses of the frames after it, before the next */
	struct nic_rpcs *next;
};

struct nic_conn {
	int fd;
	uint16_t from;  /* the initiator's node: fenced, its requests are refused */
	uint16_t worker; /* the initiator's worker: picks ours for its RPCs */
	/* Frames whose calls run, oldest first (struct nic_rpcs): w gets a
	 * response of theirs, and those after it, only once it is done. */
	struct nic_rpcs *rq_head, *rq_tail;
	struct buf r, w;
	bool want_out;
	/* Parked at a remote flush (fab_flush): its response, the last
	 * `held` bytes of w, leaves once the syncer's round `ticket` is done;
	 * until then no later request of the connection is served (their
	 * responses must follow it). */
	bool parked;
	size_t held;
	uint64_t ticket;
	struct nic_conn *prev, *next; /* tcp_nic.conns; NIC thread only */
};

#define NIC_RING 256

struct tcp_nic {
	struct fab *f;
	pthread_t thread;
	bool running;
	int epfd, wakefd;
	int stop;
	struct ck_ring ring; /* adopted fds, from the control plane's thread */
	struct ck_ring_buffer ringbuf[NIC_RING];
	pthread_mutex_t adopt_lock; /* one producer at a time (spsc ring) */
	/* Open connections: the NIC thread's while it runs, tcp_close's after
	 * it joined it. Kept so that close can shut them: a connection left
	 * open to a stopped NIC makes its initiator wait forever. */
	struct nic_conn *conns;
	/* The syncer: a thread that runs the own journal's sync for parked
	 * connections, so that the NIC never blocks on the disk. Rounds are
	 * numbered: a connection parked with ticket t waits for round t, which
	 * starts after its notes were made (sync_mu). Started at the first
	 * remote flush. */
	pthread_t sync_thread;
	bool sync_running, sync_stop;
	pthread_mutex_t sync_mu;
	pthread_cond_t sync_cond;
	uint64_t sync_want, sync_done; /* rounds asked for, rounds finished */
	int sync_err;                  /* the last round's, 0 or -errno */
	uint64_t parked;               /* connections parked (NIC thread only) */
	/* The initiators' workers, for fab_fence. */
	pthread_mutex_t workers_mu;
	struct tcp_worker *workers;
	/* Calls answered by the workers (nic_call_done), for the NIC thread. */
	pthread_mutex_t done_mu;
	struct nic_call *done;
};

static void workers_add(struct fab *f, struct tcp_worker *tw)
{
	struct tcp_nic *nic = f->bdata;
	if (!nic)
		return;
	pthread_mutex_lock(&nic->workers_mu);
	tw->next = nic->workers;
	nic->workers = tw;
	pthread_mutex_unlock(&nic->workers_mu);
}

static void workers_remove(struct fab *f, struct tcp_worker *tw)
{
	struct tcp_nic *nic = f->bdata;
	if (!nic)
		return;
	pthread_mutex_lock(&nic->workers_mu);
	for (struct tcp_worker **pp = &nic->workers; *pp; pp = &(*pp)->next)
		if (*pp == tw) {
			*pp = tw->next;
			break;
		}
	pthread_mutex_unlock(&nic->workers_mu);
}

/* fab_fence: shut every worker's connection to the node. A worker waiting
 * for its replies sees the hang-up, fails what was in flight (ep_fail),
 * and does not reconnect while the node is fenced (fab_exec refuses). */
static void tcp_fence(struct fab *f, uint16_t node)
{
	struct tcp_nic *nic = f->bdata;
	pthread_mutex_lock(&nic->workers_mu);
	for (struct tcp_worker *tw = nic->workers; tw; tw = tw->next) {
		pthread_mutex_lock(&tw->fd_mu);
		struct tcp_ep *ep = tw->eps[node];
		if (ep && ep->fd >= 0)
			shutdown(ep->fd, SHUT_RDWR);
		pthread_mutex_unlock(&tw->fd_mu);
	}
	pthread_mutex_unlock(&nic->workers_mu);
}

static void nic_close(struct tcp_nic *nic, struct nic_conn *c)
{
	if (c->parked)
		nic->parked--;
	while (c->rq_head) {
		struct nic_rpcs *e = c->rq_head;
		c->rq_head = e->next;
		for (int i = 0; i < e->ncalls; i++) {
			if (e->calls[i]->answered)
				free(e->calls[i]);
			else
				e->calls[i]->rpcs = NULL; /* freed when it answers */
		}
		free(e->resp.p);
		free(e->after.p);
		free(e);
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		nic->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	epoll_ctl(nic->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->r.p);
	free(c->w.p);
	free(c);
}

static void nic_set_out(struct tcp_nic *nic, struct nic_conn *c, bool on)
{
	if (c->want_out == on)
		return;
	c->want_out = on;
	struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c };
	epoll_ctl(nic->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Replace c's held response (its last `held` bytes) by a failed one. */
static void nic_fail_held(struct nic_conn *c, size_t held, int32_t err)
{
	uint32_t rlen = 4;
	c->w.len -= held;
	memcpy(c->w.p + c->w.len, &rlen, 4);
	memcpy(c->w.p + c->w.len + 4, &err, 4);
	c->w.len += 8;
}

static void *nic_syncer_main(void *arg)
{
	struct tcp_nic *nic = arg;
	const struct fab_journal *j = &nic->f->peers[nic->f->cfg.self].journal;
	pthread_setname_np(pthread_self(), "rckv-nic-sync"); /* top -H, perf, gdb */
	pthread_mutex_lock(&nic->sync_mu);
	for (;;) {
		while (!nic->sync_stop && nic->sync_done == nic->sync_want)
			pthread_cond_wait(&nic->sync_cond, &nic->sync_mu);
		if (nic->sync_stop)
			break;
		uint64_t round = nic->sync_want;
		pthread_mutex_unlock(&nic->sync_mu);
		int err = j->sync(j->arg); /* covers every note made before round was asked */
		pthread_mutex_lock(&nic->sync_mu);
		nic->sync_done = round;
		nic->sync_err = err;
		uint64_t v = 1;
		ssize_t r = write(nic->wakefd, &v, sizeof(v));
		(void)r;
	}
	pthread_mutex_unlock(&nic->sync_mu);
	return NULL;
}

/* Hold c's last response (held bytes) until a sync round that starts
 * after now: everything this NIC applied so far, c's request included,
 * is in the journal already (fab_apply_request). */
static void nic_park(struct tcp_nic *nic, struct nic_conn *c, size_t held)
{
	pthread_mutex_lock(&nic->sync_mu);
	if (!nic->sync_running &&
	    pthread_create(&nic->sync_thread, NULL, nic_syncer_main, nic) == 0)
		nic->sync_running = true;
	if (!nic->sync_running) {
		pthread_mutex_unlock(&nic->sync_mu);
		nic_fail_held(c, held, -EAGAIN); /* no thread to sync: the flush fails */
		return;
	}
	c->ticket = ++nic->sync_want;
	pthread_cond_signal(&nic->sync_cond);
	pthread_mutex_unlock(&nic->sync_mu);
	c->parked = true;
	c->held = held;
	nic->parked++;
}

static int nic_serve(struct tcp_nic *nic, struct nic_conn *c);
static void nic_set_out(struct tcp_nic *nic, struct nic_conn *c, bool on);
static struct nic_rpcs *nic_call(struct tcp_nic *nic, struct nic_conn *c, struct fab_op *ops,
				 uint32_t n);
static void nic_rpcs_flush(struct tcp_nic *nic, struct nic_conn *c);

/* Serve what c received, send what it may (not a held response), and close
 * it if that failed or rc (its read's) says it is gone. */
static void nic_pump(struct tcp_nic *nic, struct nic_conn *c, int rc)
{
	nic_rpcs_flush(nic, c);
	if (nic_serve(nic, c) != 0)
		rc = -EPROTO;
	nic_rpcs_flush(nic, c); /* frames it found done at once (their ops failed) */
	if (rc == 0 && buf_flush_held(c->fd, &c->w, c->held) != 0)
		rc = -EPIPE;
	if (rc != 0) {
		nic_close(nic, c);
		return;
	}
	nic_set_out(nic, c, c->w.len - c->held > c->w.off);
}

/* After a sync round: release the connections it covered (their held
 * response, or an error in its place if the round failed), and serve what
 * they received meanwhile. */
static void nic_unpark(struct tcp_nic *nic)
{
	pthread_mutex_lock(&nic->sync_mu);
	uint64_t done = nic->sync_done;
	int err = nic->sync_err;
	pthread_mutex_unlock(&nic->sync_mu);
	for (struct nic_conn *c = nic->conns, *next; c && nic->parked; c = next) {
		next = c->next;
		if (!c->parked || c->ticket > done)
			continue;
		if (err)
			nic_fail_held(c, c->held, err);
		c->parked = false;
		c->held = 0;
		nic->parked--;
		nic_pump(nic, c, 0);
	}
}

/* A worker answered a call (any thread): hand it to the NIC thread. */
static void nic_call_done(struct fab_rpc_call *fc, int32_t status, uint32_t len)
{
	struct nic_call *k = (struct nic_call *)fc;
	struct tcp_nic *nic = k->nic;
	k->status = status;
	k->len = status >= 0 ? len : 0;
	pthread_mutex_lock(&nic->done_mu);
	k->next = nic->done;
	nic->done = k;
	pthread_mutex_unlock(&nic->done_mu);
	uint64_t v = 1;
	ssize_t r = write(nic->wakefd, &v, sizeof(v));
	(void)r;
}

/* Hand a frame's trailing RPCs to the workers, as a new nic_rpcs at the
 * end of c's; NULL: out of memory (the connection goes: its initiator
 * fails what it had in flight). */
static struct nic_rpcs *nic_call(struct tcp_nic *nic, struct nic_conn *c, struct fab_op *ops,
				 uint32_t n)
{
	struct nic_rpcs *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->conn = c;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t cap = (uint32_t)ops[i].cmp;
		struct nic_call *k = malloc(sizeof(*k) + cap + ops[i].len);
		if (!k) {
			for (uint32_t j = 0; j < i; j++)
				free(e->calls[j]);
			free(e);
			return NULL;
		}
		*k = (struct nic_call){ .nic = nic, .rpcs = e };
		char *resp = (char *)(k + 1), *req = resp + cap;
		memcpy(req, ops[i].buf, ops[i].len);
		k->c = (struct fab_rpc_call){ .from = c->from, .handler = (uint16_t)ops[i].off,
					      .len = ops[i].len, .cap = cap, .req = req, .resp = resp,
					      .done = nic_call_done };
		e->calls[i] = k;
	}
	e->ncalls = e->left = (int)n;
	if (c->rq_tail)
		c->rq_tail->next = e;
	else
		c->rq_head = e;
	c->rq_tail = e;
	return e;
}

/* The NIC thread: calls answered; their connections go on. */
static void nic_calls_answered(struct tcp_nic *nic)
{
	pthread_mutex_lock(&nic->done_mu);
	struct nic_call *k = nic->done;
	nic->done = NULL;
	pthread_mutex_unlock(&nic->done_mu);
	while (k) {
		struct nic_call *next = k->next;
		struct nic_rpcs *e = k->rpcs;
		if (!e) {
			free(k);
		} else {
			k->answered = true;
			if (--e->left == 0)
				nic_pump(nic, e->conn, 0);
		}
		k = next;
	}
}

/* Append n bytes to c->w; -1 if there is no room. */
static int w_append(struct nic_conn *c, const void *p, size_t n)
{
	if (n == 0)
		return 0;
	if (buf_reserve(&c->w, n))
		return -1;
	memcpy(c->w.p + c->w.len, p, n);
	c->w.len += n;
	return 0;
}

/*
 * The frames at the head of c's whose calls all answered: their replies
 * after their responses, then the responses after them, go to w. One
 * with a remote flush parks c for its sync (nic_park: the held bytes are
 * w's last), and the rest waits for that. Not while c is parked: its held
 * response must stay w's last bytes.
 */
static void nic_rpcs_flush(struct tcp_nic *nic, struct nic_conn *c)
{
	while (!c->parked && c->rq_head && c->rq_head->left == 0) {
		struct nic_rpcs *e = c->rq_head;
		size_t start = c->w.len;
		bool ok = w_append(c, e->resp.p, e->resp.len) == 0;
		for (int i = 0; i < e->ncalls; i++) {
			struct nic_call *k = e->calls[i];
			ok = ok && w_append(c, &k->status, 4) == 0 && w_append(c, &k->len, 4) == 0 &&
			     w_append(c, k->c.resp, k->len) == 0;
			free(k);
		}
		e->ncalls = 0;
		if (ok) {
			uint32_t rlen = (uint32_t)(c->w.len - start - 4);
			memcpy(c->w.p + start, &rlen, 4);
		}
		size_t held = c->w.len - start;
		ok = ok && w_append(c, e->after.p, e->after.len) == 0;
		c->rq_head = e->next;
		if (!c->rq_head)
			c->rq_tail = NULL;
		bool flush = e->flush;
		held += e->after.len;
		free(e->resp.p);
		free(e->after.p);
		free(e);
		if (!ok) {
			shutdown(c->fd, SHUT_RDWR); /* no room for the replies: the stream is lost */
			return;
		}
		if (flush)
			nic_park(nic, c, held);
	}
}

/* Serve every complete request in c->r; returns -1 if the stream is bad. */
static int nic_serve(struct tcp_nic *nic, struct nic_conn *c)
{
	struct fab *f = nic->f;
	struct fab_peer *self = &f->peers[f->cfg.self];
	while (!c->parked && c->r.len - c->r.off >= 8) {
		const char *q = c->r.p + c->r.off;
		uint32_t flen, nops;
		memcpy(&flen, q, 4);
		memcpy(&nops, q + 4, 4);
		if (nops == 0 || nops > FAB_BATCH_MAX)
			return -1;
		if (c->r.len - c->r.off < 4 + (size_t)flen)
			break;
		/* A node the configuration took out may be a hung one that
		 * woke up: nothing it sends is applied (fab_fence). */
		if (fab_fenced(f, c->from))
			return -1;
		struct fab_op ops[FAB_BATCH_MAX];
		struct fab_op *opp[FAB_BATCH_MAX];
		uint64_t olds[FAB_BATCH_MAX];
		char *oldpos[FAB_BATCH_MAX];
		uint32_t resp = 0;
		if (tcp_request_decode(q, flen, ops, nops, &resp) != 0)
			return -1;
		bool flush = false;
		for (uint32_t i = 0; i < nops; i++)
			flush |= (ops[i].flags & FAB_OP_FLUSH) != 0;
		if (flush && c->rq_head && !(ops[nops - 1].kind == FAB_RPC))
			break; /* a remote flush parks w's tail: after the calls before it */
		uint32_t nfixed = nops;
		while (nfixed && ops[nfixed - 1].kind == FAB_RPC)
			nfixed--;
		struct nic_rpcs *e = NULL;
		if (nfixed < nops && !(e = nic_call(nic, c, ops + nfixed, nops - nfixed)))
			return -1;
		/* Where the response goes: its own buffer (calls), behind the
		 * frames whose calls run, or w. */
		struct buf *rb = e ? &e->resp : c->rq_tail ? &c->rq_tail->after : &c->w;
		/* A READ past the region fails with -EFAULT, whatever its
		 * length: its bytes are never reserved, so one 32-byte op
		 * cannot make this thread allocate up to 4 GiB for a response
		 * that carries none (found by tests/fuzz/fuzz_tcp_wire.c). */
		int32_t early = 0;
		for (uint32_t i = 0; i < nfixed; i++)
			if (ops[i].kind == FAB_READ &&
			    (ops[i].off > self->size || ops[i].len > self->size - ops[i].off))
				early = -EFAULT;
		if (buf_reserve(rb, 8 + (early ? 0 : (size_t)resp)))
			return -1;
		char *out = rb->p + rb->len;
		/* Point READ destinations and atomics' results into the response. */
		char *dst = out + 8;
		for (uint32_t i = 0; i < nops && !early; i++) {
			opp[i] = &ops[i];
			if (ops[i].kind == FAB_READ) {
				ops[i].buf = dst;
				dst += ops[i].len;
			} else if (ops[i].kind != FAB_WRITE) {
				ops[i].old = &olds[i]; /* aligned; copied out below */
				oldpos[i] = dst;
				dst += 8;
			}
		}
		int32_t status = early ? early : nfixed ? fab_apply_request(f, opp, (int)nfixed) : 0;
		for (uint32_t i = 0; i < nfixed && !early; i++)
			if (ops[i].kind == FAB_CAS || ops[i].kind == FAB_FAA)
				memcpy(oldpos[i], &olds[i], 8);
		uint32_t rlen = status ? 4 : 4 + resp;
		memcpy(out, &rlen, 4);
		memcpy(out + 4, &status, 4);
		rb->len += 4 + (size_t)rlen;
		c->r.off += 4 + (size_t)flen;
		const bool sync = flush && status == 0 && self->journaled && self->journal.sync;
		if (e) {
			if (status != 0) {
				/* Nothing applied: the calls are not made, and the
				 * frame is done with its error. */
				for (int i = 0; i < e->ncalls; i++)
					free(e->calls[i]);
				e->ncalls = e->left = 0;
				continue;
			}
			/* The calls see what the ops before them did; later
			 * frames are served meanwhile, their responses behind. */
			e->flush = sync;
			for (int i = 0; i < e->ncalls; i++)
				fab_rpc_deliver(f, c->worker, &e->calls[i]->c);
			continue;
		}
		if (sync)
			nic_park(nic, c, 4 + (size_t)rlen);
	}
	if (c->r.off == c->r.len)
		c->r.off = c->r.len = 0;
	return 0;
}

static void *nic_main(void *arg)
{
	struct tcp_nic *nic = arg;
	struct epoll_event evs[64];
	pthread_setname_np(pthread_self(), "rckv-nic"); /* top -H, perf, gdb */
	while (!__atomic_load_n(&nic->stop, __ATOMIC_ACQUIRE)) {
		int k = epoll_wait(nic->epfd, evs, 64, -1);
		for (int i = 0; i < k; i++) {
			if (evs[i].data.ptr == NULL) { /* wakefd: adopted connections */
				uint64_t v;
				ssize_t r = read(nic->wakefd, &v, sizeof(v));
				(void)r;
				void *p;
				nic_unpark(nic); /* the syncer rings the same fd */
				nic_calls_answered(nic); /* so do the workers */
				while (ck_ring_dequeue_spsc(&nic->ring, nic->ringbuf, &p)) {
					RING_TAKEN(&nic->ring);
					struct nic_conn *c = calloc(1, sizeof(*c));
					if (!c) {
						close((int)(uint32_t)(uintptr_t)p);
						continue;
					}
					c->fd = (int)(uint32_t)(uintptr_t)p;
					c->from = (uint16_t)((uintptr_t)p >> 32);
					c->worker = (uint16_t)((uintptr_t)p >> 48);
					c->next = nic->conns;
					if (c->next)
						c->next->prev = c;
					nic->conns = c;
					struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
					epoll_ctl(nic->epfd, EPOLL_CTL_ADD, c->fd, &ev);
				}
				continue;
			}
			struct nic_conn *c = evs[i].data.ptr;
			int rc = 0;
			if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
				rc = buf_fill(c->fd, &c->r);
			nic_pump(nic, c, rc);
		}
	}
	return NULL;
}

static int tcp_open(struct fab *f, char *err, size_t errlen)
{
	struct tcp_nic *nic = calloc(1, sizeof(*nic));
	if (!nic)
		return -ENOMEM;
	nic->f = f;
	nic->epfd = epoll_create1(EPOLL_CLOEXEC);
	nic->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	ck_ring_init(&nic->ring, NIC_RING);
	pthread_mutex_init(&nic->adopt_lock, NULL);
	pthread_mutex_init(&nic->workers_mu, NULL);
	pthread_mutex_init(&nic->sync_mu, NULL);
	pthread_cond_init(&nic->sync_cond, NULL);
	pthread_mutex_init(&nic->done_mu, NULL);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	if (nic->epfd < 0 || nic->wakefd < 0 ||
	    epoll_ctl(nic->epfd, EPOLL_CTL_ADD, nic->wakefd, &ev) != 0) {
		snprintf(err, errlen, "tcp fabric: %s", strerror(errno));
		free(nic);
		return -errno;
	}
	f->bdata = nic;
	return 0;
}

static int tcp_adopt(struct fab *f, int fd, uint16_t from, uint16_t worker)
{
	struct tcp_nic *nic = f->bdata;
	/* The NIC thread starts with the first connection: by then the own
	 * region is attached (the control plane starts after fab_attach). */
	pthread_mutex_lock(&nic->adopt_lock);
	if (!nic->running) {
		if (pthread_create(&nic->thread, NULL, nic_main, nic) != 0) {
			pthread_mutex_unlock(&nic->adopt_lock);
			return -EAGAIN;
		}
		nic->running = true;
	}
	ioctl_nonblock(fd, 1);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* The fd, its node and worker in one ring entry. */
	RING_PUBLISH(&nic->ring);
	bool ok = ck_ring_enqueue_spsc(&nic->ring, nic->ringbuf,
				       (void *)(intptr_t)((uint64_t)worker << 48 |
							  (uint64_t)from << 32 | (uint32_t)fd));
	pthread_mutex_unlock(&nic->adopt_lock);
	if (!ok)
		return -EBUSY;
	uint64_t v = 1;
	ssize_t r = write(nic->wakefd, &v, sizeof(v));
	(void)r;
	return 0;
}

static void tcp_close(struct fab *f)
{
	struct tcp_nic *nic = f->bdata;
	if (!nic)
		return;
	if (nic->running) {
		__atomic_store_n(&nic->stop, 1, __ATOMIC_RELEASE);
		uint64_t v = 1;
		ssize_t r = write(nic->wakefd, &v, sizeof(v));
		(void)r;
		pthread_join(nic->thread, NULL);
	}
	if (nic->sync_running) {
		pthread_mutex_lock(&nic->sync_mu);
		nic->sync_stop = true;
		pthread_cond_signal(&nic->sync_cond);
		pthread_mutex_unlock(&nic->sync_mu);
		pthread_join(nic->sync_thread, NULL);
	}
	/* Shut the peers' connections: they see EOF and fail what they
	 * have in flight instead of waiting for a NIC that is gone. */
	while (nic->conns)
		nic_close(nic, nic->conns);
	/* Calls answered after the NIC stopped (the workers are gone by now:
	 * fab_worker_destroy answers what they never ran). */
	nic_calls_answered(nic);
	void *p;
	while (ck_ring_dequeue_spsc(&nic->ring, nic->ringbuf, &p)) /* adopted, never served */
		close((int)(uint32_t)(uintptr_t)p);
	close(nic->epfd);
	close(nic->wakefd);
	pthread_mutex_destroy(&nic->adopt_lock);
	pthread_mutex_destroy(&nic->sync_mu);
	pthread_cond_destroy(&nic->sync_cond);
	pthread_mutex_destroy(&nic->done_mu);
	free(nic);
	f->bdata = NULL;
}

const struct fab_backend fab_tcp_backend = {
	.name = "tcp",
	.open = tcp_open,
	.close = tcp_close,
	.attach_peer = tcp_attach_peer,
	.worker_init = tcp_worker_init,
	.worker_fini = tcp_worker_fini,
	.post = tcp_post,
	.flush = tcp_flush,
	.poll = tcp_poll,
	.worker_fds = tcp_worker_fds,
	.adopt = tcp_adopt,
	.fence = tcp_fence,
	.rpc_in_post = true,
};
