/*
 * test_fabric: the fabric conformance suite (DESIGN.md section 8, the
 * contract in rdma/fab.h). Every case runs on each software backend, shm
 * and tcp, so a new backend inherits all of them. Nodes live in this
 * process (several struct fab side by side, tcp ones reached over loopback
 * through the fabric listener of rdma/listen.h) or in forked processes
 * (contention, a dying peer).
 *
 * What each case checks, as a user of the fabric would notice it:
 *  errors      out-of-range offsets (also ones whose off+len wraps past
 *              2^64) -> -EFAULT and nothing touched; misaligned CAS/FAA ->
 *              -EINVAL; unknown node -> -EHOSTDOWN; the batch is usable after.
 *  order       inside one batch a READ/CAS/FAA sees an earlier WRITE of the
 *              same word; a run of WRITEs leaves the last; a multi-word WRITE
 *              then READ round-trips (ragged byte edges too); the same with
 *              ops to two remote nodes and the own node interleaved in one
 *              batch (two parts, one direct path).
 *  outstanding several coroutines post batches on one endpoint before any
 *              completes: the target applies them in posting order (FAA old
 *              values) and they complete in posting order (unpark order).
 *  contention  4 processes x 2 threads do FAA on one word, CAS-increment
 *              loops on another, both by turns on a third: final values
 *              exact and the old values returned form exactly 0..total-1 (no
 *              two atomics saw the same value). The owner's threads use CPU
 *              atomics on the direct path; on tcp they keep going, paced,
 *              until the peers are done, so that they race the NIC thread's
 *              atomics for the whole run.
 *  torn        a raw READ of a 64-byte block that a writer keeps rewriting:
 *              every word is whole and never goes back in time; mixed
 *              images are counted and reported (not asserted: the contract
 *              allows, not requires, them).
 *  double-read cc/prim.c's prim_read_consistent on a real MemStore item
 *              whose writer installs through prim_post_install: an install
 *              caught half-way is rejected (deterministic), and under a
 *              racing writer every accepted image is one the writer wrote
 *              (self-describing values) with versions that never go back.
 *  peer death  (tcp) the process owning a peer's region and NIC is killed
 *              with an op in flight: that op and later ops on any worker
 *              fail with an error instead of hanging. (shm has no such
 *              failure: the mapping outlives its owner.)
 *  peer close  (tcp) a peer closes its fabric while its process lives on:
 *              an initiator's next op fails instead of hanging.
 *  listener    (tcp) the fabric listener closes connections whose hello is
 *              bad (wrong magic, wrong version, unknown type, node id out
 *              of range, cut short) and goes on: a data connection after
 *              them works. A CTL hello reaches the callback with a plain
 *              socket (blocking, no receive timeout); one the callback
 *              refuses is closed. Stopping it while a connection stalls in
 *              its hello returns (within a generous 5 s), closes that
 *              connection and the listening socket, and leaves adopted
 *              data connections working.
 *
 * `test_fabric shm` or `test_fabric tcp` runs one backend.
 *
 * Time: every wait is bounded; a watchdog alarm kills the children and
 * fails the test if anything hangs. Children die with the parent
 * (PR_SET_PDEATHSIG) and are killed on any failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cc/cc.h"
#include "cc/sched.h"
#include "rdma/fab.h"
#include "rdma/listen.h"
#include "rdma/tcp_wire.h"
#include "rpc_handlers.h"
#include "storage/st.h"

/* ---- failing, cleaning up, bounding time ---- */

static bool in_child;
static pid_t children[8];
static int nchildren;
static char tmp_paths[16][256];

static void kill_children(void)
{
	for (int i = 0; i < nchildren; i++) {
		if (children[i] > 0) {
			kill(children[i], SIGKILL);
			waitpid(children[i], NULL, 0);
			children[i] = 0;
		}
	}
	nchildren = 0;
}

static void remove_tmp(void)
{
	for (int i = 0; i < 16; i++)
		if (tmp_paths[i][0]) {
			unlink(tmp_paths[i]);
			tmp_paths[i][0] = '\0';
		}
}

static void fail(const char *file, int line, const char *what)
{
	fprintf(stderr, "%s%s:%d: check failed: %s\n", in_child ? "child: " : "", file, line,
		what);
	if (in_child)
		_exit(3);
	kill_children();
	remove_tmp();
	exit(1);
}

#define CHECK(c)                                                                   \
	do {                                                                       \
		if (!(c))                                                          \
			fail(__FILE__, __LINE__, #c);                              \
	} while (0)
/* The same with the values involved printed first. */
#define CHECKV(c, fmt, ...)                                                        \
	do {                                                                       \
		if (!(c)) {                                                        \
			fprintf(stderr, fmt "\n", __VA_ARGS__);                    \
			fail(__FILE__, __LINE__, #c);                              \
		}                                                                  \
	} while (0)

/* A region word, read or written as the fabric's appliers touch it: an
 * 8-byte atomic access (DESIGN.md section 8: region memory is shared).
 * A plain access from the test would race, for ThreadSanitizer, with a
 * handler thread's atomic FAA or CAS on the same word, whose ordering
 * before the reply goes through ck's fences (inline assembly TSan does
 * not see). */
static uint64_t region_word(const char *base, size_t off)
{
	return __atomic_load_n((const uint64_t *)(const void *)(base + off), __ATOMIC_ACQUIRE);
}

static void region_set(char *base, size_t off, uint64_t v)
{
	__atomic_store_n((uint64_t *)(void *)(base + off), v, __ATOMIC_RELEASE);
}

/* The watchdog (SIGALRM), and SIGTERM/SIGINT/SIGHUP from whoever stops
 * the test: kill the children, remove the region files, leave. Only
 * async-signal-safe calls. */
static void on_alarm(int sig)
{
	static const char hung[] = "test_fabric: watchdog: a case hung\n";
	static const char stopped[] = "test_fabric: stopped by a signal\n";
	ssize_t r = sig == SIGALRM ? write(2, hung, sizeof(hung) - 1)
				   : write(2, stopped, sizeof(stopped) - 1);
	(void)r;
	for (int i = 0; i < nchildren; i++)
		if (children[i] > 0)
			kill(children[i], SIGKILL);
	for (int i = 0; i < 16; i++)
		if (tmp_paths[i][0])
			unlink(tmp_paths[i]);
	_exit(2);
}

/* A crash (a fabric op that strays outside its region, say): clean up as
 * above, then die of the same signal so the crash stays visible. */
static void on_crash(int sig)
{
	for (int i = 0; i < nchildren; i++)
		if (children[i] > 0)
			kill(children[i], SIGKILL);
	for (int i = 0; i < 16; i++)
		if (tmp_paths[i][0])
			unlink(tmp_paths[i]);
	signal(sig, SIG_DFL);
	raise(sig);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(int ms) { usleep((useconds_t)ms * 1000); }

/* ---- nodes: a region, a fabric, and for tcp a fabric listener ---- */

struct tnode {
	uint16_t id;
	struct fab *f;
	char *base;
	uint64_t size;
	char path[256];
	int tmp_slot;          /* tmp_paths index of path, or -1 */
	struct st_region *st;  /* when the region is a MemStore */
	int lfd;               /* tcp: a listening socket made before the listener
				  starts (fab_listen_loopback), or -1 */
	struct fab_listener *l; /* tcp: the fabric listener, or NULL */
	char addr[64];         /* tcp: its address */
};

static int tmp_register(const char *path)
{
	for (int i = 0; i < 16; i++)
		if (!tmp_paths[i][0]) {
			snprintf(tmp_paths[i], sizeof(tmp_paths[i]), "%s", path);
			return i;
		}
	return -1;
}

/* A shared file mapping in /dev/shm: what shm peers map by path. */
static char *region_create(char *path, size_t pathlen, uint64_t size, int *slot)
{
	snprintf(path, pathlen, "/dev/shm/rckv-test-fabric-%d-XXXXXX", (int)getpid());
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	*slot = tmp_register(path);
	CHECK(ftruncate(fd, (off_t)size) == 0);
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	CHECK(p != MAP_FAILED);
	return p;
}

/* The fabric listener, on n->lfd if there is one, else on a new socket. */
static void listener_start(struct tnode *n)
{
	char err[256] = "";
	struct fab_listener_config lc = { .fd = n->lfd, .fab = n->f };
	int rc = fab_listener_start(&lc, &n->l, err, sizeof(err));
	n->lfd = -1; /* the listener's now, whatever rc */
	CHECKV(rc == 0, "fab_listener_start: %d %s", rc, err);
	snprintf(n->addr, sizeof(n->addr), "%s", fab_listener_addr(n->l));
}

static void fabric_open(struct tnode *n, const char *be, uint16_t id)
{
	char err[256] = "";
	struct fab_config fc = { .backend = be, .self = id, .region_path = n->path };
	int rc = fab_open(&fc, &n->f, err, sizeof(err));
	CHECKV(rc == 0, "fab_open(%s): %d %s", be, rc, err);
	rc = fab_attach_err(n->f, id, n->base, n->size, err, sizeof(err));
	CHECKV(rc == 0, "fab_attach: %d %s", rc, err);
	if (strcmp(be, "tcp") == 0)
		listener_start(n);
}

/* A node on a plain shared file of `size` bytes. */
static void node_up(struct tnode *n, const char *be, uint16_t id, uint64_t size)
{
	memset(n, 0, sizeof(*n));
	n->id = id;
	n->lfd = -1;
	n->size = size;
	n->base = region_create(n->path, sizeof(n->path), size, &n->tmp_slot);
	fabric_open(n, be, id);
}

/* A node on the shared file at `path`, made if it is not there (a restart
 * of a node whose file another process made). */
static void node_up_at(struct tnode *n, const char *be, uint16_t id, uint64_t size,
		       const char *path)
{
	memset(n, 0, sizeof(*n));
	n->id = id;
	n->lfd = -1;
	n->size = size;
	n->tmp_slot = -1;
	snprintf(n->path, sizeof(n->path), "%s", path);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	CHECK(ftruncate(fd, (off_t)size) == 0);
	n->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	CHECK(n->base != MAP_FAILED);
	fabric_open(n, be, id);
}

/* A node on a MemStore region (persistence none: /dev/shm, removed at close). */
static void node_up_st(struct tnode *n, const char *be, uint16_t id, uint64_t size)
{
	memset(n, 0, sizeof(*n));
	n->id = id;
	n->lfd = -1;
	n->tmp_slot = -1;
	char err[256] = "";
	struct st_config sc = { .node_id = id, .size = size, .persistence = ST_PERSIST_NONE };
	int rc = st_region_open(&sc, &n->st, err, sizeof(err));
	CHECKV(rc == 0, "st_region_open: %d %s", rc, err);
	n->base = st_region_base(n->st);
	n->size = st_region_layout(n->st)->size;
	snprintf(n->path, sizeof(n->path), "%s", st_region_path(n->st));
	n->tmp_slot = tmp_register(n->path); /* in case a check fails before close */
	fabric_open(n, be, id);
}

static void node_down(struct tnode *n)
{
	fab_listener_stop(n->l);
	n->l = NULL;
	fab_close(n->f);
	if (n->st) {
		st_region_close(n->st, false);
	} else {
		munmap(n->base, n->size);
		unlink(n->path);
	}
	if (n->tmp_slot >= 0)
		tmp_paths[n->tmp_slot][0] = '\0';
}

static struct fab_peer_info peer_info(const struct tnode *n)
{
	struct fab_peer_info pi = { .node = n->id, .region_size = n->size };
	snprintf(pi.region_path, sizeof(pi.region_path), "%s", n->path);
	snprintf(pi.addr, sizeof(pi.addr), "%s", n->addr);
	return pi;
}

/* Make `to` reachable from `from`. */
static void link_peer(struct tnode *from, const struct tnode *to)
{
	char err[256] = "";
	struct fab_peer_info pi = peer_info(to);
	int rc = fab_attach_peer(from->f, &pi, err, sizeof(err));
	CHECKV(rc == 0, "fab_attach_peer %u -> %u: %d %s", from->id, to->id, rc, err);
}

/* A worker thread's endpoints and a polling batch (no coroutine). */
struct tworker {
	struct fab_worker *fw;
	struct fab_batch b;
};

static void tw_init(struct tworker *w, struct tnode *n, int id)
{
	char err[256] = "";
	w->fw = fab_worker_create_err(n->f, id, err, sizeof(err));
	CHECKV(w->fw != NULL, "fab_worker_create: %s", err);
	fab_batch_init(&w->b, w->fw, (struct fab_waiter){ 0 }, NULL);
}

static void tw_fini(struct tworker *w) { fab_worker_destroy(w->fw); }

/* A target (node 1) and an initiator (node 2) that reaches it, with one
 * worker of the initiator's. */
static void pair_up(const char *be, uint64_t size, struct tnode *t, struct tnode *i,
		    struct tworker *w)
{
	node_up(t, be, 1, size);
	node_up(i, be, 2, size);
	link_peer(i, t);
	tw_init(w, i, 0);
}

static uint64_t get_word(struct tworker *w, uint16_t node, uint64_t off)
{
	uint64_t v = 0;
	int rc = fab_read1(&w->b, node, off, &v, 8);
	CHECKV(rc == 0, "read of %u:%llu: %d", node, (unsigned long long)off, rc);
	return v;
}

static void put_word(struct tworker *w, uint16_t node, uint64_t off, uint64_t v)
{
	int rc = fab_write1(&w->b, node, off, &v, 8);
	CHECKV(rc == 0, "write of %u:%llu: %d", node, (unsigned long long)off, rc);
}

/* Shared memory between this process and its forked children. */
static void *shared_alloc(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED);
	return p;
}

static pid_t spawn(void)
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		in_child = true;
		nchildren = 0;
		/* The parent's files are the parent's to remove: default actions. */
		signal(SIGALRM, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		signal(SIGSEGV, SIG_DFL);
		signal(SIGBUS, SIG_DFL);
		signal(SIGABRT, SIG_DFL);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(60); /* a child never outlives a minute, whatever happens */
		return 0;
	}
	children[nchildren++] = pid;
	return pid;
}

/* Wait for every child until the deadline; each must exit 0. */
static void reap_children(uint64_t deadline_ns)
{
	for (int i = 0; i < nchildren; i++) {
		int st = 0;
		pid_t r;
		while ((r = waitpid(children[i], &st, WNOHANG)) == 0) {
			CHECKV(now_ns() < deadline_ns, "child %d did not finish in time",
			       (int)children[i]);
			sleep_ms(5);
		}
		CHECK(r == children[i]);
		children[i] = 0;
		CHECKV(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child exited with status 0x%x", st);
	}
	nchildren = 0;
}

/* ---- the journal (fab_set_journal) ---- */

/* What a test journal saw: its lock's holds, and each note's offset and
 * first word. */
struct tjournal {
	int locks, unlocks, held;
	int refuse;  /* the node is down: lock returns nonzero */
	int n;
	uint64_t off[16], word[16];
	uint32_t len[16];
};

static int tj_lock(void *arg)
{
	struct tjournal *j = arg;
	CHECK(j->held == 0);
	if (j->refuse)
		return -EHOSTDOWN;
	j->held = 1;
	j->locks++;
	return 0;
}

static int tj_up(void *arg)
{
	return ((struct tjournal *)arg)->refuse ? -EHOSTDOWN : 0;
}

static void tj_unlock(void *arg)
{
	struct tjournal *j = arg;
	CHECK(j->held == 1);
	j->held = 0;
	j->unlocks++;
}

static void tj_note(void *arg, uint64_t off, const void *src, uint32_t len)
{
	struct tjournal *j = arg;
	CHECK(j->held == 1); /* every note under the lock */
	CHECK(j->n < 16);
	j->off[j->n] = off;
	j->len[j->n] = len;
	j->word[j->n] = 0;
	memcpy(&j->word[j->n], src, len < 8 ? len : 8);
	j->n++;
}

/*
 * The own node with a journal: a batch applied by this CPU takes the lock
 * once and notes, in posting order, what each write left: a WRITE's bytes,
 * a CAS that swapped its new value, an FAA its sum; not a CAS that failed,
 * not a READ, not an op flagged FAB_OP_UNJOURNALED or FAB_OP_VOLATILE;
 * a batch of volatile ops alone notes nothing and takes no lock. The
 * region holds every op's effect.
 */
static void test_journal(const char *be)
{
	struct tnode me;
	node_up(&me, be, 1, 1 << 20);
	struct tworker w;
	tw_init(&w, &me, 0);
	struct tjournal tj;
	memset(&tj, 0, sizeof(tj));
	fab_set_journal(me.f, 1, &(struct fab_journal){ .lock = tj_lock, .note = tj_note,
						       .unlock = tj_unlock, .up = tj_up,
						       .arg = &tj });
	struct fab_batch *b = &w.b;
	uint64_t v = 7, skip = 9, got = 0, old1 = 0, old2 = 0, fold = 0;
	fab_write(b, 1, 64, &v, 8);
	fab_cas(b, 1, 64, 7, 8, &old1);  /* swaps */
	fab_cas(b, 1, 64, 7, 99, &old2); /* fails: 8 is there */
	fab_faa(b, 1, 128, 5, &fold);
	fab_read(b, 1, 64, &got, 8);
	fab_write(b, 1, 256, &skip, 8);
	b->ops[b->n - 1].flags |= FAB_OP_UNJOURNALED;
	uint64_t vold = 1;
	fab_cas(b, 1, 320, 0, 77, &vold); /* a lock word's CAS */
	b->ops[b->n - 1].flags |= FAB_OP_VOLATILE;
	CHECK(fab_exec(b) == 0);
	CHECK(old1 == 7 && old2 == 8 && fold == 0 && got == 8 && vold == 0);
	CHECK(tj.locks == 1 && tj.unlocks == 1);
	CHECKV(tj.n == 3, "%d notes", tj.n);
	CHECK(tj.off[0] == 64 && tj.len[0] == 8 && tj.word[0] == 7);
	CHECK(tj.off[1] == 64 && tj.word[1] == 8);
	CHECK(tj.off[2] == 128 && tj.word[2] == 5);
	CHECK(get_word(&w, 1, 256) == 9);  /* applied all the same */
	CHECK(get_word(&w, 1, 320) == 77); /* so was the volatile CAS */
	fab_write(b, 1, 320, &skip, 8); /* its release, alone: no lock */
	b->ops[b->n - 1].flags |= FAB_OP_VOLATILE;
	CHECK(fab_exec(b) == 0);
	CHECK(tj.n == 3 && tj.locks == 1 && get_word(&w, 1, 320) == 9);

	uint64_t eleven = 11;
	fab_write(b, 1, 64, &eleven, 8);
	b->ops[b->n - 1].flags |= FAB_OP_VOLATILE;
	CHECK(fab_exec(b) == 0);
	CHECK(tj.n == 3 && tj.locks == 1);
	CHECK(get_word(&w, 1, 64) == 11);
	CHECK(tj.locks == 1); /* a READ alone takes no lock */

	/* A journal that refuses (its log's owner is gone): no op of the
	 * batch reaches the region, and the exec fails for that node as if
	 * it did not answer, with nothing sent. */
	tj.refuse = 1;
	v = 21;
	fab_write(b, 1, 64, &v, 8);
	fab_faa(b, 1, 128, 1, NULL);
	CHECK(fab_exec(b) == -EHOSTDOWN);
	CHECK(b->failed == 1ull << 1 && b->unsent == 1ull << 1);
	CHECK(tj.n == 3 && tj.locks == 1);
	got = 0; /* nor does a READ, or a volatile write: the node is down */
	CHECK(fab_read1(b, 1, 64, &got, 8) == -EHOSTDOWN && got == 0);
	fab_write(b, 1, 64, &v, 8);
	b->ops[b->n - 1].flags |= FAB_OP_VOLATILE;
	CHECK(fab_exec(b) == -EHOSTDOWN);
	tj.refuse = 0;
	CHECK(get_word(&w, 1, 64) == 11 && get_word(&w, 1, 128) == 5);

	fab_set_journal(me.f, 1, NULL);
	put_word(&w, 1, 64, 12);
	CHECK(tj.n == 3);
	tw_fini(&w);
	node_down(&me);
}

/*
 * tcp's remote flush (fab_flush, FORD's selective remote flush): the
 * target's NIC thread notes a peer's writes in the target's journal, and
 * holds a flush's reply until the journal's sync, started after those
 * notes, returned; a sync that fails fails the flush; a journal without
 * sync answers at once. A broken connection counts in fab_worker_breaks.
 */
struct tsync {
	struct tjournal tj; /* first: the tj_* hooks take a tsync too */
	int syncs, notes_at_sync, err;
};

static int ts_sync(void *arg)
{
	struct tsync *s = arg;
	sleep_ms(20); /* a disk's fdatasync: the reply must wait for it */
	__atomic_store_n(&s->notes_at_sync, __atomic_load_n(&s->tj.n, __ATOMIC_ACQUIRE),
			 __ATOMIC_RELEASE);
	__atomic_add_fetch(&s->syncs, 1, __ATOMIC_ACQ_REL);
	return s->err;
}

static void test_remote_flush(const char *be)
{
	const uint64_t size = 1 << 20;
	struct tnode t, i;
	struct tworker w;
	pair_up(be, size, &t, &i, &w);
	struct tsync ts;
	memset(&ts, 0, sizeof(ts));
	fab_set_journal(t.f, 1, &(struct fab_journal){ .lock = tj_lock, .note = tj_note,
						       .unlock = tj_unlock, .sync = ts_sync,
						       .arg = &ts });
	uint64_t v = 5;
	fab_write(&w.b, 1, 64, &v, 8);
	fab_flush(&w.b, 1);
	CHECK(fab_exec(&w.b) == 0);
	CHECKV(__atomic_load_n(&ts.syncs, __ATOMIC_ACQUIRE) == 1,
	       "the flush came back after %d syncs", ts.syncs);
	CHECK(ts.notes_at_sync == 1 && ts.tj.off[0] == 64 && ts.tj.word[0] == 5);
	/* Writes alone wait for no sync; their notes are made all the same. */
	v = 6;
	fab_write(&w.b, 1, 72, &v, 8);
	fab_faa(&w.b, 1, 64, 1, NULL);
	CHECK(fab_exec(&w.b) == 0);
	CHECK(ts.syncs == 1 && ts.tj.n == 3 && ts.tj.word[2] == 6);
	CHECK(get_word(&w, 1, 64) == 6 && get_word(&w, 1, 72) == 6);

	/* A failed sync fails the flush: nothing can be said of the log. */
	ts.err = -EIO;
	fab_flush(&w.b, 1);
	CHECK(fab_exec(&w.b) == -EIO);
	CHECK(ts.syncs == 2);
	ts.err = 0;

	/* A journal without sync (the log needs no wait): answered at once. */
	fab_set_journal(t.f, 1, &(struct fab_journal){ .lock = tj_lock, .note = tj_note,
						       .unlock = tj_unlock, .arg = &ts });
	fab_flush(&w.b, 1);
	CHECK(fab_exec(&w.b) == 0 && ts.syncs == 2);

	/* The target goes away: the endpoint breaks, once. */
	CHECK(fab_worker_breaks(w.fw) == 0);
	node_down(&t);
	CHECK(fab_read1(&w.b, 1, 64, &v, 8) != 0);
	CHECK(fab_worker_breaks(w.fw) == 1);
	tw_fini(&w);
	node_down(&i);
	printf("  %s remote flush: ok\n", be);
}

/* ---- errors ---- */

static void test_errors(const char *be)
{
	const uint64_t size = 1 << 20;
	struct tnode t, i;
	struct tworker w;
	pair_up(be, size, &t, &i, &w);

	uint64_t word = 0, old = 0;
	char buf[64];
	put_word(&w, 1, 0, 42);
	put_word(&w, 1, size - 8, 43);

	/* Out of range: past the end, straddling it, and offsets whose
	 * off + len wraps around 2^64 (that must not slip past the check
	 * and land before the region). */
	CHECK(fab_read1(&w.b, 1, size, buf, 8) == -EFAULT);
	CHECK(fab_read1(&w.b, 1, size - 8, buf, 16) == -EFAULT);
	CHECK(fab_write1(&w.b, 1, size - 4, buf, 8) == -EFAULT);
	CHECK(fab_read1(&w.b, 1, UINT64_MAX - 3, buf, 8) == -EFAULT);
	CHECK(fab_write1(&w.b, 1, UINT64_MAX - 7, buf, 16) == -EFAULT);
	CHECK(fab_cas1(&w.b, 1, UINT64_MAX - 7, 0, 1, &old) == -EFAULT);
	CHECK(fab_faa1(&w.b, 1, UINT64_MAX - 7, 1, &old) == -EFAULT);
	CHECK(fab_faa1(&w.b, 1, size, 1, &old) == -EFAULT);
	if (strcmp(be, "tcp") == 0) {
		/* A READ of almost 4 GiB: refused before the NIC thread
		 * reserves its response (fuzz_tcp_wire's out-of-memory input,
		 * tests/fuzz/corpus/fuzz_tcp_wire/regress-huge-read); the
		 * connection goes on serving. */
		CHECK(fab_read1(&w.b, 1, 0, buf, UINT32_MAX - 64) == -EFAULT);
		CHECK(fab_read1(&w.b, 1, 0, &word, 8) == 0 && word == 42);
	}
	/* The same against the own node (the direct path). */
	CHECK(fab_read1(&w.b, 2, size, buf, 8) == -EFAULT);
	CHECK(fab_cas1(&w.b, 2, UINT64_MAX - 7, 0, 1, &old) == -EFAULT);

	/* Misaligned atomics. */
	CHECK(fab_cas1(&w.b, 1, 4, 42, 7, &old) == -EINVAL);
	CHECK(fab_faa1(&w.b, 1, 1, 1, &old) == -EINVAL);
	CHECK(fab_cas1(&w.b, 2, 12, 0, 7, &old) == -EINVAL);

	/* Unknown nodes: never attached, and beyond the id space. */
	CHECK(fab_read1(&w.b, 5, 0, buf, 8) == -EHOSTDOWN);
	CHECK(fab_faa1(&w.b, 5, 0, 1, &old) == -EHOSTDOWN);
	CHECK(fab_read1(&w.b, FAB_MAX_NODES + 3, 0, buf, 8) == -EHOSTDOWN);

	/* A bad op anywhere in a batch fails the exec. */
	fab_write(&w.b, 1, 8, &word, 8);
	fab_cas(&w.b, 1, 3, 0, 1, &old);
	CHECK(fab_exec(&w.b) == -EINVAL);

	/* Nothing was touched, and the batch works afterwards. */
	CHECK(get_word(&w, 1, 0) == 42);
	CHECK(get_word(&w, 1, size - 8) == 43);
	CHECK(get_word(&w, 2, 0) == 0);
	CHECK(fab_faa1(&w.b, 1, 0, 1, &old) == 0 && old == 42);
	CHECK(get_word(&w, 1, 0) == 43);

	tw_fini(&w);
	node_down(&i);
	node_down(&t);
	printf("  %s errors: ok\n", be);
}

/* ---- fencing and leases (server/membership.c's failover) ---- */

/* A word of node 2's (the initiator's own) region and one of the fenced
 * node 1's in one batch: 1's op is refused, 2's applied. */
static void fence_mixed_batch(struct tworker *w, uint64_t v)
{
	uint64_t a = v, b = v;
	fab_write(&w->b, 1, 16, &a, 8);
	fab_write(&w->b, 2, 16, &b, 8);
	CHECK(fab_exec(&w->b) == -EHOSTDOWN);
	CHECK(w->b.failed == 1ull << 1);
	CHECK(get_word(w, 2, 16) == v);
}

/* A write that succeeds within a few seconds of tries (a reconnect). */
static void write_soon(struct tworker *w, uint16_t node, uint64_t off, uint64_t v)
{
	uint64_t deadline = now_ns() + 5ull * 1000000000ull;
	int rc;
	while ((rc = fab_write1(&w->b, node, off, &v, 8)) != 0 && now_ns() < deadline)
		sleep_ms(50);
	CHECKV(rc == 0, "write to node %u: %d", node, rc);
}

static void test_fence(const char *be)
{
	const uint64_t size = 1 << 20;
	struct tnode t, i;
	struct tworker w;
	pair_up(be, size, &t, &i, &w);
	uint64_t old, word;
	put_word(&w, 1, 0, 42);

	/* Node 1 taken out: nothing reaches its region, on shm either,
	 * where it is mapped. */
	CHECK(!fab_fenced(i.f, 1));
	fab_fence(i.f, 1);
	CHECK(fab_fenced(i.f, 1));
	word = 7;
	CHECK(fab_write1(&w.b, 1, 0, &word, 8) == -EHOSTDOWN);
	CHECK(fab_faa1(&w.b, 1, 0, 1, &old) == -EHOSTDOWN);
	CHECK(fab_cas1(&w.b, 1, 0, 42, 9, &old) == -EHOSTDOWN);
	CHECK(fab_read1(&w.b, 1, 0, &word, 8) == -EHOSTDOWN);
	CHECK(*(volatile uint64_t *)t.base == 42);
	fence_mixed_batch(&w, 5);
	CHECK(region_word(t.base, 16) == 0);
	/* Rejoined: reachable again (tcp: the fence shut the connection, and
	 * the op that finds it so fails; the next one reconnects). */
	fab_unfence(i.f, 1);
	word = 43;
	write_soon(&w, 1, 0, word);
	CHECK(*(volatile uint64_t *)t.base == 43);

	/* A lapsed lease cuts every other node, never the own region. */
	uint64_t until = now_ns() - 1;
	fab_set_lease(i.f, &until);
	CHECK(fab_read1(&w.b, 1, 0, &word, 8) == -EHOSTDOWN);
	fence_mixed_batch(&w, 6);
	until = now_ns() + 10ull * 1000000000ull;
	CHECK(get_word(&w, 1, 0) == 43);
	until = 0; /* no lease held: not a lapsed one */
	CHECK(get_word(&w, 1, 0) == 43);
	fab_set_lease(i.f, NULL);

	if (strcmp(be, "tcp") == 0) {
		/* The target fenced the initiator (a hung node that woke up):
		 * its NIC thread applies nothing the initiator sends, and
		 * refuses its new connections, until it is unfenced. */
		fab_fence(t.f, 2);
		word = 99;
		for (int k = 0; k < 3; k++)
			CHECK(fab_write1(&w.b, 1, 0, &word, 8) != 0);
		CHECK(fab_faa1(&w.b, 1, 0, 1, &old) != 0);
		CHECK(*(volatile uint64_t *)t.base == 43);
		fab_unfence(t.f, 2);
		write_soon(&w, 1, 0, word);
		CHECK(*(volatile uint64_t *)t.base == 99);
	}

	tw_fini(&w);
	node_down(&i);
	node_down(&t);
	printf("  %s fence: ok\n", be);
}

/* ---- ordering inside a batch, across batches, across nodes ---- */

static void order_on(struct tworker *w, uint16_t node, uint64_t base, uint64_t seed)
{
	struct fab_batch *b = &w->b;
	uint64_t v = seed, got = 0, old = 0;

	/* WRITE then READ of one word. */
	fab_write(b, node, base, &v, 8);
	fab_read(b, node, base, &got, 8);
	CHECK(fab_exec(b) == 0);
	CHECKV(got == v, "node %u: read after write saw %llu, want %llu", node,
	       (unsigned long long)got, (unsigned long long)v);

	/* WRITE then CAS expecting the written value, then READ. */
	uint64_t a = seed * 3 + 1, c = seed * 5 + 2;
	fab_write(b, node, base, &a, 8);
	fab_cas(b, node, base, a, c, &old);
	fab_read(b, node, base, &got, 8);
	CHECK(fab_exec(b) == 0);
	CHECKV(old == a && got == c, "node %u: CAS after WRITE: old %llu read %llu", node,
	       (unsigned long long)old, (unsigned long long)got);

	/* WRITE, FAA, FAA, READ. */
	uint64_t ten = 10, old2 = 0;
	fab_write(b, node, base + 8, &ten, 8);
	fab_faa(b, node, base + 8, 5, &old);
	fab_faa(b, node, base + 8, 7, &old2);
	fab_read(b, node, base + 8, &got, 8);
	CHECK(fab_exec(b) == 0);
	CHECK(old == 10 && old2 == 15 && got == 22);

	/* A run of WRITEs of increasing values, then a READ: the last wins. */
	uint64_t vals[40];
	for (int k = 0; k < 40; k++) {
		vals[k] = seed + (uint64_t)k + 1;
		fab_write(b, node, base + 16, &vals[k], 8);
	}
	fab_read(b, node, base + 16, &got, 8);
	CHECK(fab_exec(b) == 0);
	CHECK(got == seed + 40);

	/* A failed CAS leaves the word and reports what it saw. */
	fab_cas(b, node, base + 16, 1, 2, &old);
	fab_read(b, node, base + 16, &got, 8);
	CHECK(fab_exec(b) == 0);
	CHECK(old == seed + 40 && got == seed + 40);

	/* Multi-word: 1 KiB WRITE then READ; then one word inside it. */
	static char out[1024], in[1024];
	for (int k = 0; k < 1024; k++)
		out[k] = (char)(seed * 7 + (uint64_t)k);
	memset(in, 0, sizeof(in));
	fab_write(b, node, base + 1024, out, 1024);
	fab_read(b, node, base + 1024, in, 1024);
	CHECK(fab_exec(b) == 0);
	CHECK(memcmp(in, out, 1024) == 0);
	uint64_t mark = 0xfeedfacecafebeefull;
	fab_write(b, node, base + 1024 + 512, &mark, 8);
	fab_read(b, node, base + 1024, in, 1024);
	CHECK(fab_exec(b) == 0);
	memcpy(out + 512, &mark, 8);
	CHECK(memcmp(in, out, 1024) == 0);

	/* Ragged edges: 13 bytes at an odd offset, neighbours untouched. */
	char odd[13], back[15];
	for (int k = 0; k < 13; k++)
		odd[k] = (char)(0xa0 + k);
	uint64_t zero[4] = { 0 };
	fab_write(b, node, base + 2048, zero, 32);
	fab_write(b, node, base + 2048 + 3, odd, 13);
	fab_read(b, node, base + 2048 + 2, back, 15);
	CHECK(fab_exec(b) == 0);
	CHECK(back[0] == 0 && memcmp(back + 1, odd, 13) == 0 && back[14] == 0);
}

static void test_order(const char *be)
{
	const uint64_t size = 1 << 20;
	struct tnode n1, n2, me;
	node_up(&n1, be, 1, size);
	node_up(&n2, be, 2, size);
	node_up(&me, be, 3, size);
	link_peer(&me, &n1);
	link_peer(&me, &n2);
	struct tworker w;
	tw_init(&w, &me, 0);

	/* Each target alone: two remote nodes and the own one. */
	for (uint64_t s = 1; s <= 3; s++) {
		order_on(&w, 1, 4096, s);
		order_on(&w, 2, 4096, s + 100);
		order_on(&w, 3, 4096, s + 200);
	}

	/* One batch, interleaved over three nodes (two parts + direct ops). */
	for (uint64_t r = 1; r <= 200; r++) {
		struct fab_batch *b = &w.b;
		uint64_t a[3] = { r * 10 + 1, r * 10 + 2, r * 10 + 3 };
		uint64_t old[3] = { 0 }, faa_old = 0, got[3] = { 0 };
		for (int k = 0; k < 3; k++)
			fab_write(b, (uint16_t)(k + 1), 64, &a[k], 8);
		for (int k = 0; k < 3; k++)
			fab_cas(b, (uint16_t)(k + 1), 64, a[k], a[k] + 1000, &old[k]);
		fab_faa(b, 2, 64, 5, &faa_old);
		for (int k = 0; k < 3; k++)
			fab_read(b, (uint16_t)(k + 1), 64, &got[k], 8);
		CHECK(fab_exec(b) == 0);
		for (int k = 0; k < 3; k++)
			CHECKV(old[k] == a[k], "round %llu node %d: CAS saw %llu", (unsigned long long)r,
			       k + 1, (unsigned long long)old[k]);
		CHECK(faa_old == a[1] + 1000);
		CHECK(got[0] == a[0] + 1000 && got[1] == a[1] + 1005 && got[2] == a[2] + 1000);

		/* The next batch sees the previous one complete on both peers. */
		uint64_t nxt[2] = { 0 };
		fab_read(b, 1, 64, &nxt[0], 8);
		fab_read(b, 2, 64, &nxt[1], 8);
		CHECK(fab_exec(b) == 0);
		CHECK(nxt[0] == got[0] && nxt[1] == got[1]);
	}

	/* Batches filled past FAB_BATCH_MAX execute in order too. */
	uint64_t seq[FAB_BATCH_MAX * 2 + 5];
	for (int k = 0; k < FAB_BATCH_MAX * 2 + 5; k++) {
		seq[k] = 5000 + (uint64_t)k;
		fab_write(&w.b, (uint16_t)(1 + (k & 1)), 128, &seq[k], 8);
	}
	CHECK(fab_exec(&w.b) == 0);
	CHECK(get_word(&w, 1, 128) == 5000 + FAB_BATCH_MAX * 2 + 4);
	CHECK(get_word(&w, 2, 128) == 5000 + FAB_BATCH_MAX * 2 + 3);

	tw_fini(&w);
	node_down(&me);
	node_down(&n2);
	node_down(&n1);
	printf("  %s order: ok\n", be);
}

/* ---- outstanding batches from coroutines on one endpoint ---- */

#define OUT_CORO 16

struct out_ctx {
	struct sched *s;
	struct fab_worker *fw;
	int posting;                 /* index of the coroutine inside fab_exec's self() */
	void *handle[OUT_CORO];      /* its scheduler handle */
	int completed[OUT_CORO * 4]; /* indexes, in unpark order */
	int ncompleted;
	uint64_t faa_old[OUT_CORO];
	uint64_t mine[OUT_CORO];     /* what its READ after its WRITE saw */
	int rc[OUT_CORO];
	int idx_seq;
	int round;                   /* 0: one endpoint; 1: alternating over two */
};

struct out_arg {
	struct out_ctx *c;
	int idx;
};

static void *out_self(void *ctx)
{
	struct out_ctx *c = ctx;
	void *h = sched_self(c->s);
	c->handle[c->posting] = h;
	return h;
}

static void out_park(void *ctx) { sched_park(((struct out_ctx *)ctx)->s); }

static void out_unpark(void *ctx, void *handle)
{
	struct out_ctx *c = ctx;
	for (int i = 0; i < OUT_CORO; i++)
		if (c->handle[i] == handle && c->ncompleted < OUT_CORO * 4)
			c->completed[c->ncompleted++] = i;
	sched_unpark(c->s, handle);
}

static void out_wait(void *ctx, uint64_t ns) { sched_sleep(((struct out_ctx *)ctx)->s, ns); }

static void out_coro(struct sched *s, void *arg)
{
	struct out_arg *a = arg;
	struct out_ctx *c = a->c;
	struct fab_batch b;
	fab_batch_init(&b, c->fw,
		       (struct fab_waiter){ .wait = out_wait, .ctx = c, .self = out_self,
					    .park = out_park, .unpark = out_unpark },
		       NULL);
	uint16_t node = c->round == 0 ? 1 : (uint16_t)(1 + (a->idx & 1));
	uint64_t v = 1000 + (uint64_t)a->idx;
	fab_faa(&b, node, 0, 1, &c->faa_old[a->idx]);
	fab_write(&b, node, 8, &v, 8);
	fab_read(&b, node, 8, &c->mine[a->idx], 8);
	c->posting = a->idx;
	c->rc[a->idx] = fab_exec(&b);
	(void)s;
}

static void test_outstanding(const char *be)
{
	const uint64_t size = 1 << 20;
	struct tnode n1, n2, me;
	node_up(&n1, be, 1, size);
	node_up(&n2, be, 2, size);
	node_up(&me, be, 3, size);
	link_peer(&me, &n1);
	link_peer(&me, &n2);
	struct tworker w;
	tw_init(&w, &me, 0);

	for (int round = 0; round < 2; round++) {
		struct out_ctx *c = calloc(1, sizeof(*c));
		CHECK(c);
		c->s = sched_create(OUT_CORO, 64 * 1024);
		CHECK(c->s);
		c->fw = w.fw;
		c->round = round;
		put_word(&w, 1, 0, 0);
		put_word(&w, 2, 0, 0);
		struct out_arg args[OUT_CORO];
		for (int i = 0; i < OUT_CORO; i++) {
			args[i] = (struct out_arg){ c, i };
			CHECK(sched_spawn(c->s, out_coro, &args[i]) == 0);
		}
		/* The worker's loop: run coroutines, poll completions. The first
		 * sched_run lets every coroutine post before any completion is
		 * polled, so all batches are outstanding together. */
		uint64_t deadline = now_ns() + 10ull * 1000000000ull;
		uint64_t bells0 = fab_worker_doorbells(w.fw);
		CHECK(sched_run(c->s) > 0);
		fab_worker_flush(w.fw);
		/* Every coroutine posted in that one pass: tcp sends each
		 * endpoint's frames with one write (a doorbell shared by the
		 * coroutines); shm applied them in fab_exec and sends nothing. */
		uint64_t bells = fab_worker_doorbells(w.fw) - bells0;
		uint64_t want = strcmp(be, "tcp") ? 0 : (round == 0 ? 1 : 2);
		CHECKV(bells == want, "round %d: %llu doorbells for %d batches, want %llu", round,
		       (unsigned long long)bells, OUT_CORO, (unsigned long long)want);
		while (!sched_idle(c->s)) {
			CHECK(now_ns() < deadline);
			if (sched_run(c->s) > 0)
				continue;
			if (fab_worker_poll(w.fw) > 0)
				continue;
			int fds[FAB_MAX_NODES];
			int k = fab_worker_fds(w.fw, fds, FAB_MAX_NODES);
			struct pollfd pfd[FAB_MAX_NODES];
			for (int j = 0; j < k; j++)
				pfd[j] = (struct pollfd){ .fd = fds[j], .events = POLLIN };
			if (k > 0)
				poll(pfd, (nfds_t)k, 10);
			else
				sleep_ms(1);
		}
		/* Applied in posting order: coroutine i was the i-th (per node)
		 * to post, so its FAA saw i earlier increments, and its READ saw
		 * its own WRITE (later posts had not run yet). */
		int per_node[3] = { 0 };
		for (int i = 0; i < OUT_CORO; i++) {
			uint16_t node = round == 0 ? 1 : (uint16_t)(1 + (i & 1));
			CHECK(c->rc[i] == 0);
			CHECKV(c->faa_old[i] == (uint64_t)per_node[node],
			       "round %d coro %d: FAA saw %llu, want %d", round, i,
			       (unsigned long long)c->faa_old[i], per_node[node]);
			CHECKV(c->mine[i] == 1000 + (uint64_t)i, "round %d coro %d: read %llu", round, i,
			       (unsigned long long)c->mine[i]);
			per_node[node]++;
		}
		/* Completed in posting order per endpoint. shm completes every
		 * batch inside fab_exec and never parks, so there is nothing to
		 * order there. */
		if (c->ncompleted > 0) {
			CHECKV(c->ncompleted == OUT_CORO, "%d completions", c->ncompleted);
			int lastidx[3] = { -1, -1, -1 };
			for (int j = 0; j < c->ncompleted; j++) {
				int i = c->completed[j];
				int node = round == 0 ? 1 : 1 + (i & 1);
				CHECKV(i > lastidx[node], "round %d: coro %d completed after %d", round, i,
				       lastidx[node]);
				lastidx[node] = i;
			}
		}
		CHECK(get_word(&w, 1, 8) == 1000 + (round == 0 ? OUT_CORO - 1 : OUT_CORO - 2));
		if (c->ncompleted)
			printf("  %s outstanding (%s): %d batches in flight at once, applied and "
			       "completed in posting order\n",
			       be, round == 0 ? "one endpoint" : "two endpoints", OUT_CORO);
		else
			printf("  %s outstanding (%s): %d batches applied in posting order (each "
			       "completes inside fab_exec)\n",
			       be, round == 0 ? "one endpoint" : "two endpoints", OUT_CORO);
		sched_destroy(c->s);
		free(c);
	}

	tw_fini(&w);
	node_down(&me);
	node_down(&n2);
	node_down(&n1);
}

/* ---- CAS and FAA atomicity under contention from several processes ---- */

#define CT_PROCS 4   /* the region's owner and three peers */
#define CT_THREADS 2 /* per process */
#define CT_SLOTS (CT_PROCS * CT_THREADS)
#define CT_BATCH 8   /* a peer's atomics per word per fab_exec */

/* The three words, on their own cache lines: FAA only, CAS-increment only,
 * and both by turns. */
static const uint64_t ct_off[3] = { 0, 64, 128 };
static const char *const ct_name[3] = { "FAA", "CAS", "FAA+CAS" };

struct ct_shared {
	int ready;                  /* workers connected, all processes */
	int go;                     /* set by the parent once every worker is ready */
	int peers_done;             /* peer threads finished */
	uint64_t retries;           /* CAS attempts that lost a race */
	uint64_t done[CT_SLOTS][3]; /* atomics that took effect, per thread and word */
	char addr[64];              /* the owner's fabric listener (tcp) */
	char path[256];             /* the owner's region file (shm) */
	uint64_t size;
	/* followed by the old values: [slot][word][cap] */
};

struct ct_job {
	struct tnode *n;
	struct ct_shared *sh;
	int slot;       /* proc * CT_THREADS + thread; the owner's are 0.. */
	uint64_t *olds; /* this thread's [3][cap] */
	int cap;
	int n_ops;      /* a peer's atomics per word */
	int worker_id;
	bool yield;     /* owner on tcp: yield each iteration (see ct_owner) */
};

/* Is op k of a round on `word` a CAS (else an FAA)? */
static bool ct_is_cas(int word, int k) { return word == 1 || (word == 2 && !(k & 1)); }

/*
 * A peer thread: rounds of one fab_exec holding up to CT_BATCH atomics per
 * word, so the target applies many atomics back to back (on tcp: the NIC
 * thread, racing the owner's CPU atomics). The CASes of a round form a
 * chain expecting guess, guess+1, ... (an FAA in the chain adds the 1); a
 * CAS took effect iff it returned its expected value.
 */
static void ct_peer(struct tworker *w, struct ct_job *j, uint64_t *retries)
{
	uint64_t guess[3] = { 0 }, got[3] = { 0 };
	uint64_t old[3][CT_BATCH], cmp[3][CT_BATCH];
	int m[3];
	while (got[0] < (uint64_t)j->n_ops || got[1] < (uint64_t)j->n_ops ||
	       got[2] < (uint64_t)j->n_ops) {
		for (int wd = 0; wd < 3; wd++) {
			uint64_t left = (uint64_t)j->n_ops - got[wd];
			m[wd] = left < CT_BATCH ? (int)left : CT_BATCH;
			for (int k = 0; k < m[wd]; k++) {
				cmp[wd][k] = guess[wd] + (uint64_t)k;
				if (ct_is_cas(wd, k))
					fab_cas(&w->b, 1, ct_off[wd], cmp[wd][k], cmp[wd][k] + 1,
						&old[wd][k]);
				else
					fab_faa(&w->b, 1, ct_off[wd], 1, &old[wd][k]);
			}
		}
		CHECK(fab_exec(&w->b) == 0);
		for (int wd = 0; wd < 3; wd++) {
			uint64_t *o = j->olds + (size_t)wd * j->cap;
			for (int k = 0; k < m[wd]; k++) {
				if (!ct_is_cas(wd, k) || old[wd][k] == cmp[wd][k])
					o[got[wd]++] = old[wd][k];
				else
					(*retries)++;
			}
			if (m[wd]) { /* what the word holds after our last op */
				int k = m[wd] - 1;
				bool took = !ct_is_cas(wd, k) || old[wd][k] == cmp[wd][k];
				guess[wd] = took ? old[wd][k] + 1 : old[wd][k];
			}
		}
	}
	for (int wd = 0; wd < 3; wd++)
		j->sh->done[j->slot][wd] = got[wd];
}

/* CAS-increment a word once, one op per exec; returns the old value. */
static uint64_t ct_cas_inc(struct tworker *w, uint64_t off, uint64_t *guess, uint64_t *retries)
{
	for (;;) {
		uint64_t old = 0;
		CHECK(fab_cas1(&w->b, 1, off, *guess, *guess + 1, &old) == 0);
		if (old == *guess) {
			*guess = old + 1;
			return old;
		}
		*guess = old;
		(*retries)++;
	}
}

/*
 * An owner thread (direct path, CPU atomics, one op per exec): per
 * iteration an FAA, a CAS increment, and one of the two by turns, until
 * every peer thread finished (or cap), so its atomics race the peers' for
 * the whole run. On tcp it yields each iteration to leave the NIC thread
 * and the peers their share of the 2 cores; on shm the peers' atomics are
 * CPU atomics too and need no such room.
 */
static void ct_owner(struct tworker *w, struct ct_job *j, uint64_t *retries)
{
	uint64_t *fa = j->olds, *cs = j->olds + j->cap, *mx = j->olds + 2 * (size_t)j->cap;
	uint64_t gb = 0, gm = 0;
	const int peer_threads = (CT_PROCS - 1) * CT_THREADS;
	int i;
	for (i = 0; i < j->cap; i++) {
		if (__atomic_load_n(&j->sh->peers_done, __ATOMIC_ACQUIRE) == peer_threads)
			break;
		CHECK(fab_faa1(&w->b, 1, ct_off[0], 1, &fa[i]) == 0);
		cs[i] = ct_cas_inc(w, ct_off[1], &gb, retries);
		if (i & 1)
			CHECK(fab_faa1(&w->b, 1, ct_off[2], 1, &mx[i]) == 0);
		else
			mx[i] = ct_cas_inc(w, ct_off[2], &gm, retries);
		if (j->yield)
			sched_yield();
	}
	for (int wd = 0; wd < 3; wd++)
		j->sh->done[j->slot][wd] = (uint64_t)i;
}

static void *ct_thread(void *arg)
{
	struct ct_job *j = arg;
	struct tworker w;
	tw_init(&w, j->n, j->worker_id);
	__atomic_fetch_add(&j->sh->ready, 1, __ATOMIC_ACQ_REL);
	while (!__atomic_load_n(&j->sh->go, __ATOMIC_ACQUIRE))
		sleep_ms(1);
	uint64_t retries = 0;
	if (j->slot < CT_THREADS) {
		ct_owner(&w, j, &retries);
	} else {
		ct_peer(&w, j, &retries);
		__atomic_fetch_add(&j->sh->peers_done, 1, __ATOMIC_ACQ_REL);
	}
	__atomic_fetch_add(&j->sh->retries, retries, __ATOMIC_RELAXED);
	tw_fini(&w);
	return NULL;
}

static void ct_run_threads(struct tnode *n, struct ct_shared *sh, uint64_t *olds, int proc,
			   int cap, int n_ops)
{
	pthread_t th[CT_THREADS];
	struct ct_job jobs[CT_THREADS];
	for (int t = 0; t < CT_THREADS; t++) {
		int slot = proc * CT_THREADS + t;
		jobs[t] = (struct ct_job){ n, sh, slot, olds + (size_t)slot * 3 * cap, cap, n_ops, t,
					   false };
		CHECK(pthread_create(&th[t], NULL, ct_thread, &jobs[t]) == 0);
	}
	for (int t = 0; t < CT_THREADS; t++)
		pthread_join(th[t], NULL);
}

/* The old values of one word must be exactly 0..total-1, each once. */
static void ct_check_perm(const struct ct_shared *sh, const uint64_t *olds, int cap, int word,
			  uint64_t total)
{
	uint8_t *seen = calloc(total ? total : 1, 1);
	CHECK(seen);
	for (int sl = 0; sl < CT_SLOTS; sl++) {
		const uint64_t *o = olds + ((size_t)sl * 3 + (size_t)word) * cap;
		for (uint64_t i = 0; i < sh->done[sl][word]; i++) {
			CHECKV(o[i] < total, "%s: old value %llu out of 0..%llu", ct_name[word],
			       (unsigned long long)o[i], (unsigned long long)total - 1);
			CHECKV(!seen[o[i]], "%s: old value %llu returned twice", ct_name[word],
			       (unsigned long long)o[i]);
			seen[o[i]] = 1;
		}
	}
	free(seen);
}

/*
 * Peers do n_ops atomics per word in batches; the owner's threads do one
 * op per exec until the peers finished (at most owner_cap per word).
 */
static void test_contention(const char *be, int n_ops, int owner_cap)
{
	bool tcp = strcmp(be, "tcp") == 0;
	int cap = owner_cap > n_ops ? owner_cap : n_ops;
	size_t olds_bytes = (size_t)CT_SLOTS * 3 * (size_t)cap * sizeof(uint64_t);
	struct ct_shared *sh = shared_alloc(sizeof(*sh) + olds_bytes);
	uint64_t *olds = (uint64_t *)(sh + 1);

	/* The owner's region and listening socket exist before fork; its
	 * threads (NIC, listener, workers) start after, so no child
	 * inherits a half-held lock. */
	struct tnode owner;
	memset(&owner, 0, sizeof(owner));
	owner.id = 1;
	owner.lfd = -1;
	owner.size = 1 << 20;
	owner.base = region_create(owner.path, sizeof(owner.path), owner.size, &owner.tmp_slot);
	if (tcp) {
		owner.lfd = fab_listen_loopback(owner.addr, sizeof(owner.addr));
		CHECKV(owner.lfd >= 0, "fab_listen_loopback: %d", owner.lfd);
	}
	snprintf(sh->addr, sizeof(sh->addr), "%s", owner.addr);
	snprintf(sh->path, sizeof(sh->path), "%s", owner.path);
	sh->size = owner.size;

	for (int p = 1; p < CT_PROCS; p++) {
		if (spawn() != 0)
			continue;
		/* Child: node p+1 with a small private region of its own. */
		if (owner.lfd >= 0)
			close(owner.lfd);
		struct tnode me;
		memset(&me, 0, sizeof(me));
		me.id = (uint16_t)(p + 1);
		me.lfd = -1;
		me.size = 64 * 1024;
		me.base = mmap(NULL, me.size, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		CHECK(me.base != MAP_FAILED);
		char err[256] = "";
		struct fab_config fc = { .backend = be, .self = me.id };
		CHECK(fab_open(&fc, &me.f, err, sizeof(err)) == 0);
		CHECK(fab_attach(me.f, me.id, me.base, me.size) == 0);
		struct fab_peer_info pi = { .node = 1, .region_size = sh->size };
		snprintf(pi.region_path, sizeof(pi.region_path), "%s", sh->path);
		snprintf(pi.addr, sizeof(pi.addr), "%s", sh->addr);
		CHECK(fab_attach_peer(me.f, &pi, err, sizeof(err)) == 0);
		ct_run_threads(&me, sh, olds, p, cap, n_ops);
		fab_close(me.f);
		_exit(0);
	}
	fabric_open(&owner, be, 1); /* starts the listener for tcp */

	/* The owner's own threads use the direct path while the peers come
	 * through the fabric; all start together on sh->go. */
	pthread_t th[CT_THREADS];
	struct ct_job jobs[CT_THREADS];
	for (int t = 0; t < CT_THREADS; t++) {
		jobs[t] = (struct ct_job){ &owner, sh, t, olds + (size_t)t * 3 * cap, cap, 0, t, false };
		CHECK(pthread_create(&th[t], NULL, ct_thread, &jobs[t]) == 0);
	}
	uint64_t t0, deadline = now_ns() + 20ull * 1000000000ull;
	while (__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE) < CT_SLOTS) {
		CHECKV(now_ns() < deadline, "only %d of %d workers ready", sh->ready, CT_SLOTS);
		sleep_ms(2);
	}
	t0 = now_ns();
	__atomic_store_n(&sh->go, 1, __ATOMIC_RELEASE);
	for (int t = 0; t < CT_THREADS; t++)
		pthread_join(th[t], NULL);
	reap_children(now_ns() + 60ull * 1000000000ull);
	double secs = (double)(now_ns() - t0) / 1e9;

	struct tworker w;
	tw_init(&w, &owner, 9);
	uint64_t totals[3] = { 0 }, owner_ops = 0;
	for (int wd = 0; wd < 3; wd++) {
		for (int sl = 0; sl < CT_SLOTS; sl++) {
			totals[wd] += sh->done[sl][wd];
			if (sl < CT_THREADS)
				owner_ops += sh->done[sl][wd];
			else
				CHECKV(sh->done[sl][wd] == (uint64_t)n_ops, "peer thread %d: %llu %s",
				       sl, (unsigned long long)sh->done[sl][wd], ct_name[wd]);
		}
		uint64_t v = get_word(&w, 1, ct_off[wd]);
		CHECKV(v == totals[wd], "%s word holds %llu after %llu increments", ct_name[wd],
		       (unsigned long long)v, (unsigned long long)totals[wd]);
		ct_check_perm(sh, olds, cap, wd, totals[wd]);
	}
	tw_fini(&w);
	printf("  %s contention: %d processes x %d threads, %llu atomics that took effect (%llu "
	       "by the owner's threads, one per exec; the peers' %d per exec per word), 3 words "
	       "exact; %llu CAS retries; %.2f s\n",
	       be, CT_PROCS, CT_THREADS,
	       (unsigned long long)(totals[0] + totals[1] + totals[2]),
	       (unsigned long long)owner_ops, CT_BATCH, (unsigned long long)sh->retries, secs);
	node_down(&owner);
	munmap(sh, sizeof(*sh) + olds_bytes);
}

/* ---- torn reads: raw ---- */

#define TORN_OFF 4096 /* a 64-byte block on its own cache line */

struct torn_writer {
	struct tnode *n;
	int stop;
	uint64_t writes;
};

/* Every word of image v is (v << 32 | v): a half-written word would show
 * as halves that differ. */
static uint64_t torn_word(uint64_t v) { return (v << 32) | (v & 0xffffffffu); }

static void *torn_writer_main(void *arg)
{
	struct torn_writer *tw = arg;
	struct tworker w;
	tw_init(&w, tw->n, 7);
	uint64_t blk[8];
	uint64_t v = 1;
	while (!__atomic_load_n(&tw->stop, __ATOMIC_ACQUIRE)) {
		v++;
		for (int k = 0; k < 8; k++)
			blk[k] = torn_word(v);
		CHECK(fab_write1(&w.b, tw->n->id, TORN_OFF, blk, 64) == 0);
	}
	__atomic_store_n(&tw->writes, v - 1, __ATOMIC_RELEASE);
	tw_fini(&w);
	return NULL;
}

static void test_torn_raw(const char *be, double budget_s)
{
	const uint64_t size = 1 << 20;
	struct tnode t, r;
	struct tworker w;
	pair_up(be, size, &t, &r, &w);
	uint64_t init[8];
	for (int k = 0; k < 8; k++)
		init[k] = torn_word(1);
	CHECK(fab_write1(&w.b, 1, TORN_OFF, init, 64) == 0);

	/* The writer is the owner's own worker (direct CPU stores), the
	 * reader a peer: shm's copy or tcp's NIC thread reads concurrently. */
	struct torn_writer wr = { &t, 0, 0 };
	pthread_t th;
	CHECK(pthread_create(&th, NULL, torn_writer_main, &wr) == 0);
	uint64_t last[8] = { 0 }, reads = 0, torn = 0, first_torn_at = 0;
	uint64_t t0 = now_ns(), budget = (uint64_t)(budget_s * 1e9);
	uint64_t blk[8];
	for (;;) {
		CHECK(fab_read1(&w.b, 1, TORN_OFF, blk, 64) == 0);
		reads++;
		bool mixed = false;
		for (int k = 0; k < 8; k++) {
			uint64_t v = blk[k] & 0xffffffffu;
			CHECKV((blk[k] >> 32) == v, "word %d torn inside itself: %016llx", k,
			       (unsigned long long)blk[k]);
			CHECKV(v >= last[k], "word %d went back from %llu to %llu", k,
			       (unsigned long long)last[k], (unsigned long long)v);
			last[k] = v;
			if (blk[k] != blk[0])
				mixed = true;
		}
		if (mixed && torn++ == 0)
			first_torn_at = reads;
		uint64_t el = now_ns() - t0;
		/* Stop at the budget, or early once a fair sample holds tears. */
		if (el >= budget || (torn >= 100 && el >= budget / 4))
			break;
	}
	double secs = (double)(now_ns() - t0) / 1e9;
	__atomic_store_n(&wr.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	printf("  %s torn raw READ 64 B: %llu of %llu reads mixed (%.4f%%), first at read %llu; "
	       "%llu writes in %.2f s\n",
	       be, (unsigned long long)torn, (unsigned long long)reads,
	       reads ? 100.0 * (double)torn / (double)reads : 0.0,
	       (unsigned long long)first_torn_at, (unsigned long long)wr.writes, secs);
	if (torn == 0)
		printf("  %s torn raw READ: NOTE no mixed image seen within %.1f s (allowed by the "
		       "contract, but the Double-Read case below then ran without real tears)\n",
		       be, budget_s);
	tw_fini(&w);
	node_down(&r);
	node_down(&t);
}

/* ---- torn reads caught by the Double-Read of cc/prim.c ---- */

#define DR_KEY "torn:item"
#define DR_VLEN 256
#define DR_WRITER_OWNER 0x0100000000000003ull /* a lock-owner word, odd as cc.h's are */
#define DR_READER_OWNER 0x0200000000000005ull

/* A transaction and one access as prim.c sees them: only the batch, the
 * owner word and the cause are used by the primitives exercised here. */
struct dr_txn {
	struct txn t;
	struct cc_access a;
};

static void dr_txn_init(struct dr_txn *d, struct fab_worker *fw, uint64_t owner,
			const struct st_ref *ref)
{
	memset(d, 0, sizeof(*d));
	d->t.owner = owner;
	fab_batch_init(&d->t.batch, fw, (struct fab_waiter){ 0 }, &d->t.fstats);
	d->a.key = strdup(DR_KEY);
	CHECK(d->a.key);
	d->a.klen = (uint32_t)strlen(DR_KEY);
	d->a.kcap = d->a.klen + 1;
	d->a.node = ref->node;
	d->a.ref = *ref;
	d->a.mode = ACC_R;
}

static void dr_txn_fini(struct dr_txn *d)
{
	free(d->a.key);
	free(d->a.img);
	free(d->a.wval);
}

/* Give the writer's access an image holding ident and key (prim_post_install
 * rewrites words 2.. from it) and a value buffer. */
static void dr_writer_prepare(struct dr_txn *d)
{
	uint32_t cap = st_class_size(d->a.ref.cls);
	d->a.img = calloc(1, cap);
	d->a.img_cap = cap;
	d->a.wval = malloc(DR_VLEN);
	d->a.wcap = DR_VLEN;
	d->a.wvlen = DR_VLEN;
	d->a.mode = ACC_W;
	CHECK(d->a.img && d->a.wval);
	d->a.img->ident = st_make_ident(d->a.ref.gen, d->a.klen, d->a.ref.cls);
	memcpy(d->a.img + 1, DR_KEY, d->a.klen);
}

/* Value of version v: every 8-byte word is v. */
static void dr_fill(struct dr_txn *d, uint64_t v)
{
	for (int k = 0; k < DR_VLEN / 8; k++)
		memcpy(d->a.wval + 8 * k, &v, 8);
}

/* Is the image one the writer wrote? Returns 0, or which rule it broke. */
static int dr_image_bad(const struct st_item *it, uint64_t *vout)
{
	uint64_t v = it->ver;
	*vout = v;
	if (st_data_vlen(it->data) != DR_VLEN || st_data_flags(it->data) != 0)
		return 1;
	if (it->meta[0] != v || it->meta[1] != ~v)
		return 2;
	const char *val = st_item_val(it);
	for (int k = 0; k < DR_VLEN / 8; k++) {
		uint64_t x;
		memcpy(&x, val + 8 * k, 8);
		if (x != v)
			return 3;
	}
	return 0;
}

/* Are the value words of the image not all equal (a mixed, torn image)? */
static bool dr_image_mixed(const struct st_item *it)
{
	const char *val = (const char *)(it + 1) + strlen(DR_KEY);
	uint64_t x0;
	memcpy(&x0, val, 8);
	for (int k = 1; k < DR_VLEN / 8; k++) {
		uint64_t x;
		memcpy(&x, val + 8 * k, 8);
		if (x != x0)
			return true;
	}
	return false;
}

/* One install of version v exactly as a protocol does it: take the lock
 * word by CAS, then prim_post_install (words 2.., ver, lock) in one batch. */
static void dr_install(struct dr_txn *d, uint64_t v)
{
	uint64_t old = 1;
	prim_post_cas_item(&d->t, &d->a, W_LOCK, 0, d->t.owner, &old);
	CHECK(prim_exec(&d->t) == CC_OK);
	CHECKV(old == 0, "writer's lock CAS saw %llx", (unsigned long long)old);
	dr_fill(d, v);
	uint64_t meta[2] = { v, ~v };
	prim_post_install(&d->t, &d->a, v, meta, 0);
	CHECK(prim_exec(&d->t) == CC_OK);
}

struct dr_writer {
	struct tnode *n;
	struct st_ref ref;
	int stop;
	uint64_t last_ver;
};

static void *dr_writer_main(void *arg)
{
	struct dr_writer *wr = arg;
	struct tworker w;
	tw_init(&w, wr->n, 7);
	struct dr_txn d;
	dr_txn_init(&d, w.fw, DR_WRITER_OWNER, &wr->ref);
	dr_writer_prepare(&d);
	uint64_t v = 100;
	while (!__atomic_load_n(&wr->stop, __ATOMIC_ACQUIRE))
		dr_install(&d, ++v);
	__atomic_store_n(&wr->last_ver, v, __ATOMIC_RELEASE);
	dr_txn_fini(&d);
	tw_fini(&w);
	return NULL;
}

static void test_double_read(const char *be, double budget_s)
{
	struct tnode t, r;
	node_up_st(&t, be, 1, 32ull << 20);
	node_up(&r, be, 2, 1 << 20);
	link_peer(&r, &t);
	const struct st_layout *L = st_region_layout(t.st);

	/* The item: a block from the MemStore allocator, written whole. */
	struct tworker tw;
	tw_init(&tw, &t, 0);
	struct st_ref ref;
	uint32_t klen = (uint32_t)strlen(DR_KEY);
	CHECK(st_alloc(&tw.b, L, 1, klen, DR_VLEN, &ref) == 0);
	CHECK(ref.node == 1 && st_class_size(ref.cls) >= sizeof(struct st_item) + klen + DR_VLEN);
	/* Unlocked, as st_create hands a new item over from its claim. */
	CHECK(fab_cas1(&tw.b, 1, ref.off, ST_LOCK_CLAIMED, 0, NULL) == 0);
	struct dr_txn wd;
	dr_txn_init(&wd, tw.fw, DR_WRITER_OWNER, &ref);
	dr_writer_prepare(&wd);
	dr_install(&wd, 100);

	struct tworker rw;
	tw_init(&rw, &r, 0);
	struct dr_txn rd;
	dr_txn_init(&rd, rw.fw, DR_READER_OWNER, &ref);
	uint64_t v = 0;
	CHECK(prim_read_consistent(&rd.t, &rd.a) == CC_OK);
	CHECK(dr_image_bad(rd.a.img, &v) == 0 && v == 100);

	/* Deterministic: an install caught half-way (lock held, the first
	 * half of the value new) is a torn image, and it is refused. */
	uint64_t old = 1;
	prim_post_cas_item(&wd.t, &wd.a, W_LOCK, 0, DR_WRITER_OWNER, &old);
	CHECK(prim_exec(&wd.t) == CC_OK && old == 0);
	uint64_t half[DR_VLEN / 16];
	for (int k = 0; k < DR_VLEN / 16; k++)
		half[k] = 101;
	CHECK(fab_write1(&tw.b, 1, ref.off + sizeof(struct st_item) + klen, half, sizeof(half)) == 0);
	CHECK(prim_read_consistent(&rd.t, &rd.a) == CC_ABORT);
	CHECK(dr_image_mixed(rd.a.img)); /* what it refused was really torn */
	CHECK(rd.t.cause == CC_CAUSE_LOCK);
	/* The rest of the install; then the new image is accepted. */
	dr_fill(&wd, 101);
	uint64_t meta[2] = { 101, ~101ull };
	prim_post_install(&wd.t, &wd.a, 101, meta, 0);
	CHECK(prim_exec(&wd.t) == CC_OK);
	CHECK(prim_read_consistent(&rd.t, &rd.a) == CC_OK);
	CHECK(dr_image_bad(rd.a.img, &v) == 0 && v == 101);
	dr_txn_fini(&wd);

	/* Racing: the owner's worker installs versions 102, 103, ... while the
	 * peer alternates a raw READ of the block (tears counted) and a
	 * Double-Read (every accepted image must be a written one). */
	struct dr_writer wr = { &t, ref, 0, 0 };
	pthread_t th;
	CHECK(pthread_create(&th, NULL, dr_writer_main, &wr) == 0);
	uint64_t accepted = 0, refused = 0, refused_mixed = 0, raw = 0, raw_mixed = 0;
	uint64_t last_ver = 101;
	uint32_t bsize = st_class_size(ref.cls);
	struct st_item *blk = malloc(bsize);
	CHECK(blk);
	uint64_t t0 = now_ns(), budget = (uint64_t)(budget_s * 1e9);
	while (now_ns() - t0 < budget) {
		CHECK(fab_read1(&rw.b, 1, ref.off, blk, bsize) == 0);
		raw++;
		if (dr_image_mixed(blk))
			raw_mixed++;
		int rc = prim_read_consistent(&rd.t, &rd.a);
		if (rc == CC_ABORT) {
			refused++;
			if (dr_image_mixed(rd.a.img))
				refused_mixed++;
			continue;
		}
		CHECKV(rc == CC_OK, "prim_read_consistent: %d", rc);
		accepted++;
		int bad = dr_image_bad(rd.a.img, &v);
		CHECKV(bad == 0, "accepted image of ver %llu was never written (rule %d)",
		       (unsigned long long)v, bad);
		CHECKV(rd.a.img->lock == 0, "accepted image with lock %llx",
		       (unsigned long long)rd.a.img->lock);
		CHECKV(v >= last_ver, "accepted ver %llu after %llu", (unsigned long long)v,
		       (unsigned long long)last_ver);
		last_ver = v;
	}
	__atomic_store_n(&wr.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	CHECK(accepted > 0);
	printf("  %s double-read: %llu images accepted, all written ones (vers up to %llu of %llu "
	       "installed); %llu refused (%llu visibly torn); raw READs of the same block: %llu of "
	       "%llu torn\n",
	       be, (unsigned long long)accepted, (unsigned long long)last_ver,
	       (unsigned long long)wr.last_ver, (unsigned long long)refused,
	       (unsigned long long)refused_mixed, (unsigned long long)raw_mixed,
	       (unsigned long long)raw);
	free(blk);
	dr_txn_fini(&rd);
	tw_fini(&rw);
	tw_fini(&tw);
	node_down(&r);
	node_down(&t);
}

/* ---- a dying peer (tcp) ---- */

struct pd_shared {
	int ready;
	char addr[64];
	char path[256]; /* the peer's region file, removed by the parent */
};

struct pd_pending {
	struct tworker *w;
	int done;
	int rc;
	uint64_t old;
};

static void *pd_pending_main(void *arg)
{
	struct pd_pending *p = arg;
	p->rc = fab_faa1(&p->w->b, 1, 0, 1, &p->old);
	__atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void test_peer_death(const char *be)
{
	struct pd_shared *sh = shared_alloc(sizeof(*sh));
	pid_t pid = spawn();
	if (pid == 0) {
		/* The peer: node 1, its region, NIC thread and listener. */
		struct tnode n;
		node_up(&n, be, 1, 1 << 20);
		snprintf(sh->addr, sizeof(sh->addr), "%s", n.addr);
		snprintf(sh->path, sizeof(sh->path), "%s", n.path);
		__atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
		for (;;)
			pause(); /* until killed (or the child alarm) */
	}
	uint64_t deadline = now_ns() + 10ull * 1000000000ull;
	while (!__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE)) {
		CHECK(now_ns() < deadline);
		sleep_ms(2);
	}
	int peer_slot = tmp_register(sh->path); /* it cannot clean up after SIGKILL */
	struct tnode me;
	node_up(&me, be, 2, 1 << 20);
	struct fab_peer_info pi = { .node = 1, .region_size = 1 << 20 };
	snprintf(pi.addr, sizeof(pi.addr), "%s", sh->addr);
	char err[256] = "";
	CHECK(fab_attach_peer(me.f, &pi, err, sizeof(err)) == 0);
	struct tworker w1, w2;
	tw_init(&w1, &me, 0);
	tw_init(&w2, &me, 1);
	uint64_t old = 99;
	CHECK(fab_faa1(&w1.b, 1, 0, 1, &old) == 0 && old == 0);
	CHECK(fab_faa1(&w2.b, 1, 0, 1, &old) == 0 && old == 1);

	/* Freeze the peer so an op is certainly in flight, then kill it.
	 * SIGSTOP is asynchronous: wait until the peer has really stopped, or
	 * its NIC thread may still answer the op below. */
	CHECK(kill(pid, SIGSTOP) == 0);
	int wst = 0;
	CHECK(waitpid(pid, &wst, WUNTRACED) == pid && WIFSTOPPED(wst));
	struct pd_pending pend = { &w1, 0, 0, 0 };
	pthread_t th;
	CHECK(pthread_create(&th, NULL, pd_pending_main, &pend) == 0);
	sleep_ms(200);
	CHECK(!__atomic_load_n(&pend.done, __ATOMIC_ACQUIRE)); /* pending indeed */
	CHECK(kill(pid, SIGKILL) == 0);
	CHECK(waitpid(pid, NULL, 0) == pid);
	children[--nchildren] = 0;
	uint64_t t0 = now_ns();
	deadline = t0 + 10ull * 1000000000ull;
	while (!__atomic_load_n(&pend.done, __ATOMIC_ACQUIRE)) {
		CHECKV(now_ns() < deadline, "%s", "the pending op hangs after its peer died");
		sleep_ms(2);
	}
	pthread_join(th, NULL);
	CHECKV(pend.rc < 0, "pending op returned %d", pend.rc);
	double pend_ms = (double)(now_ns() - t0) / 1e6;

	/* Later ops fail too, on the worker that saw it and on one that did
	 * not have an op in flight; neither hangs (the watchdog would fire). */
	char buf[8];
	int rc1 = fab_read1(&w1.b, 1, 0, buf, 8);
	int rc2 = fab_read1(&w2.b, 1, 0, buf, 8);
	int rc3 = fab_read1(&w2.b, 1, 0, buf, 8);
	CHECKV(rc1 < 0 && rc2 < 0 && rc3 < 0, "after death: %d %d %d", rc1, rc2, rc3);
	/* The own node still works. */
	CHECK(fab_faa1(&w1.b, 2, 0, 1, &old) == 0);
	printf("  %s peer death: pending op failed with %d after %.1f ms; later ops %d, %d, %d\n",
	       be, pend.rc, pend_ms, rc1, rc2, rc3);
	tw_fini(&w2);
	tw_fini(&w1);
	node_down(&me);
	unlink(sh->path);
	if (peer_slot >= 0)
		tmp_paths[peer_slot][0] = '\0';
	munmap(sh, sizeof(*sh));
}

/* Node 2 (me) with a worker that reaches t, whose region is fresh: a
 * first FAA on t's word 0 returns 0 (on tcp: through t's listener). */
static void initiator_up(struct tnode *me, struct tworker *w, const char *be, struct tnode *t)
{
	node_up(me, be, 2, 1 << 20);
	link_peer(me, t);
	tw_init(w, me, 0);
	uint64_t old = 9;
	CHECK(fab_faa1(&w->b, t->id, 0, 1, &old) == 0 && old == 0);
}

/* A peer that shuts its fabric down (fab_close) while its process lives
 * on: its connections must go with it, so that an initiator's next op
 * fails instead of waiting forever for a NIC that no longer runs. */
static void test_peer_close(const char *be)
{
	struct tnode t, me;
	struct tworker w;
	node_up(&t, be, 1, 1 << 20);
	initiator_up(&me, &w, be, &t);
	node_down(&t);

	struct pd_pending pend = { &w, 0, 0, 0 };
	pthread_t th;
	CHECK(pthread_create(&th, NULL, pd_pending_main, &pend) == 0);
	uint64_t t0 = now_ns(), deadline = t0 + 5ull * 1000000000ull;
	while (!__atomic_load_n(&pend.done, __ATOMIC_ACQUIRE)) {
		CHECKV(now_ns() < deadline, "%s", "an op to a closed peer hangs");
		sleep_ms(2);
	}
	pthread_join(th, NULL);
	CHECKV(pend.rc < 0, "op to a closed peer returned %d", pend.rc);
	printf("  %s peer close: op failed with %d after %.1f ms\n", be, pend.rc,
	       (double)(now_ns() - t0) / 1e6);
	tw_fini(&w);
	node_down(&me);
}

/* ---- the fabric listener (tcp) ---- */

struct tl_seen {
	int calls;  /* callback runs: the listener's thread adds (release) after
		       writing the fields below; the test reads it (acquire) */
	int type, from;
	bool plain; /* the fd was blocking and had no receive timeout */
};

/* The callback for non-DATA connections: note what came; answer "ok" on
 * the first and close it, refuse the others (the listener closes them). */
static int tl_other(void *arg, int fd, const struct tcp_hello *h)
{
	struct tl_seen *s = arg;
	struct timeval tv = { 1, 1 };
	socklen_t tl = sizeof(tv);
	int fl = fcntl(fd, F_GETFL);
	s->plain = getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &tl) == 0 && tv.tv_sec == 0 &&
		   tv.tv_usec == 0 && fl >= 0 && !(fl & O_NONBLOCK);
	s->type = h->type;
	s->from = h->from;
	if (__atomic_add_fetch(&s->calls, 1, __ATOMIC_RELEASE) > 1)
		return -EPERM;
	ssize_t w = send(fd, "ok", 2, MSG_NOSIGNAL);
	(void)w; /* the client sees what arrived */
	close(fd);
	return 0;
}

/* Connect to addr and send the first len bytes of h. Returns the fd. */
static int tl_connect(const char *addr, const struct tcp_hello *h, size_t len)
{
	char err[256] = "";
	int fd = fab_tcp_connect(addr, 2000, err, sizeof(err));
	CHECKV(fd >= 0, "connect to the listener %s: %s", addr, err);
	CHECK(send(fd, h, len, MSG_NOSIGNAL) == (ssize_t)len);
	return fd;
}

/* Read what comes on a client's connection until the other side closes
 * it, for at most 5 s. Returns the bytes that came before the close (into
 * buf, NUL-terminated), or -1 if it is still open after 5 s. Closes fd. */
static int tl_until_closed(int fd, char *buf, size_t cap)
{
	size_t got = 0;
	uint64_t deadline = now_ns() + 5ull * 1000000000ull;
	int rc = -1;
	while (now_ns() < deadline) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		ssize_t k = recv(fd, buf + got, cap - 1 - got, 0);
		if (k > 0) {
			got += (size_t)k;
			if (got == cap - 1)
				break; /* more than the listener's peers ever send */
			continue;
		}
		if (k == 0 || errno == ECONNRESET) {
			rc = (int)got;
			break;
		}
		if (errno != EINTR)
			break;
	}
	buf[got] = '\0';
	close(fd);
	return rc;
}

static void test_listener(const char *be)
{
	struct tnode t, me;
	node_up(&t, be, 1, 1 << 20);
	/* Swap t's listener for one with a callback (a new socket, a new
	 * address): a node's fabric outlives its listener. */
	fab_listener_stop(t.l);
	struct tl_seen seen = { 0 };
	char err[256] = "", buf[16];
	struct fab_listener_config lc = { .fd = -1, .fab = t.f, .other = tl_other, .arg = &seen };
	int rc = fab_listener_start(&lc, &t.l, err, sizeof(err));
	CHECKV(rc == 0, "fab_listener_start: %d %s", rc, err);
	snprintf(t.addr, sizeof(t.addr), "%s", fab_listener_addr(t.l));

	/* Bad hellos: each connection is closed, with nothing sent back. */
	static const char *const bad_name[] = { "wrong magic", "wrong version", "unknown type",
						"node id out of range", "cut short" };
	for (int i = 0; i < 5; i++) {
		struct tcp_hello h;
		tcp_hello_encode(&h, TCP_HELLO_DATA, 2, 0);
		size_t len = sizeof(h);
		if (i == 0)
			memcpy(h.magic, "XXXXXXXX", 8);
		else if (i == 1)
			h.magic[7]++; /* "RCKVFAB2" */
		else if (i == 2)
			h.type = 7;
		else if (i == 3)
			h.from = FAB_MAX_NODES;
		else
			len = 10;
		int fd = tl_connect(t.addr, &h, len);
		if (i == 4)
			shutdown(fd, SHUT_WR);
		int got = tl_until_closed(fd, buf, sizeof(buf));
		CHECKV(got == 0, "%s hello: connection %s", bad_name[i],
		       got < 0 ? "still open after 5 s" : "answered");
	}
	CHECK(__atomic_load_n(&seen.calls, __ATOMIC_ACQUIRE) == 0);

	/* A data connection after them: the fabric works through it. */
	struct tworker w;
	initiator_up(&me, &w, be, &t);

	/* CTL hellos reach the callback: the first it answers, the second it
	 * refuses, and the listener closes that one. */
	struct tcp_hello ctl;
	tcp_hello_encode(&ctl, TCP_HELLO_CTL, 5, 0);
	int got = tl_until_closed(tl_connect(t.addr, &ctl, sizeof(ctl)), buf, sizeof(buf));
	CHECKV(got == 2 && strcmp(buf, "ok") == 0, "CTL connection: %d bytes '%s'", got, buf);
	CHECK(__atomic_load_n(&seen.calls, __ATOMIC_ACQUIRE) == 1);
	CHECKV(seen.type == TCP_HELLO_CTL && seen.from == 5, "callback saw type %d from %d",
	       seen.type, seen.from);
	CHECKV(seen.plain, "%s", "the CTL socket is non-blocking or has a receive timeout");
	got = tl_until_closed(tl_connect(t.addr, &ctl, sizeof(ctl)), buf, sizeof(buf));
	CHECKV(got == 0, "refused CTL connection: %s", got < 0 ? "still open after 5 s" : buf);
	CHECK(__atomic_load_n(&seen.calls, __ATOMIC_ACQUIRE) == 2);

	/* Stop while a connection stalls half-way through its hello (the
	 * listener waits for the rest): stop returns, that connection and the
	 * listening socket are closed, the adopted connection still works. */
	int stalled = tl_connect(t.addr, &ctl, 8);
	sleep_ms(100);
	uint64_t t0 = now_ns();
	fab_listener_stop(t.l);
	t.l = NULL;
	double stop_ms = (double)(now_ns() - t0) / 1e6;
	CHECKV(stop_ms < 5000, "fab_listener_stop took %.0f ms", stop_ms);
	got = tl_until_closed(stalled, buf, sizeof(buf));
	CHECKV(got == 0, "stalled connection after stop: %s",
	       got < 0 ? "still open after 5 s" : buf);
	int fd = fab_tcp_connect(t.addr, 2000, err, sizeof(err));
	CHECKV(fd < 0, "connected to %s after the listener stopped", t.addr);
	uint64_t old = 9;
	CHECK(fab_faa1(&w.b, 1, 0, 1, &old) == 0 && old == 1);
	printf("  %s listener: 5 bad hellos closed, data and CTL served; stop took %.1f ms\n", be,
	       stop_ms);
	tw_fini(&w);
	node_down(&me);
	node_down(&t);
}

static bool want(const char *only_case, const char *name)
{
	return !only_case || strcmp(only_case, name) == 0;
}

/* ---- two-sided RPC (fab_rpc) ---- */

enum { RPC_ADD = 1, RPC_FAIL = 2, RPC_ECHO = 3, RPC_HOLD = 4, RPC_LATER = 5, RPC_SLEEP = 6,
       RPC_BIG = 7, RPC_WAITWORD = 8, RPC_UNSET = 9 };

/* Never answers while the process lives (a target that dies mid-call). */
static int h_hold(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	(void)arg, (void)c, (void)len;
	for (;;)
		pause();
	return 0;
}

/* Answers later (FAB_RPC_DEFER): the server's loop echoes it once its
 * next poll is over, as a lock's waiting list would be served. */
static struct fab_rpc_call *deferred[64];
static int ndeferred;

static int h_later(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	(void)arg, (void)len;
	if (ndeferred == 64)
		return -EBUSY;
	deferred[ndeferred++] = c;
	return FAB_RPC_DEFER;
}

static void answer_deferred(void)
{
	for (int k = 0; k < ndeferred; k++) {
		struct fab_rpc_call *c = deferred[k];
		memcpy(c->resp, c->req, c->len < c->cap ? c->len : c->cap);
		fab_rpc_reply(c, 11, c->len);
	}
	ndeferred = 0;
}

/* Holds its worker for 300 ms (a long handler). */
static int h_sleep(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	(void)arg, (void)c, (void)len;
	sleep_ms(300);
	return 0;
}

/* A reply as large as the caller takes. */
static int h_big(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	(void)arg;
	memset(c->resp, 0x5a, c->cap);
	*len = c->cap;
	return 0;
}

/* Answers once the word at its request's offset is not 0 (a lock's
 * waiting list: the word another request frees); arg is the region. */
struct waitword {
	struct fab_rpc_call *c;
	const uint64_t *word;
};
static struct waitword waitwords[16];
static int nwaitwords;

static int h_waitword(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	(void)len;
	uint64_t off;
	if (c->len != 8 || nwaitwords == 16 || c->cap < 8)
		return -EINVAL;
	memcpy(&off, c->req, 8);
	waitwords[nwaitwords++] = (struct waitword){ c, (const uint64_t *)((char *)arg + off) };
	return FAB_RPC_DEFER;
}

static void answer_waitwords(void)
{
	int k = 0;
	for (int i = 0; i < nwaitwords; i++) {
		uint64_t v = __atomic_load_n(waitwords[i].word, __ATOMIC_ACQUIRE);
		if (!v) {
			waitwords[k++] = waitwords[i];
			continue;
		}
		memcpy(waitwords[i].c->resp, &v, 8);
		fab_rpc_reply(waitwords[i].c, 0, 8);
	}
	nwaitwords = k;
}

static void rpc_register_all(struct fab *f)
{
	CHECK(fab_rpc_register(f, RPC_LATER, "later", h_later, NULL) == 0);
	CHECK(fab_rpc_register(f, RPC_SLEEP, "sleep", h_sleep, NULL) == 0);
	CHECK(fab_rpc_register(f, RPC_BIG, "big", h_big, NULL) == 0);
	CHECK(fab_rpc_register(f, RPC_ADD, "add", h_add, NULL) == 0);
	CHECK(fab_rpc_register(f, RPC_FAIL, "fail", h_fail, NULL) == 0);
	CHECK(fab_rpc_register(f, RPC_ECHO, "echo", h_echo, NULL) == 0);
	CHECK(fab_rpc_register(f, RPC_HOLD, "hold", h_hold, NULL) == 0);
	CHECK(fab_rpc_register(f, RPC_ADD, "again", h_add, NULL) == -EINVAL);
	CHECK(fab_rpc_register(f, FAB_RPC_HANDLERS, "out of range", h_add, NULL) == -EINVAL);
}

/* A worker of the target node on a thread of its own, polling as the
 * server's workers do (handlers run inline, in fab_worker_poll). */
struct rpc_server {
	struct tnode *n;
	int id;
	int ready, stop;
	int wait_ms; /* its poll's timeout: -1 (only a wake-up wakes it) finds
			lost wake-ups, as an idle server's worker would */
	int stop_fd; /* an eventfd its poll watches too: the stop */
	pthread_t th;
};

static void *rpc_server_main(void *arg)
{
	struct rpc_server *sv = arg;
	struct fab_worker *fw = fab_worker_create(sv->n->f, sv->id);
	CHECK(fw != NULL);
	__atomic_store_n(&sv->ready, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&sv->stop, __ATOMIC_ACQUIRE)) {
		int fds[FAB_MAX_NODES];
		struct pollfd pfd[FAB_MAX_NODES];
		int k = fab_worker_fds(fw, fds, FAB_MAX_NODES - 1);
		for (int i = 0; i < k; i++)
			pfd[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
		pfd[k++] = (struct pollfd){ .fd = sv->stop_fd, .events = POLLIN };
		poll(pfd, (nfds_t)k, __atomic_load_n(&sv->wait_ms, __ATOMIC_RELAXED));
		fab_worker_poll(fw);
		answer_deferred();
		answer_waitwords();
	}
	fab_worker_destroy(fw);
	return NULL;
}

static void rpc_server_start(struct rpc_server *sv, struct tnode *n, int id)
{
	*sv = (struct rpc_server){ .n = n, .id = id, .wait_ms = 20,
				   .stop_fd = eventfd(0, EFD_CLOEXEC) };
	CHECK(sv->stop_fd >= 0);
	CHECK(pthread_create(&sv->th, NULL, rpc_server_main, sv) == 0);
	while (!__atomic_load_n(&sv->ready, __ATOMIC_ACQUIRE))
		sleep_ms(1);
}

static void rpc_server_stop(struct rpc_server *sv)
{
	__atomic_store_n(&sv->stop, 1, __ATOMIC_RELEASE);
	uint64_t v = 1;
	CHECK(write(sv->stop_fd, &v, sizeof(v)) == (ssize_t)sizeof(v));
	pthread_join(sv->th, NULL);
	close(sv->stop_fd);
}

static struct rpc_add_req add_req(uint64_t off, uint64_t add)
{
	return (struct rpc_add_req){ .off = off, .add = add };
}

/*
 * Conformance of fab_rpc against a peer (tcp: its workers answer, not its
 * NIC thread) and against the own node (any backend): replies, ordering
 * against one-sided ops on the same endpoint, batching, a handler that
 * fails, bad requests, and a target with no worker to run it.
 */
static void test_rpc(const char *be)
{
	const uint64_t size = 1 << 20;
	struct tnode t, i;
	struct tworker w;
	node_up(&t, be, 1, size);
	node_up(&i, be, 2, size);
	rpc_register_all(t.f);
	rpc_register_all(i.f);
	link_peer(&i, &t);
	const bool peer = true;
	const uint16_t target = 1;
	struct tnode *tn = &t;
	struct fab_stats st = { 0 };
	tw_init(&w, &i, 0);
	w.b.stats = &st;

	/* A peer's calls wait for a worker of its own. */
	struct rpc_add_req rq = add_req(0, 1);
	uint64_t old = 0;
	struct fab_rpc_reply rep = { .buf = &old, .cap = 8 };
	if (peer) {
		fab_rpc(&w.b, target, RPC_ADD, &rq, sizeof(rq), &rep);
		CHECK(fab_exec(&w.b) == 0 && rep.status == -EAGAIN && rep.len == 0);
		CHECK(*(uint64_t *)tn->base == 0);
	}
	struct rpc_server sv;
	if (peer)
		rpc_server_start(&sv, &t, 0);

	/* A reply, and its effect on the region. */
	*(uint64_t *)tn->base = 40;
	fab_rpc(&w.b, target, RPC_ADD, &rq, sizeof(rq), &rep);
	CHECK(fab_exec(&w.b) == 0);
	CHECKV(rep.status == 0 && rep.len == 8 && old == 40, "add: status %d len %u old %llu",
	       rep.status, rep.len, (unsigned long long)old);
	CHECK(*(uint64_t *)tn->base == 41);

	/* Ordering on one endpoint: the call sees the WRITE before it; the
	 * READ and CAS after it see its effect (a second phase: two round
	 * trips, one RPC). */
	uint64_t five = 5, seen = 0, cas_old = 0;
	st = (struct fab_stats){ 0 };
	fab_write(&w.b, target, 64, &five, 8);
	rq = add_req(64, 1);
	fab_rpc(&w.b, target, RPC_ADD, &rq, sizeof(rq), &rep);
	fab_read(&w.b, target, 64, &seen, 8);
	fab_cas(&w.b, target, 64, 6, 100, &cas_old);
	CHECK(fab_exec(&w.b) == 0);
	CHECKV(old == 5 && seen == 6 && cas_old == 6 && region_word(tn->base, 64) == 100,
	       "order: rpc saw %llu, read %llu, cas %llu", (unsigned long long)old,
	       (unsigned long long)seen, (unsigned long long)cas_old);
	CHECK(st.verbs[FAB_RPC] == 1 && st.verbs[FAB_WRITE] == 1 && st.round_trips == 2);

	/* Batching: consecutive calls to one node travel in one message (one
	 * round trip, one doorbell on tcp). */
	enum { NB = 8 };
	struct rpc_add_req rqs[NB];
	uint64_t olds[NB];
	struct fab_rpc_reply reps[NB];
	st = (struct fab_stats){ 0 };
	uint64_t bells = fab_worker_doorbells(w.fw);
	for (int k = 0; k < NB; k++) {
		rqs[k] = add_req(128 + 8 * (uint64_t)k, (uint64_t)k + 1);
		reps[k] = (struct fab_rpc_reply){ .buf = &olds[k], .cap = 8 };
		fab_rpc(&w.b, target, RPC_ADD, &rqs[k], sizeof(rqs[k]), &reps[k]);
	}
	CHECK(fab_exec(&w.b) == 0);
	bool all = true;
	for (int k = 0; k < NB; k++)
		all &= reps[k].status == 0 && olds[k] == 0 &&
		       region_word(tn->base, 128 + 8 * k) == (uint64_t)k + 1;
	CHECK(all);
	CHECK(st.round_trips == 1 && st.verbs[FAB_RPC] == NB);
	if (peer)
		CHECKV(fab_worker_doorbells(w.fw) == bells + 1, "%llu doorbells for one batch",
		       (unsigned long long)(fab_worker_doorbells(w.fw) - bells));

	/* A handler that fails answers its error and fails nothing else; so
	 * does an id with no handler; a reply larger than its buffer is
	 * refused. */
	char echo[300], back[300];
	for (int k = 0; k < 300; k++)
		echo[k] = (char)k;
	struct fab_rpc_reply rf = { .buf = back, .cap = 300 }, ru = rf, re = rf, rs = rf;
	rq = add_req(0, 1);
	fab_rpc(&w.b, target, RPC_FAIL, NULL, 0, &rf);
	fab_rpc(&w.b, target, RPC_UNSET, NULL, 0, &ru);
	fab_rpc(&w.b, target, RPC_ADD, &rq, sizeof(rq), &rep);
	CHECK(fab_exec(&w.b) == 0);
	CHECKV(rf.status == -EPERM && ru.status == -EOPNOTSUPP && rep.status == 0 && old == 41,
	       "fail %d, unset %d, add %d", rf.status, ru.status, rep.status);
	fab_rpc(&w.b, target, RPC_ECHO, echo, 300, &re);
	CHECK(fab_exec(&w.b) == 0 && re.status == 7 && re.len == 300 && memcmp(back, echo, 300) == 0);
	rs.cap = 100;
	fab_rpc(&w.b, target, RPC_ECHO, echo, 300, &rs);
	CHECK(fab_exec(&w.b) == 0 && rs.status == -EMSGSIZE && rs.len == 0);
	/* Requests the initiator refuses: a handler id out of range, a body
	 * or a reply buffer over FAB_RPC_MAX. */
	fab_rpc(&w.b, target, FAB_RPC_HANDLERS, NULL, 0, &rf);
	CHECK(fab_exec(&w.b) == -EINVAL);
	fab_rpc(&w.b, target, RPC_ECHO, echo, FAB_RPC_MAX + 1, &rf);
	CHECK(fab_exec(&w.b) == -EINVAL);
	/* The largest: FAB_RPC_MAX each way. */
	char *big = malloc(FAB_RPC_MAX), *bigback = malloc(FAB_RPC_MAX);
	CHECK(big && bigback);
	for (uint32_t k = 0; k < FAB_RPC_MAX; k++)
		big[k] = (char)(k * 7);
	struct fab_rpc_reply rb = { .buf = bigback, .cap = FAB_RPC_MAX };
	fab_rpc(&w.b, target, RPC_ECHO, big, FAB_RPC_MAX, &rb);
	CHECK(fab_exec(&w.b) == 0 && rb.status == 7 && rb.len == FAB_RPC_MAX &&
	      memcmp(big, bigback, FAB_RPC_MAX) == 0);
	free(big);
	free(bigback);

	/* A handler that answers later, after others that answer at once. */
	if (peer) {
		char la[3][16], lb[3][16];
		struct fab_rpc_reply rl[3];
		for (int k = 0; k < 3; k++) {
			snprintf(la[k], sizeof(la[k]), "later %d", k);
			rl[k] = (struct fab_rpc_reply){ .buf = lb[k], .cap = 16 };
			fab_rpc(&w.b, target, RPC_LATER, la[k], 16, &rl[k]);
		}
		fab_rpc(&w.b, target, RPC_ADD, &rq, sizeof(rq), &rep);
		CHECK(fab_exec(&w.b) == 0 && rep.status == 0);
		for (int k = 0; k < 3; k++)
			CHECKV(rl[k].status == 11 && rl[k].len == 16 && strcmp(lb[k], la[k]) == 0,
			       "deferred %d: status %d", k, rl[k].status);
	}

	/* The own node answers too, on the calling worker (any backend). */
	region_set(i.base, 256, 9);
	rq = add_req(256, 1);
	fab_rpc(&w.b, 2, RPC_ADD, &rq, sizeof(rq), &rep);
	CHECK(fab_exec(&w.b) == 0 && rep.status == 0 && old == 9 && region_word(i.base, 256) == 10);

	if (peer)
		rpc_server_stop(&sv);
	tw_fini(&w);
	node_down(&i);
	node_down(&t);
	printf("  %s rpc: replies, ordering, batching (%d calls, 1 round trip), failures: ok\n",
	       be, NB);
}

/*
 * Two-sided ops (FAB_OP_TWOSIDED): the ops of a tag the batch ships go in
 * one message to the target's worker, which applies them to its region as
 * the one-sided ops would; results land where the ops say, in order with
 * the one-sided ops around them, counted as RPCs of their tag.
 */
static void test_twosided(const char *be)
{
	const uint64_t size = 1 << 20;
	struct tnode t, i;
	struct tworker w;
	node_up(&t, be, 1, size);
	node_up(&i, be, 2, size);
	link_peer(&i, &t);
	struct fab_stats st = { 0 };
	tw_init(&w, &i, 0);
	w.b.stats = &st;
	enum { SHIP = 3 };
	w.b.twosided = 1u << SHIP;

	/* No worker on the target to apply them: the exec fails for it. */
	uint64_t v = 7, got = 0;
	w.b.tag = SHIP;
	fab_write(&w.b, 1, 512, &v, 8);
	CHECK(fab_exec(&w.b) != 0 && (w.b.failed & (1ull << 1)));
	CHECK(region_word(t.base, 512) == 0);
	struct rpc_server sv;
	rpc_server_start(&sv, &t, 0);

	/* Every kind in one message: one RPC, one round trip, no verb. */
	char five[5] = { 'a', 'b', 'c', 'd', 'e' }, back[21] = { 0 };
	uint64_t cas_old = 1, faa_old = 1;
	region_set(t.base, 528, 40);
	st = (struct fab_stats){ 0 };
	fab_write(&w.b, 1, 512, &v, 8);
	fab_write(&w.b, 1, 520, five, 5);
	fab_cas(&w.b, 1, 512, 7, 8, &cas_old);
	fab_faa(&w.b, 1, 528, 2, &faa_old);
	fab_read(&w.b, 1, 512, back, 21);
	CHECK(fab_exec(&w.b) == 0);
	uint64_t w0, w2;
	memcpy(&w0, back, 8);
	memcpy(&w2, back + 16, 5);
	CHECKV(cas_old == 7 && faa_old == 40 && w0 == 8 && memcmp(back + 8, five, 5) == 0 &&
		       region_word(t.base, 528) == 42,
	       "cas %llu faa %llu read %llu", (unsigned long long)cas_old,
	       (unsigned long long)faa_old, (unsigned long long)w0);
	CHECKV(st.round_trips == 1 && st.verbs[FAB_RPC] == 1 && st.verbs[FAB_CAS] == 0 &&
		       st.verbs[FAB_READ] == 0 && st.tag_rpcs[SHIP] == 1 && st.tag_verbs[SHIP] == 0,
	       "rt %llu rpcs %llu", (unsigned long long)st.round_trips,
	       (unsigned long long)st.verbs[FAB_RPC]);

	/* Ordering with one-sided ops of another tag on the same endpoint: a
	 * WRITE, the shipped CAS that needs it, a READ that sees the CAS. */
	st = (struct fab_stats){ 0 };
	v = 100;
	w.b.tag = 0;
	fab_write(&w.b, 1, 544, &v, 8);
	w.b.tag = SHIP;
	fab_cas(&w.b, 1, 544, 100, 101, &cas_old);
	w.b.tag = 0;
	fab_read(&w.b, 1, 544, &got, 8);
	CHECK(fab_exec(&w.b) == 0);
	CHECKV(cas_old == 100 && got == 101, "cas saw %llu, read %llu",
	       (unsigned long long)cas_old, (unsigned long long)got);
	CHECK(st.round_trips == 2 && st.verbs[FAB_RPC] == 1 && st.tag_verbs[0] == 2 &&
	      st.tag_rpcs[SHIP] == 1);

	/* Too big for a message: one-sided, after the message before it. */
	char *big = calloc(1, FAB_RPC_MAX);
	CHECK(big != NULL);
	big[0] = 'B';
	st = (struct fab_stats){ 0 };
	w.b.tag = SHIP;
	fab_faa(&w.b, 1, 4096, 1, NULL);
	fab_write(&w.b, 1, 8192, big, FAB_RPC_MAX);
	CHECK(fab_exec(&w.b) == 0 && t.base[8192] == 'B' && region_word(t.base, 4096) == 1);
	CHECK(st.verbs[FAB_RPC] == 1 && st.verbs[FAB_WRITE] == 1 && st.tag_verbs[SHIP] == 1);
	free(big);

	/* The own node applies its shipped ops on the calling worker. */
	region_set(i.base, 256, 9);
	fab_faa(&w.b, 2, 256, 1, &faa_old);
	CHECK(fab_exec(&w.b) == 0 && faa_old == 9 && region_word(i.base, 256) == 10);

	rpc_server_stop(&sv);
	tw_fini(&w);
	node_down(&i);
	node_down(&t);
	printf("  %s twosided: every kind in one message, ordering, size limit, own node: ok\n",
	       be);
}

struct fence_later {
	struct fab *f;
	uint16_t node;
	int ms;
};

static void *fence_later_main(void *arg)
{
	struct fence_later *fl = arg;
	sleep_ms(fl->ms);
	fab_fence(fl->f, fl->node);
	return NULL;
}

/* Two coroutines of one initiator worker, one endpoint: A's call waits
 * (deferred) for a word that B's later WRITE sets. */
struct ww_ctx {
	struct sched *s;
	struct fab_worker *fw;
	uint16_t target;
	int done;
	int rc_a, rc_b, status_a;
	uint64_t seen;
};

static void *ww_self(void *ctx) { return sched_self(((struct ww_ctx *)ctx)->s); }
static void ww_park(void *ctx) { sched_park(((struct ww_ctx *)ctx)->s); }
static void ww_unpark(void *ctx, void *h) { sched_unpark(((struct ww_ctx *)ctx)->s, h); }
static void ww_wait(void *ctx, uint64_t ns) { sched_sleep(((struct ww_ctx *)ctx)->s, ns); }

static void ww_batch(struct ww_ctx *x, struct fab_batch *b)
{
	fab_batch_init(b, x->fw,
		       (struct fab_waiter){ .wait = ww_wait, .ctx = x, .self = ww_self,
					    .park = ww_park, .unpark = ww_unpark },
		       NULL);
}

static void ww_a(struct sched *s, void *arg)
{
	(void)s;
	struct ww_ctx *x = arg;
	struct fab_batch b;
	ww_batch(x, &b);
	uint64_t off = 2048;
	struct fab_rpc_reply rep = { .buf = &x->seen, .cap = 8 };
	fab_rpc(&b, x->target, RPC_WAITWORD, &off, 8, &rep);
	x->rc_a = fab_exec(&b);
	x->status_a = rep.status;
	x->done++;
}

static void ww_b(struct sched *s, void *arg)
{
	struct ww_ctx *x = arg;
	sched_sleep(s, 50ull * 1000 * 1000); /* after A's call left */
	struct fab_batch b;
	ww_batch(x, &b);
	uint64_t one = 1;
	fab_write(&b, x->target, 2048, &one, 8);
	x->rc_b = fab_exec(&b);
	x->done++;
}

/*
 * A handler that waits (FAB_RPC_DEFER) for what a later request of the
 * same worker does: that request is served meanwhile (tcp: the NIC does
 * not hold the connection for the call), so both finish.
 */
static void test_rpc_defer_on_one_endpoint(const char *be)
{
	const uint64_t size = 1 << 20;
	struct tnode t, i;
	node_up(&t, be, 1, size);
	node_up(&i, be, 2, size);
	rpc_register_all(t.f);
	CHECK(fab_rpc_register(t.f, RPC_WAITWORD, "waitword", h_waitword, t.base) == 0);
	link_peer(&i, &t);
	struct rpc_server sv;
	rpc_server_start(&sv, &t, 0);
	struct ww_ctx x = { .s = sched_create(4, 64 * 1024), .target = 1 };
	x.fw = fab_worker_create(i.f, 0);
	CHECK(x.s && x.fw);
	CHECK(sched_spawn(x.s, ww_a, &x) == 0 && sched_spawn(x.s, ww_b, &x) == 0);
	uint64_t deadline = now_ns() + 5ull * 1000000000ull;
	while (x.done < 2 && now_ns() < deadline) {
		sched_run(x.s);
		fab_worker_flush(x.fw);
		int fds[FAB_MAX_NODES];
		struct pollfd pfd[FAB_MAX_NODES];
		int k = fab_worker_fds(x.fw, fds, FAB_MAX_NODES);
		for (int j = 0; j < k; j++)
			pfd[j] = (struct pollfd){ .fd = fds[j], .events = POLLIN };
		poll(pfd, (nfds_t)k, 5);
		fab_worker_poll(x.fw);
	}
	CHECKV(x.done == 2 && x.rc_a == 0 && x.status_a == 0 && x.seen == 1 && x.rc_b == 0,
	       "a call waiting for a later write of its endpoint: %d of 2 done, call %d/%d saw "
	       "%llu, write %d", x.done, x.rc_a, x.status_a, (unsigned long long)x.seen, x.rc_b);
	rpc_server_stop(&sv);
	fab_worker_destroy(x.fw);
	sched_destroy(x.s);
	node_down(&i);
	node_down(&t);
	printf("  %s rpc: a deferred call and the later write it waits for, on one endpoint\n", be);
}

/* fab_exec of what w's batch holds, on a thread of its own. */
static void *exec_main(void *arg)
{
	struct tworker *w = arg;
	CHECK(fab_exec(&w->b) == 0);
	return NULL;
}

/* One initiator worker's call, on a thread of its own. */
struct rpc_caller {
	struct tnode *n;
	int id;
	uint16_t target;
	uint64_t off;
	int rc, status;
	pthread_t th;
};

static void *rpc_caller_main(void *arg)
{
	struct rpc_caller *rc = arg;
	struct tworker w;
	tw_init(&w, rc->n, rc->id);
	struct rpc_add_req rq = add_req(rc->off, 1);
	uint64_t old = 0;
	struct fab_rpc_reply rep = { .buf = &old, .cap = 8 };
	fab_rpc(&w.b, rc->target, RPC_ADD, &rq, sizeof(rq), &rep);
	rc->rc = fab_exec(&w.b);
	rc->status = rep.status;
	tw_fini(&w);
	return NULL;
}

/*
 * Wake-ups a target's worker must not lose while it sleeps with no
 * timeout: calls of 14 initiator workers that arrive while it is busy (on
 * shm more doorbells than its socket queues: the kernel drops the rest),
 * and a reply that found its ring full (two 64 KiB replies in one part).
 * And on tcp, a call whose reply was lost: the WRITE after it in the batch
 * is not applied (it must not overtake a call that may still run there).
 */
static void test_rpc_wakeups(const char *be)
{
	const uint64_t size = 1 << 20;
	struct tnode t, i;
	node_up(&t, be, 1, size);
	node_up(&i, be, 2, size);
	rpc_register_all(t.f);
	link_peer(&i, &t);
	struct rpc_server sv;
	rpc_server_start(&sv, &t, 0);
	__atomic_store_n(&sv.wait_ms, -1, __ATOMIC_RELAXED); /* its thread reads it (TSan) */
	struct tworker w;
	tw_init(&w, &i, 0);
	struct fab_rpc_reply rs = { .cap = 0 };
	fab_rpc(&w.b, 1, RPC_SLEEP, NULL, 0, &rs); /* sleeps here: no timeout from now */
	CHECK(fab_exec(&w.b) == 0 && rs.status == 0);

	enum { NC = 14 };
	struct rpc_caller cs[NC];
	fab_rpc(&w.b, 1, RPC_SLEEP, NULL, 0, &rs);
	pthread_t th;
	/* the target busy for 300 ms while the callers post */
	CHECK(pthread_create(&th, NULL, exec_main, &w) == 0);
	sleep_ms(50);
	for (int k = 0; k < NC; k++) {
		cs[k] = (struct rpc_caller){ .n = &i, .id = k + 1, .target = 1, .off = 512 + 8 * (uint64_t)k };
		CHECK(pthread_create(&cs[k].th, NULL, rpc_caller_main, &cs[k]) == 0);
	}
	for (int k = 0; k < NC; k++)
		pthread_join(cs[k].th, NULL);
	pthread_join(th, NULL);
	bool ok = true;
	for (int k = 0; k < NC; k++)
		ok &= cs[k].rc == 0 && cs[k].status == 0 && region_word(t.base, 512 + 8 * k) == 1;
	CHECK(ok);

	/* Two 64 KiB replies in one part: the second waits for room. */
	char *r1 = malloc(FAB_RPC_MAX), *r2 = malloc(FAB_RPC_MAX);
	struct fab_rpc_reply b1 = { .buf = r1, .cap = FAB_RPC_MAX }, b2 = b1;
	b2.buf = r2;
	fab_rpc(&w.b, 1, RPC_BIG, NULL, 0, &b1);
	fab_rpc(&w.b, 1, RPC_BIG, NULL, 0, &b2);
	CHECK(fab_exec(&w.b) == 0 && b1.status == 0 && b2.status == 0 &&
	      b1.len == FAB_RPC_MAX && b2.len == FAB_RPC_MAX && r1[FAB_RPC_MAX - 1] == 0x5a &&
	      r2[0] == 0x5a);
	free(r1);
	free(r2);

	if (strcmp(be, "tcp") == 0) {
		uint64_t v = 77;
		region_set(t.base, 1024, 5);
		CHECK(fab_lose_replies(i.f, 1, 1, 0) == 0);
		fab_rpc(&w.b, 1, RPC_SLEEP, NULL, 0, &rs);
		fab_write(&w.b, 1, 1024, &v, 8);
		CHECK(fab_exec(&w.b) < 0 && rs.status < 0);
		sleep_ms(400); /* the call has run there by now */
		CHECK(region_word(t.base, 1024) == 5);
		fab_peer_back(i.f, 1);
	}
	rpc_server_stop(&sv);
	tw_fini(&w);
	node_down(&i);
	node_down(&t);
	printf("  %s rpc: no wake-up lost (%d callers on a busy target, a reply that waited for "
	       "room)\n", be, NC);
}

/* A target that dies while a call of ours runs there: the exec fails,
 * and the reply says so (tcp: the connection breaks; shm: the target's
 * pidfd). */
static void test_rpc_peer_death(const char *be)
{
	struct pd_shared *sh = shared_alloc(sizeof(*sh));
	pid_t pid = spawn();
	if (pid == 0) {
		struct tnode n;
		node_up(&n, be, 1, 1 << 20);
		rpc_register_all(n.f);
		struct rpc_server sv;
		rpc_server_start(&sv, &n, 0);
		snprintf(sh->addr, sizeof(sh->addr), "%s", n.addr);
		snprintf(sh->path, sizeof(sh->path), "%s", n.path);
		__atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
		for (;;)
			pause();
	}
	uint64_t deadline = now_ns() + 10ull * 1000000000ull;
	while (!__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE)) {
		CHECK(now_ns() < deadline);
		sleep_ms(2);
	}
	int peer_slot = tmp_register(sh->path);
	struct tnode me;
	node_up(&me, be, 2, 1 << 20);
	struct fab_peer_info pi = { .node = 1, .region_size = 1 << 20 };
	snprintf(pi.addr, sizeof(pi.addr), "%s", sh->addr);
	snprintf(pi.region_path, sizeof(pi.region_path), "%s", sh->path);
	char err[256] = "";
	CHECKV(fab_attach_peer(me.f, &pi, err, sizeof(err)) == 0, "%s", err);
	struct tworker w;
	tw_init(&w, &me, 0);
	struct rpc_add_req rq = add_req(0, 1);
	uint64_t old = 99;
	struct fab_rpc_reply rep = { .buf = &old, .cap = 8 };
	fab_rpc(&w.b, 1, RPC_ADD, &rq, sizeof(rq), &rep);
	CHECK(fab_exec(&w.b) == 0 && rep.status == 0 && old == 0);

	/* A call that never answers, and the configuration takes its target
	 * out (fab_fence): the exec fails then. */
	struct fab_rpc_reply hrep = { .buf = &old, .cap = 8 };
	fab_rpc(&w.b, 1, RPC_HOLD, NULL, 0, &hrep);
	struct fence_later fl = { .f = me.f, .node = 1, .ms = 200 };
	pthread_t th;
	CHECK(pthread_create(&th, NULL, fence_later_main, &fl) == 0);
	uint64_t t0 = now_ns();
	int rc = fab_exec(&w.b);
	double ms = (double)(now_ns() - t0) / 1e6;
	pthread_join(th, NULL);
	CHECKV(rc == -EHOSTDOWN && hrep.status == -EHOSTDOWN && ms >= 150 && ms < 10000,
	       "call on a fenced target: exec %d, status %d after %.0f ms", rc, hrep.status, ms);
	printf("  %s rpc: a call on a target fenced meanwhile failed with %d after %.0f ms\n", be,
	       rc, ms);
	fab_unfence(me.f, 1);
	fab_peer_back(me.f, 1);

	/* Another (its worker still holds the first), then the target's death. */
	struct { struct tworker *w; struct fab_rpc_reply rep; int rc, done; } hold = { .w = &w };
	hold.rep = (struct fab_rpc_reply){ .buf = &old, .cap = 8 };
	fab_rpc(&w.b, 1, RPC_HOLD, NULL, 0, &hold.rep);
	pid_t killer = spawn();
	if (killer == 0) {
		sleep_ms(200);
		kill(pid, SIGKILL);
		_exit(0);
	}
	t0 = now_ns();
	rc = fab_exec(&w.b);
	ms = (double)(now_ns() - t0) / 1e6;
	CHECK(waitpid(killer, NULL, 0) == killer);
	CHECK(waitpid(pid, NULL, 0) == pid);
	nchildren = 0;
	CHECKV(rc < 0 && hold.rep.status < 0 && ms >= 150 && ms < 10000,
	       "call on a dying target: exec %d, status %d after %.0f ms", rc, hold.rep.status, ms);
	printf("  %s rpc: a call on a target that died failed with %d after %.0f ms\n", be, rc, ms);

	/* shm: the target restarts on the same region file (a new process,
	 * new rings) and says HELLO (fab_peer_back): calls reach it again. */
	if (strcmp(be, "shm") == 0) {
		__atomic_store_n(&sh->ready, 0, __ATOMIC_RELEASE);
		pid_t again = spawn();
		if (again == 0) {
			struct tnode n;
			node_up_at(&n, be, 1, 1 << 20, sh->path);
			rpc_register_all(n.f);
			struct rpc_server sv;
			rpc_server_start(&sv, &n, 0);
			__atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
			for (;;)
				pause();
		}
		deadline = now_ns() + 10ull * 1000000000ull;
		while (!__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE)) {
			CHECK(now_ns() < deadline);
			sleep_ms(2);
		}
		fab_rpc(&w.b, 1, RPC_ADD, &rq, sizeof(rq), &rep);
		CHECK(fab_exec(&w.b) == -EHOSTDOWN); /* its old rings, until its HELLO */
		fab_peer_back(me.f, 1);
		old = 99;
		fab_rpc(&w.b, 1, RPC_ADD, &rq, sizeof(rq), &rep);
		rc = fab_exec(&w.b);
		CHECKV(rc == 0 && rep.status == 0 && old == 1, "after the restart: exec %d, status "
		       "%d, old %llu", rc, rep.status, (unsigned long long)old);
		kill(again, SIGKILL);
		CHECK(waitpid(again, NULL, 0) == again);
		nchildren = 0;
		printf("  %s rpc: a restarted target answers again after its HELLO\n", be);
	}
	tw_fini(&w);
	node_down(&me);
	unlink(sh->path);
	if (peer_slot >= 0)
		tmp_paths[peer_slot][0] = '\0';
	munmap(sh, sizeof(*sh));
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, on_alarm);
	signal(SIGTERM, on_alarm);
	signal(SIGINT, on_alarm);
	signal(SIGHUP, on_alarm);
	signal(SIGSEGV, on_crash);
	signal(SIGBUS, on_crash);
	signal(SIGABRT, on_crash);
	alarm(110); /* under ctest's 120 s, so children are killed by us */
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* `test_fabric [shm|tcp|all] [case]` runs one backend and one case. */
	const char *only = argc > 1 && strcmp(argv[1], "all") != 0 ? argv[1] : NULL;
	const char *only_case = argc > 2 ? argv[2] : NULL;
	static const char *backends[] = { "shm", "tcp" };
	for (int i = 0; i < 2; i++) {
		const char *be = backends[i];
		if (only && strcmp(only, be) != 0)
			continue;
		bool tcp = strcmp(be, "tcp") == 0;
		printf("backend %s\n", be);
		if (want(only_case, "errors"))
			test_errors(be);
		if (want(only_case, "journal"))
			test_journal(be);
		if (want(only_case, "fence"))
			test_fence(be);
		if (want(only_case, "order"))
			test_order(be);
		if (want(only_case, "outstanding"))
			test_outstanding(be);
		if (want(only_case, "contention"))
			test_contention(be, tcp ? 10000 : 100000, 400000);
		if (want(only_case, "torn"))
			test_torn_raw(be, 2.0);
		if (want(only_case, "double-read"))
			test_double_read(be, 3.0);
		if (want(only_case, "rpc"))
			test_rpc(be);
		if (want(only_case, "twosided"))
			test_twosided(be);
		if (want(only_case, "rpc-wakeups"))
			test_rpc_wakeups(be);
		if (want(only_case, "rpc-defer"))
			test_rpc_defer_on_one_endpoint(be);
		if (want(only_case, "rpc-peer-death"))
			test_rpc_peer_death(be);
		if (tcp && want(only_case, "remote-flush"))
			test_remote_flush(be);
		if (tcp && want(only_case, "peer-death"))
			test_peer_death(be);
		if (tcp && want(only_case, "peer-close"))
			test_peer_close(be);
		if (tcp && want(only_case, "listener"))
			test_listener(be);
	}
	remove_tmp();
	printf("test_fabric: all passed\n");
	return 0;
}
