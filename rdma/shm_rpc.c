/*
 * shm_rpc.c: fab_rpc between the nodes of one host (DESIGN.md section 8).
 *
 * Rings. Every node keeps its inbound rings in one file,
 * /dev/shm/rckv-rpc-<key>-<pid>, <key> a hash of its region's path, which
 * its peers know from its HELLO: they map the file of that key whose
 * process lives, next to its region. (The pid keeps names unique, so a
 * file left by a killed process is removed by name without a race with
 * the one its restart makes.) The file holds,
 * for each initiator node and worker (up to SHM_RPC_WORKERS), two
 * single-producer single-consumer byte rings: requests from that worker,
 * replies to it. A message is a struct shm_msg and its bytes, 8-aligned,
 * wrapping at the ring's end; a producer publishes with a release store of
 * its tail, a consumer frees with one of its head.
 *
 * Wake-ups. Every worker owns a datagram socket in Linux's abstract
 * namespace, "rckv-rpc-<key>-<worker>": an eventfd cannot reach another
 * process without passing it, and these need no file and go with their
 * process. A datagram (struct shm_bell) wakes a worker; what it should
 * look at is in shared memory, so a bell the kernel drops (a full queue:
 * net.unix.max_dgram_qlen is 10 here) loses nothing, since the full queue
 * wakes the receiver anyway:
 *  - a request: the initiator publishes the ring's tail, then sets the
 *    pair's bit in the serving worker's `pending` mask in the target's
 *    file; that worker, woken, first drains its socket, then takes its
 *    mask and serves every ring it names;
 *  - a reply: the initiator's worker looks at the reply ring of every
 *    node it has calls in flight to, at each wake;
 *  - a reply that found its ring full waits in the target worker's
 *    backlog and sets the pair's `blocked`; the initiator, after it freed
 *    room there, sets the pair's bit and rings (the backlog is retried at
 *    every poll).
 * A fence wakes the workers through their inbox eventfd (fab_worker_wake).
 *
 * Who serves. Initiator worker w's requests go to the target's worker
 * w % (its workers, published in the file's header), which copies them out
 * of the ring and runs them at its poll (fab_worker_poll). The target's
 * side of a pair may change threads (a worker count that changes while
 * calls run), so it takes the ring's lock word; only the owner's threads
 * touch it. A reply that finds its ring full waits in the worker's
 * backlog until there is room.
 *
 * Failures. The initiator holds a pidfd of the target's process (its pid
 * is in the file's header) in its worker's epoll set, and fails every call
 * in flight there (-EHOSTDOWN) when it becomes readable: the target died.
 * A fenced target (fab_fence) gets the same at the fence. A restarted
 * target makes a new file, which its HELLO makes the peers map; calls to
 * the old one have failed by then.
 */
#include "rdma/shm_rpc.h"

#include <assert.h>
#include <ck_pr.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define SHM_RPC_MAGIC "RCKVRPC1"
#define SHM_RPC_WORKERS 16
#define SHM_RING_BYTES (128u * 1024) /* a power of two; holds the largest message */

struct shm_ring {
	uint64_t tail; /* producer's: bytes written */
	uint8_t pad0[56];
	uint64_t head; /* consumer's: bytes taken */
	uint8_t pad1[56];
	uint32_t lock; /* the target's side (see the file comment) */
	uint8_t pad2[60];
	char data[SHM_RING_BYTES];
};

struct shm_pair {
	struct shm_ring req, rep;
	uint32_t blocked; /* a reply waits for room in rep (ck_pr) */
	uint8_t pad[60];
};

#define SHM_PAIRS (FAB_MAX_NODES * SHM_RPC_WORKERS)

struct shm_rpc_file {
	char magic[8];
	uint32_t pid;      /* the owner's process */
	uint32_t nworkers; /* its workers serving requests (ck_pr) */
	uint64_t key;
	uint8_t pad[40];
	/* Per serving worker, the pairs (from * SHM_RPC_WORKERS + worker)
	 * with requests or room for a blocked reply (ck_pr OR, exchange). */
	uint64_t pending[SHM_RPC_WORKERS][SHM_PAIRS / 64];
	struct shm_pair pairs[FAB_MAX_NODES][SHM_RPC_WORKERS];
};

struct shm_msg {
	uint32_t total; /* this header and the bytes, 8-aligned */
	int32_t word;   /* request: the handler; reply: the status */
	uint32_t len;   /* bytes after the header */
	uint32_t cap;   /* request: the reply's capacity */
	uint64_t tag;   /* the initiator's, echoed by the reply */
	uint64_t key;   /* request: the initiator's key (its doorbells) */
};

enum { BELL_REQ = 1, BELL_REP = 2 };

struct shm_bell {
	uint64_t key;    /* the sender's */
	uint16_t node;   /* REQ: the initiator; REP: the target */
	uint16_t worker; /* the initiator's worker: the pair */
	uint16_t kind;
	uint16_t pad;
};

/* What two processes share: layouts fixed, words 8-aligned, and the
 * producer's and consumer's words on cache lines of their own. */
static_assert(sizeof(struct shm_msg) == 32, "a message header is 32 bytes");
static_assert(sizeof(struct shm_bell) == 16, "a bell is 16 bytes");
static_assert(offsetof(struct shm_ring, head) == 64 && offsetof(struct shm_ring, lock) == 128 &&
	      offsetof(struct shm_ring, data) == 192, "ring words on lines of their own");
static_assert(offsetof(struct shm_rpc_file, pending) % 64 == 0 &&
	      offsetof(struct shm_rpc_file, pairs) % 64 == 0, "file sections on line starts");

/* One incarnation of a peer's rings. */
struct shm_peer {
	struct shm_rpc_file *file;
	int pidfd;
	uint64_t key;
	struct shm_peer *older; /* earlier incarnations: unmapped at close */
};

struct shm_rpc {
	struct shm_rpc_file *own;
	char path[80];
	uint64_t key;
	struct shm_peer *peers[FAB_MAX_NODES]; /* ck_pr: replaced at a rejoin */
};

struct shm_pending {
	uint64_t tag;
	uint16_t node;
	struct fab_op *op;
	struct fab_part *part;
};

/* A call run here: its request copied out of the ring, its reply after. */
struct shm_call {
	struct fab_rpc_call c;
	struct shm_rpc *s;
	uint64_t tag, key;
	uint16_t worker; /* the initiator's (c.from's) worker */
	int32_t status;
	uint32_t len;
	struct shm_call *next; /* backlog */
};

struct shm_rworker {
	int sock, epfd;
	struct shm_peer *seen[FAB_MAX_NODES]; /* incarnation whose pidfd epfd has */
	struct shm_pending *pend;
	int npend, cap;
	uint64_t tags;
	struct shm_call *backlog;
};

#define EV_SOCK UINT64_MAX

static uint64_t ld64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void st64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

static uint64_t path_key(const char *path)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *path; path++)
		h = (h ^ (uint8_t)*path) * 0x100000001b3ull;
	return h;
}

static socklen_t bell_addr(struct sockaddr_un *a, uint64_t key, int worker)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "rckv-rpc-%016llx-%d",
			 (unsigned long long)key, worker);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* A lost bell (the receiver's queue full: it is stuck) is found again by
 * the next bell of that ring, which drains it whole. */
static void ring_bell(int sock, uint64_t to_key, int to_worker, const struct shm_bell *b)
{
	struct sockaddr_un a;
	socklen_t alen = bell_addr(&a, to_key, to_worker);
	(void)sendto(sock, b, sizeof(*b), MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&a, alen);
}

static void ring_copy_in(struct shm_ring *r, uint64_t at, const void *src, uint32_t n)
{
	uint32_t o = (uint32_t)(at & (SHM_RING_BYTES - 1)), first = SHM_RING_BYTES - o;
	if (first > n)
		first = n;
	memcpy(r->data + o, src, first);
	memcpy(r->data, (const char *)src + first, n - first);
}

static void ring_copy_out(const struct shm_ring *r, uint64_t at, void *dst, uint32_t n)
{
	if (n == 0)
		return; /* dst may be NULL (a reply of no bytes, to no buffer) */
	uint32_t o = (uint32_t)(at & (SHM_RING_BYTES - 1)), first = SHM_RING_BYTES - o;
	if (first > n)
		first = n;
	memcpy(dst, r->data + o, first);
	memcpy((char *)dst + first, r->data, n - first);
}

static uint32_t msg_total(uint32_t len) { return (uint32_t)((sizeof(struct shm_msg) + len + 7) & ~7u); }

/* Room for `total` more bytes? (the producer's view) */
static bool ring_room(const struct shm_ring *r, uint64_t tail, uint32_t total)
{
	return SHM_RING_BYTES - (tail - ld64((uint64_t *)&r->head)) >= total;
}

static void ring_lock(struct shm_ring *r)
{
	while (!ck_pr_cas_32(&r->lock, 0, 1))
		sched_yield();
}

static void ring_unlock(struct shm_ring *r) { ck_pr_store_32(&r->lock, 0); }

/* A message at `at` of a ring whose producer published `tail`: whole and
 * sane (a peer's memory is not trusted), or false. */
static bool msg_at(const struct shm_ring *r, uint64_t at, uint64_t tail, struct shm_msg *m)
{
	if (tail - at < sizeof(*m))
		return false;
	ring_copy_out(r, at, m, sizeof(*m));
	return m->total >= sizeof(*m) && !(m->total & 7) && m->total <= tail - at &&
	       m->len <= FAB_RPC_MAX && m->cap <= FAB_RPC_MAX && msg_total(m->len) == m->total;
}

/* ---- the node's own file, and its peers' ---- */

/* Files left by processes that died without fab_close (kill -9): their
 * header names the owner; those whose owner is gone go. */
static void sweep_dead(void)
{
	DIR *d = opendir("/dev/shm");
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "rckv-rpc-", 9) != 0)
			continue;
		int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		struct { char magic[8]; uint32_t pid; } h;
		bool dead = pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
			    memcmp(h.magic, SHM_RPC_MAGIC, 8) == 0 && h.pid > 0 &&
			    kill((pid_t)h.pid, 0) == -1 && errno == ESRCH;
		close(fd);
		if (dead)
			(void)unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
}

/* The rings' file of key `key` whose process lives (opened read-write),
 * or -1. */
static int open_live(uint64_t key)
{
	char prefix[48];
	int plen = snprintf(prefix, sizeof(prefix), "rckv-rpc-%016llx-", (unsigned long long)key);
	DIR *d = opendir("/dev/shm");
	if (!d)
		return -1;
	int found = -1;
	struct dirent *de;
	while (found < 0 && (de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, prefix, (size_t)plen) != 0)
			continue;
		int fd = openat(dirfd(d), de->d_name, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		struct { char magic[8]; uint32_t pid; } h;
		if (pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
		    memcmp(h.magic, SHM_RPC_MAGIC, 8) == 0 && h.pid > 0 && kill((pid_t)h.pid, 0) == 0)
			found = fd;
		else
			close(fd);
	}
	closedir(d);
	return found;
}

int shm_rpc_attach_self(struct fab *f, char *err, size_t errlen)
{
	if (!f->cfg.region_path || !f->cfg.region_path[0])
		return 0;
	struct shm_rpc *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	sweep_dead();
	s->key = path_key(f->cfg.region_path);
	snprintf(s->path, sizeof(s->path), "/dev/shm/rckv-rpc-%016llx-%d", (unsigned long long)s->key,
		 (int)getpid());
	(void)unlink(s->path); /* a dead process's of the same pid */
	int fd = open(s->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	void *p = MAP_FAILED;
	if (fd >= 0 && ftruncate(fd, sizeof(struct shm_rpc_file)) == 0)
		p = mmap(NULL, sizeof(struct shm_rpc_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int e = errno;
	if (fd >= 0)
		close(fd);
	if (p == MAP_FAILED) {
		snprintf(err, errlen, "shm fabric: RPC rings %s: %s", s->path, strerror(e));
		(void)unlink(s->path);
		free(s);
		return -e;
	}
	s->own = p;
	s->own->pid = (uint32_t)getpid();
	s->own->key = s->key;
	memcpy(s->own->magic, SHM_RPC_MAGIC, 8);
	f->bdata = s;
	return 0;
}

void shm_rpc_attach_peer(struct fab *f, const struct fab_peer_info *pi)
{
	struct shm_rpc *s = f->bdata;
	if (!s || pi->node >= FAB_MAX_NODES)
		return;
	uint64_t key = path_key(pi->region_path);
	int fd = open_live(key);
	if (fd < 0)
		return; /* takes no RPCs */
	void *p = mmap(NULL, sizeof(struct shm_rpc_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return;
	struct shm_peer *cur = s->peers[pi->node];
	if (cur && cur->file->pid == ((struct shm_rpc_file *)p)->pid) {
		munmap(p, sizeof(struct shm_rpc_file)); /* the incarnation we have */
		return;
	}
	struct shm_peer *ps = calloc(1, sizeof(*ps));
	if (!ps) {
		munmap(p, sizeof(struct shm_rpc_file));
		return;
	}
	ps->file = p;
	ps->key = key;
	ps->pidfd = -1;
	if (memcmp(ps->file->magic, SHM_RPC_MAGIC, 8) == 0)
		ps->pidfd = (int)syscall(SYS_pidfd_open, (pid_t)ps->file->pid, 0);
	ps->older = s->peers[pi->node];
	ck_pr_store_ptr(&s->peers[pi->node], ps);
}

void shm_rpc_close(struct fab *f)
{
	struct shm_rpc *s = f->bdata;
	if (!s)
		return;
	for (int i = 0; i < FAB_MAX_NODES; i++)
		for (struct shm_peer *ps = s->peers[i], *o; ps; ps = o) {
			o = ps->older;
			if (ps->pidfd >= 0)
				close(ps->pidfd);
			munmap(ps->file, sizeof(struct shm_rpc_file));
			free(ps);
		}
	munmap(s->own, sizeof(struct shm_rpc_file));
	(void)unlink(s->path);
	free(s);
	f->bdata = NULL;
	sweep_dead(); /* a peer killed before us (a test's) leaves nothing either */
}

/* ---- a worker's side ---- */

int shm_rpc_worker_init(struct fab_worker *fw, char *err, size_t errlen)
{
	struct shm_rpc *s = fw->f->bdata;
	if (!s)
		return 0;
	struct shm_rworker *rw = calloc(1, sizeof(*rw));
	if (!rw)
		return -ENOMEM;
	rw->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	rw->epfd = epoll_create1(EPOLL_CLOEXEC);
	struct sockaddr_un a;
	socklen_t alen = bell_addr(&a, s->key, fw->id);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = EV_SOCK };
	if (rw->sock < 0 || rw->epfd < 0 || bind(rw->sock, (struct sockaddr *)&a, alen) != 0 ||
	    epoll_ctl(rw->epfd, EPOLL_CTL_ADD, rw->sock, &ev) != 0) {
		snprintf(err, errlen, "shm fabric: worker %d's RPC doorbell: %s", fw->id,
			 strerror(errno));
		if (rw->sock >= 0)
			close(rw->sock);
		if (rw->epfd >= 0)
			close(rw->epfd);
		free(rw);
		return -EADDRINUSE;
	}
	/* Tags of this incarnation only: a reply a dead one's call left in
	 * the ring (the target's file outlives us) matches none of ours. */
	if (getrandom(&rw->tags, sizeof(rw->tags), GRND_NONBLOCK) != (ssize_t)sizeof(rw->tags))
		rw->tags = (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)rw;
	fw->bdata = rw;
	if (fw->id >= 0 && fw->id < SHM_RPC_WORKERS)
		ck_pr_inc_32(&s->own->nworkers);
	return 0;
}

/* Complete part (once) with err, and forget every call of it. */
static void part_fail(struct shm_rworker *rw, struct fab_part *part, int err)
{
	int k = 0;
	for (int i = 0; i < rw->npend; i++)
		if (rw->pend[i].part != part)
			rw->pend[k++] = rw->pend[i];
	rw->npend = k;
	fab_part_done(part, err);
}

/* Every call in flight to node (or to any node, for FAB_MAX_NODES) fails. */
static int fail_node(struct shm_rworker *rw, unsigned node, int err)
{
	int done = 0;
	for (int i = 0; i < rw->npend;) {
		if (node < FAB_MAX_NODES && rw->pend[i].node != node) {
			i++;
			continue;
		}
		part_fail(rw, rw->pend[i].part, err); /* i now holds a later call */
		done++;
	}
	return done;
}

void shm_rpc_worker_fini(struct fab_worker *fw)
{
	struct shm_rworker *rw = fw->bdata;
	struct shm_rpc *s = fw->f->bdata;
	if (!rw)
		return;
	(void)fail_node(rw, FAB_MAX_NODES, -ESHUTDOWN);
	for (struct shm_call *c = rw->backlog, *n; c; c = n) {
		n = c->next;
		free(c);
	}
	if (fw->id >= 0 && fw->id < SHM_RPC_WORKERS)
		ck_pr_dec_32(&s->own->nworkers);
	close(rw->sock);
	close(rw->epfd);
	free(rw->pend);
	free(rw);
	fw->bdata = NULL;
}

int shm_rpc_worker_fds(struct fab_worker *fw, int *fds, int max)
{
	struct shm_rworker *rw = fw->bdata;
	if (!rw || max < 1)
		return 0;
	fds[0] = rw->epfd;
	return 1;
}

static bool peer_dead(const struct shm_peer *ps)
{
	struct pollfd p = { .fd = ps->pidfd, .events = POLLIN };
	return ps->pidfd < 0 || poll(&p, 1, 0) != 0;
}

/* The worker watches the current incarnation of node's process; calls to
 * an earlier one are lost with it. */
static int watch(struct shm_rworker *rw, uint16_t node, struct shm_peer *ps)
{
	if (rw->seen[node] == ps)
		return 0;
	int done = fail_node(rw, node, -EHOSTDOWN);
	if (rw->seen[node] && rw->seen[node]->pidfd >= 0)
		epoll_ctl(rw->epfd, EPOLL_CTL_DEL, rw->seen[node]->pidfd, NULL);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = node };
	if (ps->pidfd >= 0)
		epoll_ctl(rw->epfd, EPOLL_CTL_ADD, ps->pidfd, &ev);
	rw->seen[node] = ps;
	return done;
}

/* Tell the target's serving worker that pair (from, worker) has news:
 * its bit in the worker's mask, then a bell (file comment). */
static void ring_pair(struct shm_rworker *rw, const struct shm_rpc *s, struct shm_peer *ps,
		      uint16_t from, uint16_t worker, uint32_t nw)
{
	const unsigned tw = (unsigned)worker % nw, bit = (unsigned)from * SHM_RPC_WORKERS + worker;
	ck_pr_or_64(&ps->file->pending[tw][bit / 64], 1ull << (bit % 64));
	struct shm_bell b = { .key = s->key, .node = from, .worker = worker, .kind = BELL_REQ };
	ring_bell(rw->sock, ps->key, (int)tw, &b);
}

int shm_rpc_post(struct fab_worker *fw, struct fab_part *part)
{
	struct shm_rpc *s = fw->f->bdata;
	struct shm_rworker *rw = fw->bdata;
	const uint16_t node = part->node, self = fw->f->cfg.self;
	struct shm_peer *ps = s ? ck_pr_load_ptr(&s->peers[node]) : NULL;
	if (!rw || !ps || fw->id < 0 || fw->id >= SHM_RPC_WORKERS)
		return -EOPNOTSUPP;
	(void)watch(rw, node, ps);
	if (peer_dead(ps))
		return -EHOSTDOWN;
	uint32_t nw = ck_pr_load_32(&ps->file->nworkers);
	if (nw == 0) { /* no worker to run them, as on tcp */
		for (int i = 0; i < part->n; i++)
			part->ops[i]->rep->status = -EAGAIN;
		fab_part_done(part, 0);
		return 0;
	}
	struct shm_ring *r = &ps->file->pairs[self][fw->id].req;
	uint64_t tail = r->tail;
	uint64_t need = 0;
	for (int i = 0; i < part->n; i++)
		need += msg_total(part->ops[i]->len);
	if (need > SHM_RING_BYTES || !ring_room(r, tail, (uint32_t)need))
		return -ENOBUFS;
	if (rw->npend + part->n > rw->cap) {
		int cap = rw->cap ? rw->cap * 2 : 64;
		while (cap < rw->npend + part->n)
			cap *= 2;
		struct shm_pending *np = realloc(rw->pend, sizeof(*np) * (size_t)cap);
		if (!np)
			return -ENOMEM;
		rw->pend = np;
		rw->cap = cap;
	}
	part->resp_len = (uint32_t)part->n; /* calls left */
	for (int i = 0; i < part->n; i++) {
		struct fab_op *op = part->ops[i];
		struct shm_msg m = { .total = msg_total(op->len), .word = (int32_t)op->off,
				     .len = op->len, .cap = op->rep->cap, .tag = ++rw->tags,
				     .key = s->key };
		ring_copy_in(r, tail, &m, sizeof(m));
		if (op->len)
			ring_copy_in(r, tail + sizeof(m), op->buf, op->len);
		tail += m.total;
		rw->pend[rw->npend++] = (struct shm_pending){ .tag = m.tag, .node = node, .op = op,
							       .part = part };
	}
	st64(&r->tail, tail);
	ring_pair(rw, s, ps, self, (uint16_t)fw->id, nw);
	fw->doorbells++;
	return 0;
}

/* ---- serving ---- */

/* Write c's reply to its ring, if there is room; false if not. */
static bool reply_put(struct shm_rpc *s, struct shm_call *c)
{
	struct shm_ring *r = &s->own->pairs[c->c.from][c->worker].rep;
	struct shm_msg m = { .total = msg_total(c->len), .word = c->status, .len = c->len,
			     .tag = c->tag };
	ring_lock(r);
	uint64_t tail = r->tail;
	bool room = ring_room(r, tail, m.total);
	if (room) {
		ring_copy_in(r, tail, &m, sizeof(m));
		if (c->len)
			ring_copy_in(r, tail + sizeof(m), c->c.resp, c->len);
		st64(&r->tail, tail + m.total);
	}
	ring_unlock(r);
	return room;
}

static void reply_bell(struct shm_rworker *rw, struct shm_rpc *s, const struct shm_call *c)
{
	struct shm_bell b = { .key = s->key, .node = c->c.to, .worker = c->worker,
			      .kind = BELL_REP };
	ring_bell(rw->sock, c->key, c->worker, &b);
}

/* fab_rpc_run's end, on the worker that ran it. */
static void call_done(struct fab_rpc_call *fc, int32_t status, uint32_t len)
{
	struct shm_call *c = (struct shm_call *)fc;
	struct shm_rworker *rw = fc->fw->bdata;
	c->status = status;
	c->len = status >= 0 ? len : 0;
	if (!reply_put(c->s, c)) {
		/* Retried at our every poll; the initiator, once it made room,
		 * wakes us (the pair's `blocked`). */
		ck_pr_store_32(&c->s->own->pairs[c->c.from][c->worker].blocked, 1);
		c->next = rw->backlog;
		rw->backlog = c;
		return;
	}
	reply_bell(rw, c->s, c);
	free(c);
}

/* Requests of initiator worker `worker` of node `from`: copied out, run at
 * this poll (the inbox). */
static void serve(struct fab_worker *fw, uint16_t from, uint16_t worker)
{
	struct shm_rpc *s = fw->f->bdata;
	if (from >= FAB_MAX_NODES || worker >= SHM_RPC_WORKERS)
		return;
	struct shm_ring *r = &s->own->pairs[from][worker].req;
	ring_lock(r);
	uint64_t head = r->head, tail = ld64(&r->tail);
	struct shm_msg m;
	while (head < tail && msg_at(r, head, tail, &m)) {
		struct shm_call *c = malloc(sizeof(*c) + m.cap + m.len);
		if (!c)
			break; /* left in the ring: the next bell serves it */
		char *resp = (char *)(c + 1), *req = resp + m.cap;
		ring_copy_out(r, head + sizeof(m), req, m.len);
		*c = (struct shm_call){ .s = s, .tag = m.tag, .key = m.key, .worker = worker };
		c->c = (struct fab_rpc_call){ .fw = fw, .from = from, .to = fw->f->cfg.self,
					      .handler = (uint16_t)m.word, .len = m.len,
					      .cap = m.cap, .req = req, .resp = resp,
					      .done = call_done };
		fab_worker_inbox_push(fw, &c->c);
		head += m.total;
	}
	if (head < tail && !msg_at(r, head, tail, &m))
		head = tail; /* a torn or foreign message: the rest is lost */
	st64(&r->head, head);
	ring_unlock(r);
}

/* Replies from node `node` to this worker. */
static int take_replies(struct fab_worker *fw, uint16_t node)
{
	struct shm_rpc *s = fw->f->bdata;
	struct shm_rworker *rw = fw->bdata;
	struct shm_peer *ps = node < FAB_MAX_NODES ? rw->seen[node] : NULL;
	if (!ps || fw->id >= SHM_RPC_WORKERS)
		return 0;
	struct shm_ring *r = &ps->file->pairs[fw->f->cfg.self][fw->id].rep;
	uint64_t head = r->head, tail = ld64(&r->tail);
	struct shm_msg m;
	int done = 0;
	while (head < tail && msg_at(r, head, tail, &m)) {
		int i;
		for (i = 0; i < rw->npend && rw->pend[i].tag != m.tag; i++)
			;
		if (i < rw->npend && rw->pend[i].node == node) {
			struct shm_pending pd = rw->pend[i];
			rw->pend[i] = rw->pend[--rw->npend];
			struct fab_rpc_reply *rep = pd.op->rep;
			if (m.len > rep->cap || (m.word < 0 && m.len)) {
				rep->status = -EPROTO;
				rep->len = 0;
			} else {
				ring_copy_out(r, head + sizeof(m), rep->buf, m.len);
				rep->status = m.word;
				rep->len = m.len;
			}
			if (--pd.part->resp_len == 0) {
				fab_part_done(pd.part, 0);
				done++;
			}
		}
		head += m.total;
	}
	if (head < tail && !msg_at(r, head, tail, &m))
		head = tail;
	st64(&r->head, head);
	struct shm_pair *pr = &ps->file->pairs[fw->f->cfg.self][fw->id];
	uint32_t nw = ck_pr_load_32(&ps->file->nworkers);
	if (ck_pr_load_32(&pr->blocked) && nw) {
		ck_pr_store_32(&pr->blocked, 0);
		ring_pair(rw, s, ps, fw->f->cfg.self, (uint16_t)fw->id, nw);
	}
	return done;
}

int shm_rpc_poll(struct fab_worker *fw)
{
	struct shm_rworker *rw = fw->bdata;
	struct shm_rpc *s = fw->f->bdata;
	if (!rw)
		return 0;
	int done = 0;
	for (struct shm_call **pp = &rw->backlog; *pp;) {
		struct shm_call *c = *pp;
		if (!reply_put(s, c)) {
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		reply_bell(rw, s, c);
		free(c);
	}
	struct epoll_event evs[16];
	int k = epoll_wait(rw->epfd, evs, 16, 0);
	for (int i = 0; i < k; i++) {
		if (evs[i].data.u64 == EV_SOCK)
			continue; /* drained below */
		unsigned node = (unsigned)evs[i].data.u64; /* a peer's process ended */
		done += fail_node(rw, node, -EHOSTDOWN);
		if (rw->seen[node] && rw->seen[node]->pidfd >= 0)
			epoll_ctl(rw->epfd, EPOLL_CTL_DEL, rw->seen[node]->pidfd, NULL);
	}
	/* The bells only woke us: first drain them, then look at what they
	 * may have been for (a bell dropped before, or after, is covered). */
	struct shm_bell b;
	while (recv(rw->sock, &b, sizeof(b), MSG_DONTWAIT) == (ssize_t)sizeof(b))
		;
	if (fw->id >= 0 && fw->id < SHM_RPC_WORKERS) {
		for (unsigned wd = 0; wd < SHM_PAIRS / 64; wd++) {
			uint64_t *pw = &s->own->pending[fw->id][wd];
			if (!ck_pr_load_64(pw))
				continue;
			uint64_t bits = ck_pr_fas_64(pw, 0);
			while (bits) {
				unsigned bit = wd * 64 + (unsigned)__builtin_ctzll(bits);
				bits &= bits - 1;
				serve(fw, (uint16_t)(bit / SHM_RPC_WORKERS),
				      (uint16_t)(bit % SHM_RPC_WORKERS));
			}
		}
	}
	/* Replies, from every node we wait for; and calls to nodes fenced
	 * meanwhile (fab_fence rang our inbox) fail. */
	uint64_t waiting = 0;
	for (int i = 0; i < rw->npend; i++)
		waiting |= 1ull << rw->pend[i].node;
	while (waiting) {
		unsigned nd = (unsigned)__builtin_ctzll(waiting);
		waiting &= waiting - 1;
		if (fab_fenced(fw->f, (uint16_t)nd))
			done += fail_node(rw, nd, -EHOSTDOWN);
		else
			done += take_replies(fw, (uint16_t)nd);
	}
	return done;
}

void shm_rpc_fence(struct fab *f, uint16_t node)
{
	(void)node; /* each worker fails what it waits for there (shm_rpc_poll) */
	pthread_mutex_lock(&f->rpc_mu);
	for (int w = 0; w < FAB_MAX_NODES; w++)
		if (f->workers[w])
			fab_worker_wake(f->workers[w]);
	pthread_mutex_unlock(&f->rpc_mu);
}

/* A node said HELLO again (a restart, or a rejoin): map its rings anew,
 * those of its live process. */
void shm_rpc_peer_back(struct fab *f, uint16_t node)
{
	if (node < FAB_MAX_NODES && node != f->cfg.self && f->peers[node].attached)
		shm_rpc_attach_peer(f, &f->peers[node].info);
}
