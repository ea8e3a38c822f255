/*
 * cluster.c: membership and control plane (see cluster.h for the message
 * list). Control traffic is rare (startup, protocol switches, FLUSHALL,
 * KEYS/SCAN/DBSIZE), so it is simple: blocking threads on the serving side,
 * one short-lived connection per operation on the calling side, and a
 * calling coroutine yields while it waits for replies.
 *
 * Cluster-wide quiesce (protocol switch, FLUSHALL), driven by the node
 * that received the command:
 *   0. take the cluster's switch lock: a CAS on a word of the lowest node's
 *      region header, through the fabric (one switch at a time anywhere);
 *   1. quiesce itself, then send QUIESCE to every peer and wait for all
 *      (each peer's control thread quiesces its node);
 *   2. SWITCH (or FLUSH) every node, itself included;
 *   3. RESUME every node; release the lock.
 * A peer whose initiator disappears mid-way (connection closed) resumes by
 * itself, so a dead initiator never leaves a node frozen.
 *
 * Invariant (1): between phase 1 and phase 3 no transaction runs anywhere,
 * because transactions reach remote items only through their own node's
 * executor, and every executor is quiesced.
 */
#include "server/cluster.h"

#include <arpa/inet.h>
#include <ck_pr.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cc/cc.h"
#include "cc/durable.h"
#include "cc/exec.h"
#include "cc/sched.h"
#include "cc/switch.h"
#include "cc/txn.h"
#include "placement/placement.h"
#include "rdma/listen.h"
#include "rdma/tcp_wire.h"
#include "server/ctl_wire.h"
#include "server/log.h"
#include "server/membership.h"
#include "server/node.h"
#include "server/pubsub.h"
#include "server/recovery.h"
#include "server/save.h"
#include "server/sigbus.h"
#include "server/slots.h"
#include "server/strutil.h"
#include "server/worker.h"

struct peer {
	int id;
	char client[128];
	char fabric[128];
	struct ctl_hello hello; /* as received at join */
};

struct cluster {
	struct node *n;
	uint64_t id;
	int self_id;
	struct fab_listener *listener; /* the fabric address's connections */
	pthread_t settler;
	bool settling;
	int stop;
	int npeers;
	struct peer peers[SRV_MAX_CLUSTER_NODES];
	pthread_mutex_t attach_mu;     /* fab_attach_peer, peers[].hello */
};

/* The switch lock word: the first reserved word of the region header. */
#define SWITCH_LOCK_OFF offsetof(struct st_header, reserved)

/* ---- helpers ---- */

static void attach_late(struct node *n, const struct ctl_hello *h);

/* A peer the configuration took out (server/membership.c fences it): the
 * control plane's cluster-wide operations leave it alone too. */
static bool peer_out(const struct node *n, int id)
{
	return fab_fenced(n->cc.fab, (uint16_t)id);
}

/* The node whose region holds the switch lock word: the lowest one in the
 * configuration. */
static int lock_node_of(const struct node *n)
{
	const struct cluster *cl = n->cluster;
	int best = n->cfg.node_id;
	for (int i = 0; i < cl->npeers; i++)
		if (cl->peers[i].id < best && !peer_out(n, cl->peers[i].id))
			best = cl->peers[i].id;
	return best;
}

static uint64_t fnv1a(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

uint64_t cluster_id_of(const struct node *n)
{
	const struct srv_config *c = &n->cfg;
	if (c->ncluster_nodes == 0)
		return 0;
	/* Order-independent: nodes in id order. */
	uint64_t h = 0xcbf29ce484222325ull;
	for (int id = 1; id < FAB_MAX_NODES; id++)
		for (int i = 0; i < c->ncluster_nodes; i++)
			if (c->cluster_nodes[i].id == id) {
				char line[300];
				snprintf(line, sizeof(line), "%d %s %s;", id, c->cluster_nodes[i].client,
					 c->cluster_nodes[i].fabric);
				h = fnv1a(h, line);
			}
	/* Every node must agree on the replica sets, and a region holds the
	 * copies of one layout (changing `replicas` needs a copy of every
	 * key to each new replica, which nothing does yet). */
	if (c->replicas > 1) {
		char line[32];
		snprintf(line, sizeof(line), "replicas %d;", c->replicas);
		h = fnv1a(h, line);
	}
	return h ? h : 1;
}

static int split_host_port(const char *addr, char *host, size_t cap, int *port)
{
	const char *colon = strrchr(addr, ':');
	if (!colon || (size_t)(colon - addr) >= cap)
		return -1;
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	long long p;
	if (srv_str2ll(colon + 1, strlen(colon + 1), &p) != 0 || p < 1 || p > 65535)
		return -1;
	*port = (int)p;
	return 0;
}

static int write_all(int fd, const void *p, size_t len)
{
	const char *q = p;
	while (len) {
		ssize_t k = send(fd, q, len, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		q += k;
		len -= (size_t)k;
	}
	return 0;
}

static int read_all(int fd, void *p, size_t len)
{
	char *q = p;
	while (len) {
		ssize_t k = recv(fd, q, len, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		q += k;
		len -= (size_t)k;
	}
	return 0;
}

/* ---- calling side: a connection for one operation ---- */

struct ctl_conn {
	int fd;
	int peer;
};

/* Wait until fd is ready for `events`; a coroutine yields, a thread polls. */
static int wait_fd(struct worker *w, int fd, short events, uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = events };
		int k = poll(&pfd, 1, w ? 0 : 50);
		if (k > 0)
			return 0;
		if (k < 0 && errno != EINTR)
			return -errno;
		if (sched_now_ns() > deadline_ns)
			return -ETIMEDOUT;
		if (w)
			sched_sleep(w->sched, 200000);
	}
}

static int ctl_open(struct node *n, int peer, struct ctl_conn *cc, char *err, size_t errlen)
{
	struct cluster *cl = n->cluster;
	const char *addr = NULL;
	for (int i = 0; i < cl->npeers; i++)
		if (cl->peers[i].id == peer)
			addr = cl->peers[i].fabric;
	if (!addr) {
		snprintf(err, errlen, "node %d is not a peer", peer);
		return -EINVAL;
	}
	int fd = fab_tcp_connect(addr, 2000, err, errlen);
	if (fd < 0)
		return fd;
	struct tcp_hello h;
	tcp_hello_encode(&h, TCP_HELLO_CTL, (uint16_t)n->cfg.node_id, 0);
	if (write_all(fd, &h, sizeof(h)) != 0) {
		snprintf(err, errlen, "control connection to node %d: %s", peer, strerror(errno));
		close(fd);
		return -EIO;
	}
	ioctl_nonblock(fd, 1);
	cc->fd = fd;
	cc->peer = peer;
	return 0;
}

static void ctl_close(struct ctl_conn *cc)
{
	if (cc->fd >= 0)
		close(cc->fd);
	cc->fd = -1;
}

/* Non-blocking full send/recv with yields (w) or polls (no w). */
static int io_all(struct worker *w, int fd, void *p, size_t len, bool out, uint64_t deadline)
{
	char *q = p;
	while (len) {
		ssize_t k = out ? send(fd, q, len, MSG_NOSIGNAL) : recv(fd, q, len, 0);
		if (k > 0) {
			q += k;
			len -= (size_t)k;
			continue;
		}
		if (k == 0 && !out)
			return -ECONNRESET;
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		int rc = wait_fd(w, fd, out ? POLLOUT : POLLIN, deadline);
		if (rc)
			return rc;
	}
	return 0;
}

static int ctl_send(struct worker *w, struct ctl_conn *cc, uint32_t type, const void *req,
		    size_t len, uint64_t deadline)
{
	struct ctl_req_hdr h = { .type = type, .len = (uint32_t)len };
	int rc = io_all(w, cc->fd, &h, sizeof(h), true, deadline);
	if (rc == 0 && len)
		rc = io_all(w, cc->fd, (void *)req, len, true, deadline);
	return rc;
}

/* Receive a response; *resp is malloc'ed (caller frees). Returns the
 * peer's status (0 or -errno), or a transport error. */
static int ctl_recv(struct worker *w, struct ctl_conn *cc, void **resp, size_t *resp_len,
		    uint64_t deadline)
{
	struct ctl_resp_hdr h;
	*resp = NULL;
	*resp_len = 0;
	int rc = io_all(w, cc->fd, &h, sizeof(h), false, deadline);
	if (rc)
		return rc;
	if (h.len > CTL_MAX_PAYLOAD)
		return -EPROTO;
	if (h.len) {
		*resp = malloc(h.len + 1);
		if (!*resp)
			return -ENOMEM;
		rc = io_all(w, cc->fd, *resp, h.len, false, deadline);
		if (rc) {
			free(*resp);
			*resp = NULL;
			return rc;
		}
		((char *)*resp)[h.len] = '\0';
	}
	*resp_len = h.len;
	return h.status;
}

/* One request, one response, on a fresh connection. */
/* One request and its reply, within `wait_ns` of sending. */
static int ctl_call_within(struct node *n, struct worker *w, int peer, uint32_t type,
			   const void *req, size_t len, void **resp, size_t *resp_len, char *err,
			   size_t errlen, uint64_t wait_ns)
{
	struct ctl_conn cc = { .fd = -1 };
	int rc = ctl_open(n, peer, &cc, err, errlen);
	if (rc)
		return rc;
	uint64_t deadline = sched_now_ns() + wait_ns;
	rc = ctl_send(w, &cc, type, req, len, deadline);
	if (rc == 0)
		rc = ctl_recv(w, &cc, resp, resp_len, deadline);
	if (rc && err[0] == '\0')
		snprintf(err, errlen, "node %d: %s", peer, strerror(-rc));
	ctl_close(&cc);
	return rc;
}

static int ctl_call(struct node *n, struct worker *w, int peer, uint32_t type, const void *req,
		    size_t len, void **resp, size_t *resp_len, char *err, size_t errlen)
{
	return ctl_call_within(n, w, peer, type, req, len, resp, resp_len, err, errlen,
			       30ull * 1000000000ull);
}

/* For fab_config.ctl_call: backends' setup exchange (verbs). Threads only. */
static int fab_ctl_bridge(void *ctx, uint16_t node, const void *req, size_t len, void *resp,
			  size_t *resp_len)
{
	struct node *n = ctx;
	void *r = NULL;
	size_t rl = 0;
	char err[256] = "";
	int rc = ctl_call(n, NULL, node, CTL_FAB, req, len, &r, &rl, err, sizeof(err));
	if (rc == 0) {
		if (rl > *resp_len)
			rc = -EMSGSIZE;
		else {
			memcpy(resp, r, rl);
			*resp_len = rl;
		}
	}
	free(r);
	return rc;
}

/* ---- serving side ---- */

static void fill_hello(struct node *n, struct ctl_hello *h, unsigned to)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, CTL_HELLO_MAGIC, 8);
	h->cluster_id = n->cluster->id;
	h->node = (uint32_t)n->cfg.node_id;
	h->incarnation = st_region_header(n->cc.region)->incarnation;
	h->region_size = n->cc.layout->size;
	h->layout = *n->cc.layout;
	snprintf(h->region_path, sizeof(h->region_path), "%s", st_region_path(n->cc.region));
	snprintf(h->backend, sizeof(h->backend), "%s", fab_backend_name(n->cc.fab));
	const struct cc_protocol *p = ck_pr_load_ptr(&n->cc.proto);
	snprintf(h->proto, sizeof(h->proto), "%s", p->name);
	for (int i = 0; i < n->cfg.ncluster_nodes; i++)
		if (n->cfg.cluster_nodes[i].id == n->cfg.node_id)
			snprintf(h->fabric_addr, sizeof(h->fabric_addr), "%s",
				 n->cfg.cluster_nodes[i].fabric);
	srv_read_decisions(n, h->decided);
	srv_pending_for(n, to, &h->pending);
}

/* A joining peer's HELLO or HELLO reply: settle what its previous
 * incarnation, or its failed commits, left here (server/recovery.c). */
static void settle_from_hello(struct node *n, const struct ctl_hello *h)
{
	srv_settle_restarted_peer(n, h->node, h->incarnation, h->decided);
	srv_settle_pending(n, h->node, h->decided, &h->pending);
}

struct keybuf {
	char *p;
	size_t len, cap;
	const char *pattern;
	size_t plen;
	uint64_t count;
	const struct pl_map *map; /* with replicas: list the keys this node is primary of */
	uint16_t self;
	uint64_t filter;          /* SCAN_F_*: what a client's listing leaves out */
};

/*
 * What a listing for a client leaves out (KEYS, SCAN, DBSIZE, RANDOMKEY):
 * collection parts (server/coll.h), which are no client's keys, and with
 * SCAN's TYPE option the keys of other types. The rejoin copy
 * (cluster_scan_node) filters nothing: it copies parts too.
 *   SCAN_F_PARTS        leave parts out
 *   SCAN_F_TYPE | t<<8  keys of type t only (enum txn_type)
 */
#define SCAN_F_PARTS 1ull
#define SCAN_F_TYPE 2ull

static bool filtered_out(uint64_t filter, const char *key, uint32_t klen,
			 const struct st_item *it)
{
	if ((filter & SCAN_F_PARTS) && pl_part_key(key, klen))
		return true;
	if (filter & SCAN_F_TYPE) {
		uint64_t data = ck_pr_load_64((uint64_t *)&it->data);
		uint8_t t = (uint8_t)((st_data_vflags(data) & ST_V_TYPE_MASK) >> ST_V_TYPE_SHIFT);
		if (t != (uint8_t)(filter >> 8))
			return true;
	}
	return false;
}

/*
 * With `replicas` N a node's region also holds the copies of the keys it
 * backs up: KEYS, SCAN and DBSIZE list a key once, on its primary. The map
 * is read under the table's lock (control threads have no epoch record;
 * these are administrative paths).
 */
static const struct pl_map *listing_begin(struct node *n)
{
	pl_table_lock(&n->cc.place);
	const struct pl_map *m = pl_table_current(&n->cc.place);
	if (m->replicas > 1)
		return m;
	pl_table_unlock(&n->cc.place);
	return NULL;
}

static void listing_end(struct node *n, const struct pl_map *m)
{
	if (m)
		pl_table_unlock(&n->cc.place);
}

static bool listed_here(const struct pl_map *m, uint16_t self, const char *key, uint32_t klen)
{
	return !m || pl_primary(m, key, klen) == self;
}

static int count_listed(void *arg, const char *key, uint32_t klen, const struct st_item *it)
{
	(void)it;
	struct keybuf *kb = arg;
	kb->count += listed_here(kb->map, kb->self, key, klen) && !pl_part_key(key, klen);
	return 0;
}

uint64_t cluster_local_count(struct node *n)
{
	if (!n->cc.region)
		return 0;
	/* A walk, not st_count: parts are no client's keys. */
	const struct pl_map *m = listing_begin(n);
	struct keybuf kb = { .map = m, .self = (uint16_t)n->cfg.node_id };
	uint64_t cursor = 0;
	do
		st_scan(n->cc.region, &cursor, 4096, count_listed, &kb);
	while (cursor);
	listing_end(n, m);
	return kb.count;
}

static int keybuf_add(struct keybuf *kb, const char *key, uint32_t klen)
{
	if (kb->len + 4 + klen > CTL_MAX_PAYLOAD - 16)
		return 1; /* full: the caller reports what fits */
	if (kb->len + 4 + klen > kb->cap) {
		size_t cap = kb->cap ? kb->cap * 2 : 4096;
		while (cap < kb->len + 4 + klen)
			cap *= 2;
		char *p = realloc(kb->p, cap);
		if (!p)
			return 1;
		kb->p = p;
		kb->cap = cap;
	}
	memcpy(kb->p + kb->len, &klen, 4);
	memcpy(kb->p + kb->len + 4, key, klen);
	kb->len += 4 + klen;
	kb->count++;
	return 0;
}

/* Is a live item past its expiry (cc/txn.h txn_meta)? KEYS and SCAN skip
 * it, as Redis's do: every read finds it absent already. */
static bool item_expired(const struct st_item *it)
{
	uint64_t data = ck_pr_load_64((uint64_t *)&it->data);
	if (!(st_data_vflags(data) & ST_V_EXPIRES) || st_data_vlen(data) < 8)
		return false;
	int64_t exp;
	memcpy(&exp, st_item_val(it), sizeof(exp));
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return exp && exp <= (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int scan_collect(void *arg, const char *key, uint32_t klen, const struct st_item *it)
{
	struct keybuf *kb = arg;
	if (item_expired(it) || filtered_out(kb->filter, key, klen, it))
		return 0;
	if (kb->plen && !srv_strmatch(kb->pattern, kb->plen, key, klen, false))
		return 0;
	if (!listed_here(kb->map, kb->self, key, klen))
		return 0;
	return keybuf_add(kb, key, klen);
}

/*
 * A node that restarted cannot still be switching: if it held the cluster's
 * switch lock (this node's header word), release it, or every later
 * CONFIG SET cc would wait for a dead node.
 */
static void release_dead_switch_lock(struct node *n, uint32_t peer)
{
	if (lock_node_of(n) != n->cfg.node_id)
		return;
	uint64_t *word = (uint64_t *)((char *)st_region_header(n->cc.region) + SWITCH_LOCK_OFF);
	uint64_t held = (uint64_t)peer;
	if (ck_pr_cas_64(word, held, 0))
		srv_log(n, LOG_WARNING, "released the cluster switch lock of node %u (it restarted)",
			peer);
}

/* What the listener hands a control thread. */
struct ctl_box {
	int fd;
	struct node *n;
};

/*
 * CTL_SAVE, served with a keepalive. A large region's save may take
 * minutes; the initiator must tell that from a hung node (SIGSTOP, a
 * wedged process), whose kernel still accepts the connection and the
 * request and then says nothing. So while this node saves, a helper
 * thread sends a CTL_PROGRESS frame every SAVE_KEEPALIVE_NS, and the
 * initiator gives up on a peer only after SAVE_SILENCE_NS without any
 * frame (save_all). The helper writes the socket only under `mu` and is
 * joined before the control thread writes the answer, so frames never
 * interleave.
 */
#define SAVE_KEEPALIVE_NS (1000ull * 1000 * 1000)

struct save_keepalive {
	pthread_mutex_t mu;
	pthread_cond_t cv;   /* CLOCK_MONOTONIC */
	bool done;           /* the save ended (under mu) */
	int fd;
};

static void *keepalive_main(void *arg)
{
	struct save_keepalive *ka = arg;
	pthread_setname_np(pthread_self(), "rckv-keepalive"); /* top -H, perf, gdb */
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	pthread_mutex_lock(&ka->mu);
	while (!ka->done) {
		next.tv_sec += (time_t)(SAVE_KEEPALIVE_NS / 1000000000ull);
		while (!ka->done && pthread_cond_timedwait(&ka->cv, &ka->mu, &next) != ETIMEDOUT)
			;
		if (ka->done)
			break;
		struct ctl_resp_hdr h = { .status = CTL_PROGRESS, .len = 0 };
		if (write_all(ka->fd, &h, sizeof(h)) != 0)
			break; /* the initiator went away; the save goes on */
	}
	pthread_mutex_unlock(&ka->mu);
	return NULL;
}

/* This node's save for a peer's SAVE/BGSAVE, with the keepalive above.
 * On a control thread (whose signal mask, all blocked, the helper
 * inherits). 0 or -errno with err. */
static int serve_save(struct node *n, int fd, char *err, size_t errlen)
{
	if (!n->save)
		return -ESHUTDOWN;
	struct save_keepalive ka = { .fd = fd };
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ka.cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&ka.mu, NULL);
	pthread_t th;
	bool helper = pthread_create(&th, NULL, keepalive_main, &ka) == 0;
	if (!helper)
		srv_log(n, LOG_WARNING, "SAVE for a peer without keepalive (no thread): it may "
			"give up on this node if the save takes long");
	int rc = srv_save_local(n, err, errlen);
	if (helper) {
		pthread_mutex_lock(&ka.mu);
		ka.done = true;
		pthread_cond_signal(&ka.cv);
		pthread_mutex_unlock(&ka.mu);
		pthread_join(th, NULL);
	}
	pthread_cond_destroy(&ka.cv);
	pthread_mutex_destroy(&ka.mu);
	return rc;
}

/* Serve one control connection until it closes. */
static void *ctl_conn_main(void *arg)
{
	struct ctl_box *box = arg;
	int fd = box->fd;
	struct node *n = box->n;
	pthread_setname_np(pthread_self(), "rckv-ctl"); /* top -H, perf, gdb */
	free(box);

	bool quiesced = false;
	for (;;) {
		struct ctl_req_hdr h;
		if (read_all(fd, &h, sizeof(h)) != 0)
			break;
		if (h.len > CTL_MAX_PAYLOAD)
			break;
		char *req = malloc(h.len + 1);
		if (!req || read_all(fd, req, h.len) != 0) {
			free(req);
			break;
		}
		req[h.len] = '\0';
		int32_t status = 0;
		void *resp = NULL;
		size_t rlen = 0;

		/* Every body is checked before its handler sees it (ctl_wire.h). */
		switch (ctl_request_check(h.type, req, h.len) ? 0 : h.type) {
		case 0:
			status = -EPROTO;
			break;
		case CTL_HELLO: {
			struct ctl_hello *in = (void *)req, *out = malloc(sizeof(*out));
			if (!out) {
				status = -ENOMEM;
				break;
			}
			resp = out;
			fill_hello(n, out, in->node);
			rlen = sizeof(*out);
			if (in->cluster_id != out->cluster_id) {
				status = -EXDEV; /* caller reports the mismatch */
				break;
			}
			{ /* ctl_request_check: in->node < FAB_MAX_NODES */
				attach_late(n, in);
				settle_from_hello(n, in);
				/* A restarted peer made a new journal ring (its
				 * region we map already: the same file). */
				char aerr[256];
				if (strcmp(out->backend, "shm") == 0 &&
				    in->node != (uint32_t)n->cfg.node_id &&
				    durable_attach_peer(&n->cc, (uint16_t)in->node, in->region_path,
							aerr, sizeof(aerr)) != 0)
					srv_log(n, LOG_WARNING, "node %u: %s", in->node, aerr);
				release_dead_switch_lock(n, in->node);
				if (in->node != (uint32_t)n->cfg.node_id)
					fab_peer_back(n->cc.fab, (uint16_t)in->node);
			}
			break;
		}
		case CTL_SETTLE: /* a live peer's leftovers here (settler_main) */
			{
				const struct ctl_settle *v = (const void *)req;
				if (v->node != (uint64_t)n->cfg.node_id)
					srv_settle_pending(n, (unsigned)v->node, v->decided, &v->pending);
				else
					status = -EINVAL;
			}
			break;
		case CTL_SETTLED: /* the peer settled the slots we reported to it */
			{
				const struct ctl_settled *v = (const void *)req;
				srv_pending_settled(n, (unsigned)v->node, &v->done);
			}
			break;
		case CTL_TAKE_SCAN:
			{
				const struct ctl_take *v = (const void *)req;
				uint64_t *out = malloc(2 * ST_LOG_SLOTS * sizeof(uint64_t));
				if (!out) {
					status = -ENOMEM;
					break;
				}
				srv_takeover_scan(n, (unsigned)v->dead, out, out + ST_LOG_SLOTS);
				resp = out;
				rlen = 2 * ST_LOG_SLOTS * sizeof(uint64_t);
			}
			break;
		case CTL_TAKE_SETTLE:
			{
				const struct ctl_take *v = (const void *)req;
				mb_takeover_local(n, (unsigned)v->dead, v->decided);
			}
			break;
		case CTL_FAB: {
			resp = malloc(64 * 1024);
			rlen = 64 * 1024;
			status = resp ? fab_ctl(n->cc.fab, req, h.len, resp, &rlen) : -ENOMEM;
			if (status)
				rlen = 0;
			break;
		}
		case CTL_QUIESCE:
			if (!quiesced) {
				cc_quiesce_begin(&n->cc, NULL);
				quiesced = true;
			}
			break;
		case CTL_SWITCH: {
			char err[256];
			const struct cc_protocol *p = cc_switch_lookup(&n->cc, req, -1, err, sizeof(err));
			if (!quiesced || !p) {
				status = -EINVAL;
				break;
			}
			cc_switch_apply(&n->cc, p);
			srv_log(n, LOG_NOTICE, "protocol switched to %s (cluster-wide)", p->name);
			break;
		}
		case CTL_FLUSH:
			if (!quiesced) {
				status = -EINVAL;
				break;
			}
			st_flush(n->cc.region);
			ck_pr_inc_64(&n->cc.flush_epoch);
			break;
		case CTL_SAVE: {
			char err[256] = "";
			status = serve_save(n, fd, err, sizeof(err));
			if (status && err[0] && (resp = strdup(err)))
				rlen = strlen(err);
			break;
		}
		case CTL_RESUME:
			if (quiesced) {
				cc_quiesce_end(&n->cc);
				quiesced = false;
			}
			break;
		case CTL_STAGES: {
			uint32_t mask;
			char err[200];
			memcpy(&mask, req, sizeof(mask)); /* 4 bytes: ctl_request_check */
			cc_stages_apply(&n->cc, mask);
			ck_pr_store_32(&n->cfg.cc_stages, mask & CC_STAGES_ALL);
			cc_stages_format(mask, err, sizeof(err));
			srv_log(n, LOG_NOTICE, "cc-stages %s (cluster-wide)", err);
			break;
		}
		case CTL_COUNT: {
			uint64_t *c = malloc(8);
			if (!c) {
				status = -ENOMEM;
				break;
			}
			*c = cluster_local_count(n);
			resp = c;
			rlen = 8;
			break;
		}
		case CTL_KEYS: {
			struct keybuf kb = { .pattern = req, .plen = h.len, .map = listing_begin(n),
					     .self = (uint16_t)n->cfg.node_id,
					     .filter = SCAN_F_PARTS };
			uint64_t cursor = 0;
			do {
				st_scan(n->cc.region, &cursor, 4096, scan_collect, &kb);
			} while (cursor);
			listing_end(n, kb.map);
			resp = kb.p;
			rlen = kb.len;
			break;
		}
		case CTL_SCAN: {
			uint64_t in[3]; /* cursor, count, filter (SCAN_F_*) */
			memcpy(in, req, 24); /* at least 24 bytes: ctl_request_check */
			struct keybuf kb = { .pattern = req + 24, .plen = h.len - 24,
					     .map = listing_begin(n), .self = (uint16_t)n->cfg.node_id,
					     .filter = in[2] };
			uint64_t cursor = in[0];
			st_scan(n->cc.region, &cursor, in[1] ? in[1] : 1, scan_collect, &kb);
			listing_end(n, kb.map);
			char *out = malloc(8 + kb.len);
			if (!out) {
				free(kb.p);
				status = -ENOMEM;
				break;
			}
			memcpy(out, &cursor, 8);
			if (kb.len)
				memcpy(out + 8, kb.p, kb.len);
			rlen = 8 + kb.len;
			free(kb.p);
			resp = out;
			break;
		}
		default:
			status = -ENOTSUP;
		}
		free(req);
		struct ctl_resp_hdr rh = { .status = status, .len = (uint32_t)rlen };
		int wrc = write_all(fd, &rh, sizeof(rh));
		if (wrc == 0 && rlen)
			wrc = write_all(fd, resp, rlen);
		free(resp);
		if (wrc)
			break;
	}
	if (quiesced) { /* the initiator went away mid-switch: never stay frozen */
		srv_log(n, LOG_WARNING, "a cluster-wide quiesce was abandoned; resuming");
		cc_quiesce_end(&n->cc);
	}
	close(fd);
	return NULL;
}

/* The control plane's threads take no signal: the main thread handles
 * them, as for the workers (server/worker.c). */
static void block_signals(void)
{
	srv_block_async_signals(); /* faults stay deliverable (sigbus.h) */
}

/* The fabric listener's callback for a control connection: serve it on a
 * thread of its own. Runs on the listener's thread, whose signal mask
 * (all blocked) the new thread inherits. */
static int ctl_accept(void *arg, int fd, const struct tcp_hello *h)
{
	if (h->type != TCP_HELLO_CTL)
		return -EPROTO;
	struct ctl_box *box = malloc(sizeof(*box));
	if (!box)
		return -ENOMEM;
	box->fd = fd;
	box->n = arg;
	pthread_t th;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	int rc = pthread_create(&th, &at, ctl_conn_main, box);
	pthread_attr_destroy(&at);
	if (rc != 0) {
		free(box);
		return -rc;
	}
	return 0;
}

/*
 * The settler: what this node's transactions left on a peer (log slots in
 * quarantine, locks whose release failed or whose CAS may have won unseen;
 * server/node.h) is settled at the peer's next join, if it restarts. But
 * the peer may not restart: its fabric endpoint broke for a moment, or it
 * had already rejoined when the release failed (a worker reconnects to a
 * restarted peer at most twice a second). So every SETTLE_EVERY_MS, while
 * anything is pending, this thread sends each peer its part; a peer that
 * answers has settled it.
 */
#define SETTLE_EVERY_MS 200
#define SETTLE_WAIT_NS (3ull * 1000 * 1000 * 1000)

static void *settler_main(void *arg)
{
	struct node *n = arg;
	struct cluster *cl = n->cluster;
	pthread_setname_np(pthread_self(), "rckv-settler"); /* top -H, perf, gdb */
	block_signals();
	struct ctl_settle *msg = malloc(sizeof(*msg));
	if (!msg)
		return NULL;
	while (!ck_pr_load_int(&cl->stop)) {
		struct timespec ts = { 0, SETTLE_EVERY_MS * 1000 * 1000 };
		nanosleep(&ts, NULL);
		for (int i = 0; i < cl->npeers && !ck_pr_load_int(&cl->stop); i++) {
			const struct peer *p = &cl->peers[i];
			if (peer_out(n, p->id) || !srv_pending_for(n, (unsigned)p->id, &msg->pending))
				continue;
			msg->node = (uint64_t)n->cfg.node_id;
			srv_read_decisions(n, msg->decided);
			void *r = NULL;
			size_t rl = 0;
			char err[256] = "";
			/* Bounded, so a hung peer holds up neither the other
			 * peers' turns for long nor a shutdown (which joins
			 * this thread). An unanswered settle is sent again. */
			if (ctl_call_within(n, NULL, p->id, CTL_SETTLE, msg, sizeof(*msg), &r, &rl,
					    err, sizeof(err), SETTLE_WAIT_NS) == 0) {
				srv_pending_settled(n, (unsigned)p->id, &msg->pending);
				srv_log(n, LOG_NOTICE, "node %d settled what our failed transactions "
					"left there", p->id);
			}
			free(r);
		}
	}
	free(msg);
	return NULL;
}

/* A socket listening on the fabric address "host:port"; -1 with err. */
static int listen_fabric(const char *addr, char *err, size_t errlen)
{
	char host[128];
	int port;
	if (split_host_port(addr, host, sizeof(host), &port) != 0) {
		snprintf(err, errlen, "bad fabric address '%s'", addr);
		return -1;
	}
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE }, *res;
	char ps[16];
	snprintf(ps, sizeof(ps), "%d", port);
	if (getaddrinfo(host, ps, &hints, &res) != 0) {
		snprintf(err, errlen, "fabric address '%s': cannot resolve", addr);
		return -1;
	}
	int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 128) != 0) {
		snprintf(err, errlen, "Could not listen on fabric address %s: %s", addr,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(res);
		return -1;
	}
	freeaddrinfo(res);
	return fd;
}

static bool stop_requested(void)
{
	sigset_t pend;
	sigpending(&pend);
	return sigismember(&pend, SIGINT) || sigismember(&pend, SIGTERM);
}

/* Make a peer that answered HELLO `h` reachable on the fabric, once. */
static int attach(struct node *n, struct peer *p, const struct ctl_hello *h, char *err,
		  size_t errlen)
{
	struct cluster *cl = n->cluster;
	int rc = 0;
	pthread_mutex_lock(&cl->attach_mu);
	if (!(fab_attached_nodes(n->cc.fab) & (1ull << p->id))) {
		struct fab_peer_info pi = { .node = (uint16_t)p->id, .region_size = h->region_size };
		snprintf(pi.region_path, sizeof(pi.region_path), "%s", h->region_path);
		snprintf(pi.addr, sizeof(pi.addr), "%s", p->fabric);
		rc = fab_attach_peer(n->cc.fab, &pi, err, errlen);
		/* A peer with a write-ahead log: our writes to it go through
		 * its journal ring (storage/jring.c). */
		if (rc == 0 && strcmp(h->backend, "shm") == 0)
			rc = durable_attach_peer(&n->cc, (uint16_t)p->id, pi.region_path, err, errlen);
	}
	pthread_mutex_unlock(&cl->attach_mu);
	return rc;
}

/*
 * A peer that did not answer at start (replicas 2 or more: the node goes
 * on without it) says HELLO when it starts: attach it then.
 */
static void attach_late(struct node *n, const struct ctl_hello *h)
{
	struct cluster *cl = n->cluster;
	for (int i = 0; cl && i < cl->npeers; i++) {
		struct peer *p = &cl->peers[i];
		if (p->id != (int)h->node || (fab_attached_nodes(n->cc.fab) & (1ull << p->id)))
			continue;
		char err[256] = "";
		pthread_mutex_lock(&cl->attach_mu);
		p->hello = *h;
		pthread_mutex_unlock(&cl->attach_mu);
		if (attach(n, p, h, err, sizeof(err)) == 0)
			srv_log(n, LOG_NOTICE, "node %d joined late, at %s", p->id, p->fabric);
		else
			srv_log(n, LOG_WARNING, "node %d joined late, but: %s", p->id, err);
	}
}

/*
 * With replicas, a node starts without a peer that does not answer within
 * this: the configuration's Raft group (server/membership.c) knows
 * whether it is dead, and it joins when it starts (attach_late).
 */
#define JOIN_WAIT_NS (5ull * 1000 * 1000 * 1000)

/* Connect to one peer, retrying until it answers; HELLO; attach. Returns
 * 1 (replicas 2 or more) when the peer did not answer within JOIN_WAIT_NS. */
static int join_peer(struct node *n, struct peer *p, char *err, size_t errlen)
{
	uint64_t start = sched_now_ns(), last_log = 0;
	for (;;) {
		char cerr[256] = "";
		struct ctl_hello mine, *theirs = NULL;
		fill_hello(n, &mine, (unsigned)p->id);
		size_t rl = 0;
		int rc = ctl_call(n, NULL, p->id, CTL_HELLO, &mine, sizeof(mine), (void **)&theirs,
				  &rl, cerr, sizeof(cerr));
		if (rc == -EXDEV || (rc == 0 && (rl != sizeof(*theirs) ||
						  theirs->cluster_id != mine.cluster_id))) {
			snprintf(err, errlen,
				 "node %d at %s belongs to another cluster (its cluster file differs "
				 "from this one)", p->id, p->fabric);
			free(theirs);
			return -1;
		}
		if (rc == 0 && ctl_hello_check(theirs, rl) != 0) {
			snprintf(err, errlen, "node %d at %s answered HELLO with a malformed message",
				 p->id, p->fabric);
			free(theirs);
			return -1;
		}
		if (rc == 0 && rl == sizeof(*theirs)) {
			if (theirs->node != (uint32_t)p->id ||
			    strcmp(theirs->backend, mine.backend) != 0) {
				snprintf(err, errlen, "node %d at %s answers as node %u with fabric '%s' "
					 "(this node: fabric '%s')", p->id, p->fabric, theirs->node,
					 theirs->backend, mine.backend);
				free(theirs);
				return -1;
			}
			pthread_mutex_lock(&n->cluster->attach_mu);
			p->hello = *theirs;
			pthread_mutex_unlock(&n->cluster->attach_mu);
			free(theirs);
			/* They settled what we reported; we settle what they report,
			 * then tell them. */
			srv_pending_settled(n, (unsigned)p->id, &mine.pending);
			settle_from_hello(n, &p->hello);
			struct ctl_settled settled = { .node = (uint64_t)n->cfg.node_id,
						       .done = p->hello.pending };
			bool any = false;
			for (unsigned s = 0; s < ST_LOG_SLOTS; s++)
				any |= settled.done.slots[s] || settled.done.locks[s];
			if (any) {
				void *r = NULL;
				size_t rl2 = 0;
				(void)ctl_call(n, NULL, p->id, CTL_SETTLED, &settled, sizeof(settled), &r,
					       &rl2, cerr, sizeof(cerr));
				free(r);
			}
			if (attach(n, p, &p->hello, err, errlen) != 0)
				return -1;
			srv_log(n, LOG_NOTICE, "joined node %d at %s (protocol %s)", p->id, p->fabric,
				p->hello.proto);
			return 0;
		}
		free(theirs);
		if (stop_requested()) {
			snprintf(err, errlen, "interrupted while waiting for node %d", p->id);
			return -1;
		}
		uint64_t now = sched_now_ns();
		if (n->cfg.replicas > 1 && now - start > JOIN_WAIT_NS) {
			srv_log(n, LOG_WARNING, "node %d at %s does not answer (%s): going on without "
				"it; it joins when it starts", p->id, p->fabric,
				cerr[0] ? cerr : "no answer");
			return 1;
		}
		if (now - last_log > 2000000000ull) {
			srv_log(n, LOG_NOTICE, "waiting for node %d at %s (%llu s): %s", p->id,
				p->fabric, (unsigned long long)((now - start) / 1000000000ull),
				cerr[0] ? cerr : "no answer");
			last_log = now;
		}
		struct timespec ts = { 0, 200 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

/* ---- cluster-wide operations ---- */

static int switch_lock(struct node *n, struct worker *w, bool take, char *err, size_t errlen)
{
	struct fab_batch b;
	cc_batch_init(&b, w->ccw, NULL);
	uint64_t me = (uint64_t)n->cfg.node_id;
	uint64_t deadline = sched_now_ns() + 60ull * 1000000000ull;
	for (;;) {
		uint64_t old = 0;
		int lock_node = lock_node_of(n);
		int rc = fab_cas1(&b, (uint16_t)lock_node, SWITCH_LOCK_OFF, take ? 0 : me,
				  take ? me : 0, &old);
		if (rc) {
			snprintf(err, errlen, "cluster switch lock on node %d: %s", lock_node,
				 strerror(-rc));
			return rc;
		}
		if (old == (take ? 0 : me))
			return 0;
		if (!take) {
			srv_log(n, LOG_WARNING, "cluster switch lock held by node %llu, not us",
				(unsigned long long)old);
			return 0;
		}
		if (sched_now_ns() > deadline) {
			snprintf(err, errlen, "another node (%llu) has held the cluster switch lock "
				 "for a minute", (unsigned long long)old);
			return -EBUSY;
		}
		sched_sleep(w->sched, 2000000);
	}
}

enum quiet_step { STEP_SWITCH, STEP_FLUSH };

static int cluster_quiet_op(struct node *n, struct worker *w, enum quiet_step step,
			    const struct cc_protocol *to, char *err, size_t errlen)
{
	struct cluster *cl = n->cluster;
	struct ctl_conn conns[SRV_MAX_CLUSTER_NODES];
	int nopen = 0, rc;
	uint64_t deadline = sched_now_ns() + 120ull * 1000000000ull;

	rc = switch_lock(n, w, true, err, errlen);
	if (rc)
		return rc;
	for (int i = 0; i < cl->npeers; i++) {
		if (peer_out(n, cl->peers[i].id))
			continue;
		conns[nopen].fd = -1;
		rc = ctl_open(n, cl->peers[i].id, &conns[nopen], err, errlen);
		if (rc)
			goto out_close;
		nopen++;
	}
	/* Phase 1: quiesce here, then everywhere. */
	cc_quiesce_begin(&n->cc, w ? w->ccw : NULL);
	for (int i = 0; i < nopen && rc == 0; i++)
		rc = ctl_send(w, &conns[i], CTL_QUIESCE, NULL, 0, deadline);
	for (int i = 0; i < nopen && rc == 0; i++) {
		void *r;
		size_t rl;
		rc = ctl_recv(w, &conns[i], &r, &rl, deadline);
		free(r);
	}
	/* Phase 2: the quiet step everywhere. */
	if (rc == 0) {
		uint32_t type = step == STEP_SWITCH ? CTL_SWITCH : CTL_FLUSH;
		const char *arg = step == STEP_SWITCH ? cc_protocol_id(to) : "";
		for (int i = 0; i < nopen && rc == 0; i++)
			rc = ctl_send(w, &conns[i], type, arg, strlen(arg), deadline);
		for (int i = 0; i < nopen && rc == 0; i++) {
			void *r;
			size_t rl;
			rc = ctl_recv(w, &conns[i], &r, &rl, deadline);
			free(r);
		}
		if (step == STEP_SWITCH) {
			cc_switch_apply(&n->cc, to);
		} else {
			st_flush(n->cc.region);
			ck_pr_inc_64(&n->cc.flush_epoch);
		}
	}
	if (rc && err[0] == '\0')
		snprintf(err, errlen, "a peer failed during the cluster-wide %s: %s",
			 step == STEP_SWITCH ? "protocol switch" : "flush", strerror(-rc));
	/* Phase 3: resume everywhere (also after a failure). */
	for (int i = 0; i < nopen; i++) {
		if (ctl_send(w, &conns[i], CTL_RESUME, NULL, 0, deadline) == 0) {
			void *r;
			size_t rl;
			(void)ctl_recv(w, &conns[i], &r, &rl, deadline);
			free(r);
		}
	}
	cc_quiesce_end(&n->cc);
out_close:
	for (int i = 0; i < nopen; i++)
		ctl_close(&conns[i]);
	char uerr[128];
	switch_lock(n, w, false, uerr, sizeof(uerr));
	return rc;
}

/* cc's switch reaches the control plane here (cc_node.cops): the worker
 * whose executor is ccw, or none (a control-plane thread). */
static int switch_all(struct cc_node *cn, struct cc_worker *ccw, const struct cc_protocol *to,
		      char *err, size_t errlen)
{
	struct node *n = node_of_cc(cn);
	struct worker *w = NULL;
	for (int i = 0; ccw && i < n->nworkers && !w; i++)
		if (n->workers[i] && n->workers[i]->ccw == ccw)
			w = n->workers[i];
	int rc = cluster_quiet_op(n, w, STEP_SWITCH, to, err, errlen);
	if (rc == 0)
		srv_log(n, LOG_NOTICE, "protocol switched to %s on every node", to->name);
	return rc;
}

static int flush_all(struct node *n, struct worker *w, char *err, size_t errlen)
{
	return cluster_quiet_op(n, w, STEP_FLUSH, NULL, err, errlen);
}

/*
 * How save_all waits for the peers. A live peer, however slow its disk,
 * sends a keepalive every SAVE_KEEPALIVE_NS (serve_save); one silent for
 * SAVE_SILENCE_NS has missed ten of them: its control thread has not run
 * for that long, which a loaded but live node does not do, and a stopped
 * or wedged one does. Between frames the wait looks, every SAVE_SLICE_MS,
 * at what ends it early: the peer taken out of the configuration, this
 * node shutting down, srv_save_stop's cancel.
 */
#define SAVE_SILENCE_NS (10ull * 1000 * 1000 * 1000)
#define SAVE_SLICE_MS 100
/* Once a frame's first bytes are in, the rest (at most an error's text)
 * follows at once from a live peer. */
#define SAVE_FRAME_NS (2ull * 1000 * 1000 * 1000)

struct save_peer {
	struct ctl_conn cc;
	uint64_t heard;   /* sched_now_ns of its last frame (or of the request) */
};

/* The first failure is the save's: keep it, naming its node. */
static void save_fail(int *rc, char *err, size_t errlen, int why, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static void save_fail(int *rc, char *err, size_t errlen, int why, const char *fmt, ...)
{
	if (*rc)
		return;
	*rc = why;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Why to stop waiting for peer `p` now, or NULL to go on waiting. */
static const char *save_give_up(struct node *n, const struct save_peer *p, uint64_t now,
				int *why)
{
	if (ck_pr_load_int(&n->shutdown) || srv_save_cancelled(n)) {
		*why = -ECANCELED;
		return "had not answered when the save was cancelled (the server is shutting down)";
	}
	if (peer_out(n, p->cc.peer)) {
		*why = -ENOTCONN;
		return "was taken out of the configuration during the save";
	}
	if (now - p->heard > SAVE_SILENCE_NS) {
		*why = -ETIMEDOUT;
		return "has not answered for 10 seconds, not even a keepalive (is it hung?)";
	}
	return NULL;
}

/* Read one frame of peer p: a keepalive (1), or its answer (0, with
 * *rc/err updated on a failure). */
static int save_read_frame(struct save_peer *p, int *rc, char *err, size_t errlen)
{
	void *r = NULL;
	size_t rl = 0;
	int prc = ctl_recv(NULL, &p->cc, &r, &rl, sched_now_ns() + SAVE_FRAME_NS);
	if (prc == CTL_PROGRESS) {
		p->heard = sched_now_ns();
		return 1;
	}
	if (prc && r && rl)
		save_fail(rc, err, errlen, prc, "%s", (char *)r);
	else if (prc)
		save_fail(rc, err, errlen, prc, "node %d: %s", p->cc.peer, strerror(-prc));
	free(r);
	return 0;
}

/* Collect the answers of the nc peers asked, in slices (see above). */
static void save_collect(struct node *n, struct save_peer *peers, int nc, int *rc, char *err,
			 size_t errlen)
{
	struct pollfd pfd[SRV_MAX_CLUSTER_NODES];
	int idx[SRV_MAX_CLUSTER_NODES];
	for (;;) {
		int m = 0;
		for (int i = 0; i < nc; i++)
			if (peers[i].cc.fd >= 0) {
				pfd[m] = (struct pollfd){ .fd = peers[i].cc.fd, .events = POLLIN };
				idx[m++] = i;
			}
		if (m == 0)
			return;
		int k = poll(pfd, (nfds_t)m, SAVE_SLICE_MS);
		if (k < 0 && errno != EINTR) {
			k = -errno;
			for (int j = 0; j < m; j++) {
				save_fail(rc, err, errlen, k, "waiting for node %d: %s",
					  peers[idx[j]].cc.peer, strerror(-k));
				ctl_close(&peers[idx[j]].cc);
			}
			return;
		}
		for (int j = 0; j < m && k > 0; j++)
			if (pfd[j].revents && save_read_frame(&peers[idx[j]], rc, err, errlen) == 0)
				ctl_close(&peers[idx[j]].cc);
		uint64_t now = sched_now_ns();
		for (int j = 0; j < m; j++) {
			struct save_peer *p = &peers[idx[j]];
			int why = 0;
			const char *what = p->cc.fd >= 0 ? save_give_up(n, p, now, &why) : NULL;
			if (what) {
				save_fail(rc, err, errlen, why, "node %d %s", p->cc.peer, what);
				srv_log(n, LOG_WARNING, "SAVE: node %d %s", p->cc.peer, what);
				ctl_close(&p->cc);
			}
		}
	}
}

/*
 * SAVE on every node (server/save.c says why every node): each peer is
 * asked first (CTL_SAVE), so that all save at once, then this node saves
 * its own, then the answers are collected (save_collect: a hung peer, a
 * shutdown or a cancel ends the wait within SAVE_SILENCE_NS or
 * SAVE_SLICE_MS). A peer out of the configuration is skipped: its slots
 * are served, and saved, by the nodes that took them over. The first
 * failure is the result, naming its node. On save.c's job thread
 * (blocking calls).
 */
static int save_all(struct node *n, char *err, size_t errlen)
{
	struct cluster *cl = n->cluster;
	int np = cl ? cl->npeers : 0, nc = 0, rc = 0;
	struct save_peer peers[SRV_MAX_CLUSTER_NODES];
	for (int i = 0; i < np; i++) {
		int id = cl->peers[i].id;
		char cerr[200] = "";
		if (peer_out(n, id))
			continue;
		struct save_peer *p = &peers[nc];
		p->cc.fd = -1;
		p->heard = sched_now_ns();
		int crc = ctl_open(n, id, &p->cc, cerr, sizeof(cerr));
		if (crc == 0) /* 8 bytes into an empty socket buffer: no wait */
			crc = ctl_send(NULL, &p->cc, CTL_SAVE, NULL, 0, p->heard + SAVE_FRAME_NS);
		if (crc == 0) {
			nc++;
			continue;
		}
		ctl_close(&p->cc);
		save_fail(&rc, err, errlen, crc, "node %d: %s", id, cerr[0] ? cerr : strerror(-crc));
	}
	char lerr[256] = "";
	int lrc = srv_save_local(n, lerr, sizeof(lerr));
	if (lrc)
		save_fail(&rc, err, errlen, lrc, "%s", lerr);
	save_collect(n, peers, nc, &rc, err, errlen);
	return rc;
}

static const struct node_cluster_ops cluster_ops = {
	.flush_all = flush_all,
	.save_all = save_all,
	.publish = ps_cluster_publish,
};

/*
 * cc-stages on every node (cc_cluster_ops.stages_all): no quiesce, since
 * any mix of one-sided and RPC stages is sound (cc/stages.c), so nodes may
 * take the change at different instants. A peer that is out gets it from
 * its configuration file when it restarts, as a protocol switch's does. A
 * peer that fails to take it is named in the error; the others keep it.
 */
static int stages_all(struct cc_node *cn, struct cc_worker *ccw, uint32_t mask, char *err,
		      size_t errlen)
{
	struct node *n = node_of_cc(cn);
	struct worker *w = NULL;
	for (int i = 0; ccw && i < n->nworkers && !w; i++)
		if (n->workers[i] && n->workers[i]->ccw == ccw)
			w = n->workers[i];
	struct cluster *cl = n->cluster;
	int rc = 0;
	for (int i = 0; cl && i < cl->npeers && rc == 0; i++) {
		if (peer_out(n, cl->peers[i].id))
			continue;
		void *r = NULL;
		size_t rl = 0;
		char cerr[160] = "";
		rc = ctl_call(n, w, cl->peers[i].id, CTL_STAGES, &mask, sizeof(mask), &r, &rl, cerr,
			      sizeof(cerr));
		free(r);
		if (rc)
			snprintf(err, errlen, "node %d did not take it (%s)", cl->peers[i].id,
				 cerr[0] ? cerr : strerror(-rc));
	}
	if (rc == 0) {
		cc_stages_apply(cn, mask);
		char s[120];
		cc_stages_format(mask, s, sizeof(s));
		srv_log(n, LOG_NOTICE, "cc-stages %s on every node", s);
	}
	return rc;
}

static const struct cc_cluster_ops cluster_cc_ops = {
	.switch_all = switch_all,
	.stages_all = stages_all,
};

/* ---- keyspace administration ---- */

static int visit_keybuf(const char *p, size_t len, cluster_key_fn fn, void *arg)
{
	size_t off = 0;
	const char *key;
	uint32_t kl;
	while (ctl_keys_next(p, len, &off, &key, &kl) == 1)
		if (fn(arg, key, kl))
			return 1;
	return 0;
}

struct local_visit {
	const char *pattern;
	size_t plen;
	cluster_key_fn fn;
	void *arg;
	int stopped;
	const struct pl_map *map; /* as keybuf's */
	uint16_t self;
	uint64_t filter;          /* as keybuf's */
};

static int local_visit(void *arg, const char *key, uint32_t klen, const struct st_item *it)
{
	struct local_visit *lv = arg;
	if (item_expired(it) || filtered_out(lv->filter, key, klen, it))
		return 0;
	if (lv->plen && !srv_strmatch(lv->pattern, lv->plen, key, klen, false))
		return 0;
	if (!listed_here(lv->map, lv->self, key, klen))
		return 0;
	if (lv->fn(lv->arg, key, klen))
		lv->stopped = 1;
	return lv->stopped;
}

int cluster_keys(struct node *n, struct worker *w, const char *pattern, size_t plen,
		 cluster_key_fn fn, void *arg, char *err, size_t errlen)
{
	struct local_visit lv = { pattern, plen, fn, arg, 0, listing_begin(n),
				  (uint16_t)n->cfg.node_id, SCAN_F_PARTS };
	uint64_t cursor = 0;
	do {
		st_scan(n->cc.region, &cursor, 4096, local_visit, &lv);
	} while (cursor && !lv.stopped);
	listing_end(n, lv.map);
	struct cluster *cl = n->cluster;
	for (int i = 0; cl && i < cl->npeers && !lv.stopped; i++) {
		if (peer_out(n, cl->peers[i].id))
			continue;
		void *r = NULL;
		size_t rl = 0;
		err[0] = '\0';
		int rc = ctl_call(n, w, cl->peers[i].id, CTL_KEYS, pattern, plen, &r, &rl, err, errlen);
		if (rc) {
			free(r);
			return -1;
		}
		lv.stopped = visit_keybuf(r, rl, fn, arg);
		free(r);
	}
	return 0;
}

int cluster_count(struct node *n, struct worker *w, uint64_t *count, char *err, size_t errlen)
{
	*count = cluster_local_count(n);
	struct cluster *cl = n->cluster;
	for (int i = 0; cl && i < cl->npeers; i++) {
		if (peer_out(n, cl->peers[i].id))
			continue;
		void *r = NULL;
		size_t rl = 0;
		err[0] = '\0';
		int rc = ctl_call(n, w, cl->peers[i].id, CTL_COUNT, NULL, 0, &r, &rl, err, errlen);
		if (rc || rl != 8) {
			free(r);
			return -1;
		}
		uint64_t c;
		memcpy(&c, r, 8);
		*count += c;
		free(r);
	}
	return 0;
}

#define SCAN_NODE_SHIFT 48

int cluster_scan(struct node *n, struct worker *w, uint64_t *cursor, uint64_t count, int type,
		 cluster_key_fn fn, void *arg, char *err, size_t errlen)
{
	const uint64_t filter = SCAN_F_PARTS |
				(type >= 0 ? SCAN_F_TYPE | (uint64_t)type << 8 : 0);
	const struct slot_map *m = ck_pr_load_ptr(&n->slots);
	uint64_t idx = *cursor >> SCAN_NODE_SHIFT;
	uint64_t local = *cursor & ((1ull << SCAN_NODE_SHIFT) - 1);
	if (idx >= (uint64_t)m->nnodes) {
		*cursor = 0;
		return 0;
	}
	int id = m->nodes[idx].id;
	if (peer_out(n, id)) {
		local = 0; /* lists nothing: its keys are listed where they are served now */
	} else if (id == n->cfg.node_id) {
		struct local_visit lv = { NULL, 0, fn, arg, 0, listing_begin(n),
					  (uint16_t)n->cfg.node_id, filter };
		st_scan(n->cc.region, &local, count, local_visit, &lv);
		listing_end(n, lv.map);
	} else {
		uint64_t in[3] = { local, count, filter };
		void *r = NULL;
		size_t rl = 0;
		err[0] = '\0';
		int rc = ctl_call(n, w, id, CTL_SCAN, in, sizeof(in), &r, &rl, err, errlen);
		if (rc || rl < 8) {
			free(r);
			return -1;
		}
		memcpy(&local, r, 8);
		visit_keybuf((char *)r + 8, rl - 8, fn, arg);
		free(r);
	}
	if (local == 0)
		idx++;
	*cursor = idx >= (uint64_t)m->nnodes ? 0 : (idx << SCAN_NODE_SHIFT) | local;
	return 0;
}

/* RANDOMKEY's walk: the first key seen that skip does not skip, copied. */
struct first_key {
	char *key;
	size_t klen;
	bool oom;
	cluster_skip_fn skip;
	void *skip_arg;
};

static int take_first(void *arg, const char *key, size_t klen)
{
	struct first_key *f = arg;
	if (f->skip && f->skip(f->skip_arg, key, klen))
		return 0;
	f->key = malloc(klen ? klen : 1);
	if (!f->key) {
		f->oom = true;
		return 1;
	}
	memcpy(f->key, key, klen);
	f->klen = klen;
	return 1;
}

/* Buckets one step of the walk visits. */
#define RANDOM_STEP 1024

int cluster_random_key(struct node *n, struct worker *w, uint64_t seed, cluster_skip_fn skip,
		       void *skip_arg, char **key, size_t *klen, char *err, size_t errlen)
{
	const struct slot_map *m = ck_pr_load_ptr(&n->slots);
	const uint64_t buckets = n->cc.layout->index_buckets;
	/* A node, then a bucket of its index (st_scan's cursor is bucket * 8
	 * + slot), from the seed's two halves. */
	const uint64_t start = ((uint64_t)((seed >> 32) % (uint64_t)m->nnodes) << SCAN_NODE_SHIFT) |
			       (((seed & 0xffffffffull) % buckets) * 8);
	struct first_key f = { .skip = skip, .skip_arg = skip_arg };
	*key = NULL;
	*klen = 0;
	/* From the start to the end, then from the beginning up to the start:
	 * cursors grow along the walk, and one node's end is the next one's
	 * beginning. */
	for (int pass = 0; pass < 2 && !f.key && !f.oom; pass++) {
		uint64_t cursor = pass == 0 ? start : 0;
		do {
			if (cluster_scan(n, w, &cursor, RANDOM_STEP, -1, take_first, &f, err,
					 errlen) != 0) {
				free(f.key);
				return -1;
			}
		} while (cursor && !f.key && !f.oom && (pass == 0 || cursor < start));
	}
	if (f.oom) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	*key = f.key;
	*klen = f.klen;
	return 0;
}

/*
 * A failover's takeover (server/membership.c, on the Raft leader, once
 * every live node has adopted the new configuration and none runs
 * transactions). For each node `dead` out: read its log slots on every
 * live node; a slot's transaction committed if any of them holds its mark
 * (a coordinator writes marks only after its decision record, and
 * releases no lock before a node's mark); have every live node settle
 * them so. Then every live node resets the protocol metadata of the
 * items it newly serves as primary (mb_takeover_local with dead 0).
 */
/* A takeover's step is short (a slot table read, a walk of the index): a
 * node that does not answer within this is dead or hung, and will be
 * taken out itself. */
#define TAKE_WAIT_NS (2ull * 1000 * 1000 * 1000)

static int take_call(struct node *n, unsigned id, const struct ctl_take *msg, void **r,
		     size_t *rl, char *err, size_t errlen)
{
	return ctl_call_within(n, NULL, (int)id, msg->dead ? CTL_TAKE_SCAN : CTL_TAKE_SETTLE, msg,
			       sizeof(*msg), r, rl, err, errlen, TAKE_WAIT_NS);
}

static int take_one(struct node *n, unsigned dead, uint64_t live, struct ctl_take *msg,
		    uint64_t *pending, uint64_t *marks, char *err, size_t errlen)
{
	memset(msg, 0, sizeof(*msg));
	memset(pending, 0, ST_LOG_SLOTS * sizeof(uint64_t));
	msg->dead = dead;
	for (unsigned id = 1; id < FAB_MAX_NODES; id++) {
		if (!(live & (1ull << id)))
			continue;
		uint64_t local[2 * ST_LOG_SLOTS];
		const uint64_t *txn = local;
		void *r = NULL;
		size_t rl = 0;
		if (id == (unsigned)n->cfg.node_id) {
			srv_takeover_scan(n, dead, local, local + ST_LOG_SLOTS);
		} else {
			int rc = take_call(n, id, msg, &r, &rl, err, errlen);
			if (rc == 0 && rl != sizeof(local))
				rc = -EPROTO;
			if (rc) {
				free(r);
				return rc;
			}
			txn = r;
		}
		/* A slot names one transaction wherever it is not retired
		 * (cc/undo.c invariant (1)); a retired one may keep an older
		 * transaction's mark. */
		for (unsigned s = 0; s < ST_LOG_SLOTS; s++) {
			if (txn[s])
				pending[s] = txn[s];
			marks[(size_t)id * ST_LOG_SLOTS + s] = txn[ST_LOG_SLOTS + s];
		}
		free(r);
	}
	for (unsigned s = 0; s < ST_LOG_SLOTS; s++)
		for (unsigned id = 1; id < FAB_MAX_NODES && pending[s]; id++)
			if ((live & (1ull << id)) && marks[(size_t)id * ST_LOG_SLOTS + s] == pending[s])
				msg->decided[s] = pending[s];
	/* CTL_TAKE_SETTLE carries dead in `dead`, sent as a settle. */
	for (unsigned id = 1; id < FAB_MAX_NODES; id++) {
		if (!(live & (1ull << id)))
			continue;
		if (id == (unsigned)n->cfg.node_id) {
			mb_takeover_local(n, dead, msg->decided);
			continue;
		}
		void *r = NULL;
		size_t rl = 0;
		int rc = ctl_call_within(n, NULL, (int)id, CTL_TAKE_SETTLE, msg, sizeof(*msg), &r,
					 &rl, err, errlen, TAKE_WAIT_NS);
		free(r);
		if (rc)
			return rc;
	}
	return 0;
}

int cluster_takeover(struct node *n, uint64_t out, uint64_t live, char *err, size_t errlen)
{
	struct ctl_take *msg = calloc(1, sizeof(*msg));
	uint64_t *pending = calloc(ST_LOG_SLOTS, sizeof(uint64_t));
	uint64_t *marks = calloc((size_t)FAB_MAX_NODES * ST_LOG_SLOTS, sizeof(uint64_t));
	int rc = 0;
	if (!msg || !pending || !marks) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
	}
	for (unsigned d = 1; d < FAB_MAX_NODES && rc == 0; d++)
		if (out & (1ull << d))
			rc = take_one(n, d, live, msg, pending, marks, err, errlen);
	for (unsigned id = 1; id < FAB_MAX_NODES && rc == 0; id++) {
		if (!(live & (1ull << id)))
			continue;
		if (id == (unsigned)n->cfg.node_id) {
			mb_takeover_local(n, 0, NULL);
			continue;
		}
		memset(msg, 0, sizeof(*msg));
		void *r = NULL;
		size_t rl = 0;
		rc = take_call(n, id, msg, &r, &rl, err, errlen);
		free(r);
	}
	free(msg);
	free(pending);
	free(marks);
	return rc;
}

int cluster_scan_node(struct node *n, unsigned id, uint64_t *cursor, uint64_t count,
		      cluster_key_fn fn, void *arg, char *err, size_t errlen)
{
	uint64_t in[3] = { *cursor, count, 0 }; /* everything: parts too */
	void *r = NULL;
	size_t rl = 0;
	int rc = ctl_call_within(n, NULL, (int)id, CTL_SCAN, in, sizeof(in), &r, &rl, err, errlen,
				 TAKE_WAIT_NS);
	if (rc || rl < 8) {
		if (!err[0])
			snprintf(err, errlen, "node %u: a short SCAN reply", id);
		free(r);
		return -1;
	}
	memcpy(cursor, r, 8);
	visit_keybuf((char *)r + 8, rl - 8, fn, arg);
	free(r);
	return 0;
}

/* ---- start and stop ---- */

static int build_slot_map(struct node *n, char *err, size_t errlen)
{
	struct slot_map *m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int id = 1; id < FAB_MAX_NODES; id++)
		for (int i = 0; i < n->cfg.ncluster_nodes; i++) {
			const struct cfg_cluster_node *cn = &n->cfg.cluster_nodes[i];
			if (cn->id != id)
				continue;
			struct slot_node *sn = &m->nodes[m->nnodes++];
			sn->id = id;
			if (split_host_port(cn->client, sn->host, sizeof(sn->host), &sn->port) != 0) {
				snprintf(err, errlen, "bad client address '%s'", cn->client);
				free(m);
				return -1;
			}
			snprintf(sn->fabric_addr, sizeof(sn->fabric_addr), "%s", cn->fabric);
		}
	struct pl_map *pm = slot_map_placement(m, n->cfg.replicas, 1);
	if (!pm) {
		snprintf(err, errlen, "out of memory");
		free(m);
		return -1;
	}
	/* Before the workers exist: nothing reads the old ones but us. */
	free((void *)n->slots);
	ck_pr_store_ptr(&n->slots, m);
	pl_publish(&n->cc.place, pm);
	return 0;
}

int cluster_start(struct node *n, char *err, size_t errlen)
{
	const struct srv_config *c = &n->cfg;
	if (c->ncluster_nodes == 0)
		return 0;
	const struct cfg_cluster_node *self = NULL;
	for (int i = 0; i < c->ncluster_nodes; i++)
		if (c->cluster_nodes[i].id == c->node_id)
			self = &c->cluster_nodes[i];
	if (!self) {
		snprintf(err, errlen, "this node (node %d) is not listed in the cluster-node lines "
			 "(start each node with --node <id>)", c->node_id);
		return -1;
	}
	struct cluster *cl = calloc(1, sizeof(*cl));
	if (!cl) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	cl->n = n;
	pthread_mutex_init(&cl->attach_mu, NULL);
	cl->id = cluster_id_of(n);
	cl->self_id = c->node_id;
	for (int i = 0; i < c->ncluster_nodes; i++) {
		const struct cfg_cluster_node *cn = &c->cluster_nodes[i];
		if (cn->id == c->node_id)
			continue;
		struct peer *p = &cl->peers[cl->npeers++];
		p->id = cn->id;
		snprintf(p->client, sizeof(p->client), "%s", cn->client);
		snprintf(p->fabric, sizeof(p->fabric), "%s", cn->fabric);
	}
	n->cluster = cl;
	struct fab_listener_config lc = { .fab = n->cc.fab, .other = ctl_accept, .arg = n };
	lc.fd = listen_fabric(self->fabric, err, errlen);
	if (lc.fd < 0 || fab_listener_start(&lc, &cl->listener, err, errlen) != 0)
		goto fail;
	srv_log(n, LOG_NOTICE, "node %d of a %d-node cluster; fabric %s at %s; waiting for peers",
		c->node_id, c->ncluster_nodes, fab_backend_name(n->cc.fab), self->fabric);
	int joined = 0;
	for (int i = 0; i < cl->npeers; i++) {
		int rc = join_peer(n, &cl->peers[i], err, errlen);
		if (rc < 0)
			goto fail;
		joined += rc == 0;
	}
	if (build_slot_map(n, err, errlen) != 0)
		goto fail;
	n->cops = &cluster_ops;
	n->cc.cops = &cluster_cc_ops;
	if (pthread_create(&cl->settler, NULL, settler_main, n) != 0) {
		snprintf(err, errlen, "can't start the settler thread");
		goto fail;
	}
	cl->settling = true;
	if (joined == cl->npeers)
		srv_log(n, LOG_NOTICE, "all %d peers joined", cl->npeers);
	else
		srv_log(n, LOG_NOTICE, "%d of %d peers joined", joined, cl->npeers);
	return 0;
fail:
	cluster_stop(n);
	return -1;
}

void cluster_stop(struct node *n)
{
	struct cluster *cl = n->cluster;
	if (!cl)
		return;
	n->cops = NULL;
	n->cc.cops = NULL;
	ck_pr_store_int(&cl->stop, 1);
	if (cl->settling)
		pthread_join(cl->settler, NULL);
	fab_listener_stop(cl->listener);
	n->cluster = NULL;
	pthread_mutex_destroy(&cl->attach_mu);
	free(cl);
}

/* For node.c: the control-plane bridge handed to the fabric. */
fab_ctl_call_fn cluster_fab_bridge(void) { return fab_ctl_bridge; }
