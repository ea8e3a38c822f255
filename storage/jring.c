/*
 * jring.c: the journal ring of a cluster node's write-ahead log (st.h,
 * "the journal ring"; storage/wal.c has the log itself).
 *
 * On a shm cluster a peer writes a node's region with its own CPU, so the
 * node's log cannot be fed by the node's process alone. Each node with a
 * log keeps a ring in a shared file, /dev/shm/<its region copy's name>.journal,
 * which every process that writes the region maps: the owner's workers and
 * every peer. A writer takes the ring's mutex (robust and process-shared:
 * a writer killed while holding it does not stop the others), applies its
 * op to the region, appends the note (offset, the bytes the op left) and
 * unlocks: the same step as the standalone log's (wal.c invariant (1)),
 * so the ring is the real order of every write to the region, whoever
 * made it.
 *
 * The owner's log drains the ring without the mutex (one consumer; tail is
 * published per note with release), appends what it took as a record,
 * syncs, and publishes `durable`: the ring position every byte before
 * which is in the log. A peer that needs its writes durable reads the tail
 * after them and waits for durable to pass it (st_jring_wait): it raises
 * `want`, bumps the owner's `kick` futex word, and sleeps on `dseq`, which
 * the owner bumps and wakes at each drain and each publish. Futexes on a
 * shared file mapping work across processes.
 *
 * Invariants:
 * (1) durable <= head <= tail, all monotonic (bytes since the ring was
 *     made): the owner takes [head, tail) and publishes it durable once
 *     its record is synced; [head, tail) holds whole notes; a note is
 *     visible to the drain only once it is whole (tail stored with
 *     release after it).
 * (2) A writer waits for room while holding the mutex; the drain never
 *     takes the mutex, so the wait always ends while the owner lives. The
 *     owner's checkpoint cut, which must take the mutex, drains while it
 *     tries (wal.c, ring_take). Once the owner is gone (its creating
 *     thread held `alive` until it died), the ring refuses writers
 *     (st_jring_lock: the fabric fails their ops as a node that does not
 *     answer) and waiters: the region behind it would keep their writes
 *     in memory, which the owner's next run takes whole, but never in a
 *     log, and that run's checkpoint could hold half of them.
 * (3) The owner makes a new file, under the same name, at each start:
 *     peers that still map the old one see it as the dead owner's.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "storage/st_internal.h"

#define JRING_MAGIC 0x474e49524a564b52ull /* "RKVJRING" */
#define JRING_DATA 4096u                  /* the notes start a page in */
#define JRING_ENTRY 16u                   /* { off, len } before the bytes */

struct jring_hdr {
	uint64_t magic;
	uint64_t cap;           /* data bytes, a multiple of 8 */
	int32_t owner_pid;      /* for people reading the file */
	uint32_t closed;        /* the owner closed the ring (a clean stop) */
	pthread_mutex_t mu;     /* writers: apply, note (robust, pshared) */
	/* Held by the owner's creating thread for as long as it lives (robust,
	 * pshared): a trylock that gets it means the owner is gone (invariant
	 * (2)). The kernel marks it when the owner dies, before its process is
	 * even reaped. */
	pthread_mutex_t alive;
	uint32_t dead;          /* an owner found gone (sticky) */
	uint64_t tail;          /* notes published (release; under mu) */
	uint64_t head;          /* drained by the owner (release) */
	uint64_t durable;       /* in the log (synced, or written: everysec) */
	uint64_t want;          /* the largest position a peer waits for */
	uint32_t kick;          /* futex: the owner's flusher has work */
	uint32_t dseq;          /* futex: head or durable moved */
	uint32_t dropped;       /* notes dropped because the owner was gone */
};
static_assert(sizeof(struct jring_hdr) <= JRING_DATA, "ring header fits its page");

struct st_jring {
	struct jring_hdr *h;
	char *data;
	size_t maplen;
	bool owner;
	char path[PATH_MAX];
	struct st_jring *next_retired; /* st_jring_slot_set */
	dev_t dev;              /* the file's identity (st_jring_is) */
	ino_t ino;
};

static long futex(uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, w, op, val, ts, NULL, 0);
}

static void wake_all(uint32_t *w)
{
	__atomic_add_fetch(w, 1, __ATOMIC_RELEASE);
	(void)futex(w, FUTEX_WAKE, INT_MAX, NULL);
}

/* Sleep on *w while it still reads seen, at most ms milliseconds. */
static void sleep_on(uint32_t *w, uint32_t seen, int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	(void)futex(w, FUTEX_WAIT, seen, &ts);
}

static void raise_want(struct jring_hdr *h, uint64_t pos)
{
	uint64_t w = __atomic_load_n(&h->want, __ATOMIC_RELAXED);
	while (w < pos && !__atomic_compare_exchange_n(&h->want, &w, pos, false, __ATOMIC_RELEASE,
						       __ATOMIC_RELAXED))
		;
}

static bool owner_alive(struct jring_hdr *h)
{
	if (__atomic_load_n(&h->closed, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&h->dead, __ATOMIC_ACQUIRE))
		return false;
	int rc = pthread_mutex_trylock(&h->alive);
	if (rc == EBUSY)
		return true;
	if (rc == EOWNERDEAD)
		pthread_mutex_consistent(&h->alive);
	if (rc == 0 || rc == EOWNERDEAD)
		pthread_mutex_unlock(&h->alive);
	__atomic_store_n(&h->dead, 1, __ATOMIC_RELEASE);
	return false;
}

void st_jring_path(const char *region_path, char *out, size_t len)
{
	size_t n = strlen(region_path);
	const char *suf = ".region";
	size_t k = strlen(suf);
	if (n >= k && strcmp(region_path + n - k, suf) == 0)
		n -= k;
	snprintf(out, len, "%.*s.journal", (int)n, region_path);
}

static int map_ring(const char *path, int fd, struct st_jring **out, bool owner)
{
	struct stat sb;
	if (fstat(fd, &sb) != 0)
		return -errno;
	if ((uint64_t)sb.st_size < JRING_DATA + 4096u)
		return -EINVAL;
	void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	struct st_jring *j = calloc(1, sizeof(*j));
	if (!j) {
		munmap(m, (size_t)sb.st_size);
		return -ENOMEM;
	}
	j->h = m;
	j->data = (char *)m + JRING_DATA;
	j->maplen = (size_t)sb.st_size;
	j->owner = owner;
	j->dev = sb.st_dev;
	j->ino = sb.st_ino;
	snprintf(j->path, sizeof(j->path), "%s", path);
	if (!owner && (j->h->magic != JRING_MAGIC ||
		       j->h->cap + JRING_DATA > (uint64_t)sb.st_size)) {
		munmap(m, j->maplen);
		free(j);
		return -EINVAL;
	}
	*out = j;
	return 0;
}

int st_jring_create(const char *path, uint64_t cap, struct st_jring **out)
{
	cap &= ~7ull;
	(void)unlink(path); /* invariant (3): peers of the last owner keep its file */
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	int rc = 0;
	if (ftruncate(fd, (off_t)(JRING_DATA + cap)) != 0) {
		rc = -errno;
		goto out;
	}
	struct st_jring *j = NULL;
	if ((rc = map_ring(path, fd, &j, true)) != 0)
		goto out;
	struct jring_hdr *h = j->h;
	h->cap = cap;
	h->owner_pid = (int32_t)getpid();
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&h->mu, &a);
	pthread_mutex_init(&h->alive, &a);
	pthread_mutexattr_destroy(&a);
	pthread_mutex_lock(&h->alive); /* for the life of this thread: owner_alive */
	__atomic_store_n(&h->magic, JRING_MAGIC, __ATOMIC_RELEASE);
	*out = j;
out:
	close(fd);
	if (rc)
		(void)unlink(path);
	return rc;
}

int st_jring_open(const char *path, struct st_jring **out)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = map_ring(path, fd, out, false);
	close(fd);
	return rc;
}

bool st_jring_is(const struct st_jring *j, const char *path)
{
	struct stat sb;
	return j && stat(path, &sb) == 0 && sb.st_dev == j->dev && sb.st_ino == j->ino;
}

void st_jring_close(struct st_jring *j)
{
	if (!j)
		return;
	if (j->owner) {
		__atomic_store_n(&j->h->closed, 1, __ATOMIC_RELEASE);
		wake_all(&j->h->dseq);
		(void)unlink(j->path);
	}
	munmap(j->h, j->maplen);
	free(j);
}

/* ---- writers ---- */

int st_jring_lock(struct st_jring *j)
{
	/* A ring whose owner is gone takes no writes: the region behind it
	 * would keep them in memory, and the owner's next run takes that
	 * memory, but not in its log (invariant (2)). */
	if (!j->owner && !owner_alive(j->h))
		return -EHOSTDOWN;
	int rc = pthread_mutex_lock(&j->h->mu);
	if (rc == EOWNERDEAD) /* its writer died mid-op: tail still ends at a whole note */
		pthread_mutex_consistent(&j->h->mu);
	return 0;
}

bool st_jring_trylock(struct st_jring *j)
{
	int rc = pthread_mutex_trylock(&j->h->mu);
	if (rc == EOWNERDEAD) {
		pthread_mutex_consistent(&j->h->mu);
		return true;
	}
	return rc == 0;
}

uint64_t st_jring_unlock(struct st_jring *j)
{
	uint64_t t = j->h->tail;
	pthread_mutex_unlock(&j->h->mu);
	return t;
}

static void copy_in(struct st_jring *j, uint64_t pos, const void *src, uint64_t n)
{
	uint64_t cap = j->h->cap, at = pos % cap, first = n < cap - at ? n : cap - at;
	memcpy(j->data + at, src, first);
	if (n > first)
		memcpy(j->data, (const char *)src + first, n - first);
}

static void copy_out(const struct st_jring *j, uint64_t pos, void *dst, uint64_t n)
{
	uint64_t cap = j->h->cap, at = pos % cap, first = n < cap - at ? n : cap - at;
	memcpy(dst, j->data + at, first);
	if (n > first)
		memcpy((char *)dst + first, j->data, n - first);
}

void st_jring_note(struct st_jring *j, uint64_t off, const void *src, uint32_t len)
{
	struct jring_hdr *h = j->h;
	uint64_t pad = ((uint64_t)len + 7u) & ~7ull, need = JRING_ENTRY + pad;
	uint64_t tail = h->tail;
	if (need > h->cap) {
		__atomic_add_fetch(&h->dropped, 1, __ATOMIC_RELAXED); /* never fits: the flush fails */
		return;
	}
	/* Invariant (2): wait for the drain, the mutex held. */
	while (tail + need - __atomic_load_n(&h->head, __ATOMIC_ACQUIRE) > h->cap) {
		uint32_t seen = __atomic_load_n(&h->dseq, __ATOMIC_ACQUIRE);
		if (tail + need - __atomic_load_n(&h->head, __ATOMIC_ACQUIRE) <= h->cap)
			break;
		if (!j->owner && !owner_alive(h)) {
			__atomic_add_fetch(&h->dropped, 1, __ATOMIC_RELAXED);
			return;
		}
		raise_want(h, tail + need);
		wake_all(&h->kick);
		sleep_on(&h->dseq, seen, 50);
	}
	uint64_t e[2] = { off, len };
	copy_in(j, tail, e, JRING_ENTRY);
	copy_in(j, tail + JRING_ENTRY, src, len);
	if (pad > len) {
		static const char zero[8];
		copy_in(j, tail + JRING_ENTRY + len, zero, pad - len);
	}
	__atomic_store_n(&h->tail, tail + need, __ATOMIC_RELEASE);
}

/* ---- the owner ---- */

uint64_t st_jring_tail(const struct st_jring *j)
{
	return __atomic_load_n(&j->h->tail, __ATOMIC_ACQUIRE);
}

uint64_t st_jring_durable(const struct st_jring *j)
{
	return __atomic_load_n(&j->h->durable, __ATOMIC_ACQUIRE);
}

uint32_t st_jring_dropped(const struct st_jring *j)
{
	return __atomic_load_n(&j->h->dropped, __ATOMIC_RELAXED);
}

int st_jring_take(struct st_jring *j, char **buf, size_t *n, size_t *cap, uint64_t *upto)
{
	struct jring_hdr *h = j->h;
	uint64_t head = h->head, tail = __atomic_load_n(&h->tail, __ATOMIC_ACQUIRE);
	*upto = tail;
	if (tail == head)
		return 0;
	uint64_t k = tail - head;
	if (*n + k > *cap) {
		size_t c = *cap ? *cap : (1u << 16);
		while (c < *n + k)
			c *= 2;
		char *p = realloc(*buf, c);
		if (!p)
			return -ENOMEM;
		*buf = p;
		*cap = c;
	}
	copy_out(j, head, *buf + *n, k);
	*n += k;
	__atomic_store_n(&h->head, tail, __ATOMIC_RELEASE);
	wake_all(&h->dseq); /* room for writers waiting in st_jring_note */
	return 0;
}

void st_jring_publish(struct st_jring *j, uint64_t upto)
{
	struct jring_hdr *h = j->h;
	if (upto > __atomic_load_n(&h->durable, __ATOMIC_RELAXED))
		__atomic_store_n(&h->durable, upto, __ATOMIC_RELEASE);
	wake_all(&h->dseq);
}

bool st_jring_wanted(const struct st_jring *j)
{
	return __atomic_load_n(&j->h->want, __ATOMIC_ACQUIRE) >
	       __atomic_load_n(&j->h->durable, __ATOMIC_ACQUIRE);
}

uint32_t st_jring_kicks(const struct st_jring *j)
{
	return __atomic_load_n(&j->h->kick, __ATOMIC_ACQUIRE);
}

void st_jring_kick(struct st_jring *j)
{
	wake_all(&j->h->kick);
}

void st_jring_sleep(struct st_jring *j, uint32_t seen, int ms)
{
	sleep_on(&j->h->kick, seen, ms);
}

/* ---- peers ---- */

int st_jring_wait(struct st_jring *j, uint64_t pos, int timeout_ms)
{
	struct jring_hdr *h = j->h;
	raise_want(h, pos);
	wake_all(&h->kick);
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (__atomic_load_n(&h->durable, __ATOMIC_ACQUIRE) < pos) {
		uint32_t seen = __atomic_load_n(&h->dseq, __ATOMIC_ACQUIRE);
		if (__atomic_load_n(&h->durable, __ATOMIC_ACQUIRE) >= pos)
			break;
		if (!owner_alive(h))
			return -EHOSTDOWN;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long ms = (now.tv_sec - t0.tv_sec) * 1000L + (now.tv_nsec - t0.tv_nsec) / 1000000L;
		if (ms >= timeout_ms)
			return -ETIMEDOUT;
		sleep_on(&h->dseq, seen, 20);
	}
	return 0;
}

/* ---- the fabric's side ---- */

/* The ring the calling thread holds (the fabric never nests journals:
 * rdma/fab.c, apply_batch). */
static __thread struct st_jring *held;

static int slot_lock(void *arg)
{
	struct st_jring_slot *s = arg;
	held = __atomic_load_n(&s->ring, __ATOMIC_ACQUIRE);
	if (held && st_jring_lock(held) != 0) {
		held = NULL;
		return -EHOSTDOWN;
	}
	return 0;
}

static void slot_note(void *arg, uint64_t off, const void *src, uint32_t len)
{
	(void)arg;
	if (held)
		st_jring_note(held, off, src, len);
}

static void slot_unlock(void *arg)
{
	(void)arg;
	if (held)
		(void)st_jring_unlock(held);
	held = NULL;
}

static int slot_up(void *arg)
{
	struct st_jring_slot *s = arg;
	struct st_jring *j = __atomic_load_n(&s->ring, __ATOMIC_ACQUIRE);
	return !j || j->owner || owner_alive(j->h) ? 0 : -EHOSTDOWN;
}

void st_jring_slot_journal(struct st_jring_slot *s, struct fab_journal *out)
{
	*out = (struct fab_journal){ .lock = slot_lock, .note = slot_note,
				     .unlock = slot_unlock, .up = slot_up, .arg = s };
}

void st_jring_slot_set(struct st_jring_slot *s, struct st_jring *j)
{
	struct st_jring *old = __atomic_exchange_n(&s->ring, j, __ATOMIC_ACQ_REL);
	if (old && old != j) {
		/* A writer may still be in it: keep it mapped until the slot
		 * goes (st_jring_slot_clear). */
		old->next_retired = s->retired;
		s->retired = old;
	}
}

void st_jring_slot_clear(struct st_jring_slot *s, bool owned)
{
	struct st_jring *j = __atomic_exchange_n(&s->ring, NULL, __ATOMIC_ACQ_REL);
	if (j && !owned)
		st_jring_close(j);
	while (s->retired) {
		struct st_jring *r = s->retired;
		s->retired = r->next_retired;
		st_jring_close(r);
	}
}
