/*
 * wal.c: the write-ahead log of persistence power where the region's
 * medium is not persistent memory (st.h, "the write-ahead log"; DESIGN.md
 * section 9).
 *
 * The region is mapped from a volatile copy in /dev/shm. What survives a
 * power cut is dir/node-<id>.region, the last checkpoint (a region image
 * whose header names the first log segment after it: wal_gen), and the
 * log segments dir/node-<id>-<gen>.wal from that one on. The log is
 * physical: every write to the region that the fabric applies (WRITE, a
 * CAS that swapped, FAA) is noted as (offset, bytes) under w->lock, in the
 * same critical section as the write itself (the fabric's journal,
 * rdma/fab.h). So the log is one order of all writes to the region, the
 * order they happened in, and any prefix of it rebuilds the region as it
 * was at one moment: what a kill -9 at that moment would have left, which
 * the undo log's recovery already settles (roll back what was in flight,
 * release every lock).
 *
 * A flush (the group-commit thread, cc/durable.c) takes what was noted,
 * frames it as one record (header with a checksum over the payload),
 * appends it to the current segment and, when asked, calls fdatasync: one
 * sequential write and one sync for every commit of the round.
 *
 * A checkpoint is cut by a flush once `checkpoint_bytes` of log were
 * written since the last one: the log moves on to a new segment, and the
 * checkpoint thread copies the region while writers go on (a fuzzy copy:
 * each word old or new, a multi-word write possibly half in), syncs the
 * log over every write the copy may have seen, and writes the copy to
 * node-<id>.region.tmp, synced and renamed over node-<id>.region; then the
 * segments before the new one go. Replay from the new segment rewrites
 * every write made after the cut, so whatever the copy caught of them,
 * the region ends as the log says (invariant (5)).
 * Replay starts from the checkpoint and applies the segments from its
 * wal_gen in order; the first record that is short or fails its checksum
 * ends the log (a torn tail: it is ignored and reported).
 *
 * Invariants:
 * (1) A write to the region and its log entry are one step under w->lock:
 *     two writes to the same bytes are logged in the order they were made.
 * (2) A record reaches a segment only after every record before it (one
 *     thread writes them, under w->flush_lock, in the order they were
 *     taken), and a new segment is started only after the previous one is
 *     synced: a durable record has every earlier record durable.
 * (3) The segments named by a checkpoint (wal_gen and later) are never
 *     removed before a newer checkpoint is durable under the name.
 * (4) power-sim: the files change only at persists (a synced flush, a
 *     checkpoint's data, its rename); a cut writes half of one and kills
 *     the process, so the files hold exactly what a power cut would have
 *     left.
 * (5) A checkpoint's copy starts after its cut and reaches the file only
 *     once the log is durable past every write made before the copy
 *     ended: each such write was noted when it was made (invariant (1)),
 *     and a batch that noted part of itself when the copy ended holds the
 *     log's lock to its end, which the sync's take waits for. So replay
 *     from the cut's segment rewrites every byte the copy may hold half
 *     of. Words no log holds are lock words (recovery resets them) and a
 *     single-node commit's undo records, whose retire its batch logs.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "storage/st_internal.h"

#define WAL_MAGIC 0x4c41574b56434b52ull /* "RKCVKWAL" */
#define WAL_HDR 32u
#define WAL_ENTRY 16u
#define WAL_PAGE 4096u
#define WAL_RING_BYTES (32ull << 20) /* a cluster node's journal ring */

/* A record: header, then entries { off, len, 0, bytes padded to 8 }. */
struct wal_hdr {
	uint64_t magic;
	uint64_t len;  /* payload bytes */
	uint64_t seq;  /* records before it in the stream, since the region began */
	uint64_t sum;  /* wal_sum(seq, payload) */
};
static_assert(sizeof(struct wal_hdr) == WAL_HDR, "record header size");

struct st_wal {
	struct st_region *r;
	char dir[PATH_MAX];
	unsigned node;
	uint64_t checkpoint_bytes;

	/* Appends (invariant (1)). */
	pthread_mutex_t lock;
	char *buf;
	size_t n, cap;
	int nerr;               /* an append failed (out of memory): flushes fail */
	uint64_t notes;         /* notes made so far (atomic store under lock) */
	uint64_t notes_out;     /* of them, in a flush that finished (atomic):
				   st_wal_behind */

	/* Flushes: under flush_lock (the group-commit thread, or a caller
	 * without one). */
	pthread_mutex_t flush_lock;
	char *out;              /* framed records not yet written (power-sim keeps
				   unsynced ones here: its files change only at persists) */
	size_t outn, outcap;
	char *spare;            /* the other append buffer */
	size_t spare_cap;
	int fd;                 /* current segment */
	uint64_t gen;           /* its number */
	uint64_t seg_bytes;     /* bytes in it */
	uint64_t seq;           /* next record's seq */
	uint64_t since_cut;     /* log bytes taken since the last checkpoint cut */
	bool unsynced;          /* written since the last fdatasync */
	uint64_t alloc_end;     /* the segment is written (zeros past seg_bytes) up
				   to here: see fill_ahead */

	/* The checkpoint thread. */
	pthread_t ck_thread;
	bool ck_started;
	pthread_mutex_t ck_lock;
	pthread_cond_t ck_cond;
	bool cut;               /* a cut waiting for its copy (ck_lock) */
	uint64_t cut_gen;       /* the segment its log starts at */
	bool ck_busy, ck_stop;
	uint64_t ck_done_gen;   /* the last cut whose checkpoint ended (ck_lock) */
	int ck_done_rc;         /* ... and how: 0 or -errno */

	/* power-sim */
	bool sim;
	uint64_t sim_crash_after;
	uint64_t sim_persists;  /* atomic */
	bool sim_ckpt_only;     /* crash_after counts checkpoint persists only */
	uint64_t sim_ckpt_persists;

	struct st_wal_stats st; /* atomics */

	/* A cluster node's (cfg->wal_ring): writers note into this ring, not
	 * into buf, and flushes drain it (jring.c). */
	struct st_jring *ring;
	bool started;           /* st_wal_start done: the log takes notes */
};

/* ---- small helpers ---- */

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static uint64_t wal_sum(uint64_t seq, const char *p, uint64_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ seq ^ (len << 17);
	uint64_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 29;
	}
	for (; i < len; i++)
		h = (h ^ (uint8_t)p[i]) * 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 32);
}

static void seg_path(const struct st_wal *w, uint64_t gen, char *out, size_t len)
{
	snprintf(out, len, "%s/node-%u-%" PRIu64 ".wal", w->dir, w->node, gen);
}

static void sync_dir_of(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

/* power-sim: count a persist (ckpt: of a checkpoint); true when this one
 * is the cut. */
static bool sim_cut(struct st_wal *w, bool ckpt, uint64_t *nth)
{
	*nth = __atomic_add_fetch(&w->sim_persists, 1, __ATOMIC_RELAXED);
	if (w->sim_ckpt_only) {
		if (!ckpt)
			return false;
		*nth = __atomic_add_fetch(&w->sim_ckpt_persists, 1, __ATOMIC_RELAXED);
	}
	return w->sim_crash_after && *nth >= w->sim_crash_after;
}

static _Noreturn void sim_die(uint64_t nth, const char *what, uint64_t done, uint64_t of)
{
	char msg[200];
	int k = snprintf(msg, sizeof(msg),
			 "power-sim: power cut at persist %" PRIu64 " (%s: %" PRIu64 " of %" PRIu64
			 " bytes written)\n",
			 nth, what, done, of);
	ssize_t x = write(2, msg, (size_t)k);
	(void)x;
	kill(getpid(), SIGKILL);
	for (;;)
		pause();
}

/* ---- appends: the fabric's journal ---- */

int st_wal_lock(struct st_region *r)
{
	pthread_mutex_lock(&r->wal->lock);
	return 0;
}

void st_wal_unlock(struct st_region *r)
{
	pthread_mutex_unlock(&r->wal->lock);
}

void st_wal_note(struct st_region *r, uint64_t off, const void *src, uint32_t len)
{
	struct st_wal *w = r->wal;
	size_t need = WAL_ENTRY + ((len + 7u) & ~7u);
	if (w->n + need > w->cap) {
		size_t cap = w->cap ? w->cap : (1u << 16);
		while (cap < w->n + need)
			cap *= 2;
		char *p = realloc(w->buf, cap);
		if (!p) {
			w->nerr = -ENOMEM;
			return;
		}
		w->buf = p;
		w->cap = cap;
	}
	char *e = w->buf + w->n;
	uint64_t hdr[2] = { off, len };
	memcpy(e, hdr, WAL_ENTRY);
	memcpy(e + WAL_ENTRY, src, len);
	memset(e + WAL_ENTRY + len, 0, need - WAL_ENTRY - len);
	w->n += need;
	__atomic_store_n(&w->notes, w->notes + 1, __ATOMIC_RELEASE);
}

bool st_wal_behind(struct st_region *r)
{
	struct st_wal *w = r->wal;
	return w && !w->ring &&
	       __atomic_load_n(&w->notes_out, __ATOMIC_ACQUIRE) !=
		       __atomic_load_n(&w->notes, __ATOMIC_ACQUIRE);
}

/*
 * A range written outside the fabric (the undo log's settling of a peer's
 * transactions, storage/log.c, which calls st_region_persist after each
 * write): note its bytes as they are now, so the log has them. Ranges over
 * NOTE_RANGE_MAX are left out: the whole-region resets (st_reset_meta,
 * st_flush) reach the log by a checkpoint or by replay's own reset.
 */
#define NOTE_RANGE_MAX (1u << 20)

void st_wal_note_range(struct st_region *r, uint64_t off, uint64_t len)
{
	struct st_wal *w = r->wal;
	if (!w || !__atomic_load_n(&w->started, __ATOMIC_ACQUIRE) || len == 0 ||
	    len > NOTE_RANGE_MAX || off >= r->layout.size || len > r->layout.size - off)
		return;
	if (w->ring) {
		(void)st_jring_lock(w->ring); /* the own ring: never refused */
		st_jring_note(w->ring, off, r->base + off, (uint32_t)len);
		(void)st_jring_unlock(w->ring);
	} else {
		pthread_mutex_lock(&w->lock);
		st_wal_note(r, off, r->base + off, (uint32_t)len);
		pthread_mutex_unlock(&w->lock);
	}
}

/* ---- replay ---- */

static bool all_zero(const char *p, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/*
 * Apply the records of one segment to base. Returns 0 when the segment
 * ended cleanly, 1 when it ended in a torn record (reported in *st), or
 * -errno. *seq is the next record's expected seq (0: take the first one's).
 */
static int replay_segment(const char *path, char *base, uint64_t size, uint64_t *seq,
			  struct st_wal_stats *st, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return -errno;
	}
	struct stat sb;
	if (fstat(fd, &sb) < 0) {
		int e = errno;
		close(fd);
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -e;
	}
	uint64_t flen = (uint64_t)sb.st_size;
	if (flen == 0) {
		close(fd);
		return 0;
	}
	char *m = mmap(NULL, flen, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		snprintf(err, errlen, "%s: cannot map: %s", path, strerror(errno));
		return -errno;
	}
	uint64_t pos = 0;
	int rc = 0;
	const char *why = NULL;
	while (pos < flen) {
		struct wal_hdr h;
		if (flen - pos < WAL_HDR) {
			why = "a short record header";
			break;
		}
		memcpy(&h, m + pos, WAL_HDR);
		if (h.magic == 0 && all_zero(m + pos, flen - pos))
			break; /* the preallocated rest: the log ends here */
		if (h.magic != WAL_MAGIC) {
			why = "a record without its magic";
			break;
		}
		if (h.len > flen - pos - WAL_HDR) {
			why = "a record longer than the file";
			break;
		}
		if ((*seq && h.seq != *seq) || wal_sum(h.seq, m + pos + WAL_HDR, h.len) != h.sum) {
			why = "a record whose checksum fails";
			break;
		}
		/* Check every entry before applying any: a record is applied
		 * whole or not at all. */
		const char *p = m + pos + WAL_HDR, *end = p + h.len;
		bool ok = true;
		for (const char *q = p; q < end;) {
			uint64_t e[2];
			if ((uint64_t)(end - q) < WAL_ENTRY) {
				ok = false;
				break;
			}
			memcpy(e, q, WAL_ENTRY);
			uint64_t need = WAL_ENTRY + ((e[1] + 7u) & ~7ull);
			if (e[1] > UINT32_MAX || need > (uint64_t)(end - q) || e[0] > size ||
			    e[1] > size - e[0]) {
				ok = false;
				break;
			}
			q += need;
		}
		if (!ok) {
			why = "a record with an entry outside the region";
			break;
		}
		for (const char *q = p; q < end;) {
			uint64_t e[2];
			memcpy(e, q, WAL_ENTRY);
			memcpy(base + e[0], q + WAL_ENTRY, e[1]);
			q += WAL_ENTRY + ((e[1] + 7u) & ~7ull);
		}
		st->replayed_records++;
		st->replayed_bytes += WAL_HDR + h.len;
		*seq = h.seq + 1;
		pos += WAL_HDR + h.len;
	}
	if (why) {
		st->torn_bytes += flen - pos;
		snprintf(st->torn, sizeof(st->torn),
			 "%.3000s ends in a torn record at byte %" PRIu64 " (%s): its last %" PRIu64
			 " bytes were ignored",
			 path, pos, why, flen - pos);
		rc = 1;
	}
	munmap(m, flen);
	return rc;
}

/* True when name is a log segment of node; its number goes to *gen. */
static bool segment_of(const char *name, unsigned node, uint64_t *gen)
{
	unsigned nd;
	int k = 0;
	return sscanf(name, "node-%u-%" SCNu64 ".wal%n", &nd, gen, &k) == 2 && k > 0 &&
	       name[k] == '\0' && nd == node;
}

/* The smallest number >= from of node's segments in dir, or UINT64_MAX. */
static uint64_t first_segment(const char *dir, unsigned node, uint64_t from)
{
	DIR *d = opendir(dir);
	if (!d)
		return UINT64_MAX;
	uint64_t best = UINT64_MAX, g;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		if (segment_of(de->d_name, node, &g) && g >= from && g < best)
			best = g;
	closedir(d);
	return best;
}

void st_wal_remove_segments_below(const char *dir, unsigned node, uint64_t gen)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	uint64_t g;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		if (segment_of(de->d_name, node, &g) && g < gen)
			(void)unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
}

int st_wal_replay_dir(const char *dir, unsigned node, char *base, uint64_t size,
		      uint64_t *next_gen, struct st_wal_stats *st, char *err, size_t errlen)
{
	const struct st_header *hd = (const struct st_header *)base;
	uint64_t gen = hd->wal_gen;
	uint64_t seq = 0;
	uint64_t g = first_segment(dir, node, gen);
	if (g != UINT64_MAX && g != gen && gen != 0) {
		/* The checkpoint names a segment that is gone but a later one
		 * exists: records in between are lost. Refuse rather than
		 * serve a region with a hole in its history. */
		snprintf(err, errlen,
			 "%s: the checkpoint's log starts at segment %" PRIu64
			 ", which is missing, but segment %" PRIu64 " exists",
			 dir, gen, g);
		return ST_ECORRUPT;
	}
	for (; g != UINT64_MAX; g++) {
		char path[PATH_MAX + 64];
		snprintf(path, sizeof(path), "%s/node-%u-%" PRIu64 ".wal", dir, node, g);
		if (access(path, F_OK) != 0)
			break;
		int rc = replay_segment(path, base, size, &seq, st, err, errlen);
		st->replayed_segments++;
		if (rc < 0)
			return rc;
		gen = g + 1;
		if (rc == 1)
			break; /* a torn record ends the log: later segments never follow one */
	}
	*next_gen = gen ? gen : 1;
	return 0;
}

uint64_t st_wal_next_gen(const char *dir, unsigned node, uint64_t gen)
{
	uint64_t g = first_segment(dir, node, gen);
	if (g == UINT64_MAX)
		return gen ? gen : 1;
	char path[PATH_MAX + 64];
	for (;; g++) {
		snprintf(path, sizeof(path), "%s/node-%u-%" PRIu64 ".wal", dir, node, g + 1);
		if (access(path, F_OK) != 0)
			return g + 1;
	}
}

/* ---- checkpoints ---- */

/* Copy [off, off + len) word by word while writers go on: each word old
 * or new (invariant (5)). */
static void copy_words(char *dst, const char *src, uint64_t off, uint64_t len)
{
	const uint64_t *s = (const uint64_t *)(src + off);
	uint64_t *d = (uint64_t *)(dst + off);
	for (uint64_t i = 0; i < len / 8; i++)
		d[i] = __atomic_load_n(&s[i], __ATOMIC_RELAXED);
}

/*
 * The checkpoint's copy, by the checkpoint thread while writers go on: it
 * copies only what may be nonzero into dst (zeroed, from calloc: pages
 * never written cost nothing). Slabs never assigned to a size class are
 * all zero: their slab table word is 0. A slab assigned after the cut may
 * be left out: the assignment and every write to it are in the log after
 * the cut (invariant (5)). Returns microseconds spent.
 */
static uint64_t copy_region(char *dst, const char *src, const struct st_layout *L)
{
	uint64_t t0 = now_us();
	copy_words(dst, src, 0, L->slab_off);
	const uint64_t *tab = (const uint64_t *)(src + L->slabtab_off);
	for (uint64_t i = 0; i < L->slab_count; i++)
		if (__atomic_load_n(&tab[i], __ATOMIC_RELAXED))
			copy_words(dst, src, L->slab_off + i * ST_SLAB_BYTES, ST_SLAB_BYTES);
	uint64_t tail = L->slab_off + L->slab_count * ST_SLAB_BYTES;
	copy_words(dst, src, tail, L->size - tail);
	return now_us() - t0;
}

static bool page_is_zero(const char *p)
{
	const uint64_t *q = (const uint64_t *)p;
	for (unsigned i = 0; i < WAL_PAGE / 8; i++)
		if (q[i])
			return false;
	return true;
}

/*
 * The first page at or after p that may be nonzero in image: slabs its own
 * slab table leaves unassigned are all zero (copy_region copies none),
 * and reading their pages would only fault them in.
 */
static uint64_t skip_unassigned(const struct st_layout *L, const char *image, uint64_t p)
{
	const uint64_t end = L->slab_off + L->slab_count * ST_SLAB_BYTES;
	while (p >= L->slab_off && p < end) {
		uint64_t s = (p - L->slab_off) / ST_SLAB_BYTES, word;
		memcpy(&word, image + L->slabtab_off + s * 8, sizeof(word));
		if (word)
			break;
		p = L->slab_off + (s + 1) * ST_SLAB_BYTES;
	}
	return p;
}

/*
 * The checkpoint's pages reach the disk as they are written, every
 * CKPT_SYNC_BYTES (Redis's incremental fsync of an AOF rewrite): left to
 * pile up, hundreds of MB of dirty pages make the log's next fdatasync,
 * which commits wait for, wait for them too. *behind: the file's offset
 * synced up to; end: written up to.
 */
#define CKPT_SYNC_BYTES (4ull << 20)

static int write_behind(int fd, uint64_t *behind, uint64_t end)
{
	if (end - *behind < CKPT_SYNC_BYTES)
		return 0;
	if (sync_file_range(fd, (off_t)*behind, (off_t)(end - *behind),
			    SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
				    SYNC_FILE_RANGE_WAIT_AFTER) != 0)
		return -errno;
	*behind = end;
	return 0;
}

/*
 * Write image (a copy of the region, or the quiesced region itself) as
 * the checkpoint whose log starts at segment gen, then drop the segments
 * before gen. The image's header is not changed: the file's header is
 * written with wal_gen and clean set.
 */
static int checkpoint_write(struct st_wal *w, const char *image, uint64_t gen, bool clean)
{
	const uint64_t size = w->r->layout.size;
	const char *final = w->r->wal_path;
	char tmp[PATH_MAX + 8];
	snprintf(tmp, sizeof(tmp), "%s.tmp", final);
	uint64_t t0 = now_us();
	int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	int rc = 0;
	if (ftruncate(fd, (off_t)size) != 0) {
		rc = -errno;
		goto out;
	}
	char hdr[ST_HEADER_BYTES];
	memcpy(hdr, image, ST_HEADER_BYTES);
	struct st_header *h = (struct st_header *)hdr;
	h->wal_gen = gen;
	h->clean_shutdown = clean ? 1 : 0;
	/* Nonzero pages only: the file is sparse, as the region is. power-sim
	 * counts them first, to cut in the middle. */
	const struct st_layout *L = &w->r->layout;
	uint64_t nth = 0, total = 0;
	for (uint64_t p = ST_HEADER_BYTES; w->sim && (p = skip_unassigned(L, image, p)) < size;
	     p += WAL_PAGE)
		total += !page_is_zero(image + p);
	bool cut = w->sim && sim_cut(w, true, &nth);
	uint64_t written = 0, stop = cut ? total / 2 : UINT64_MAX, behind = 0;
	if (!cut && (rc = st_pwrite_all(fd, hdr, ST_HEADER_BYTES, 0)))
		goto out;
	for (uint64_t p = ST_HEADER_BYTES; (p = skip_unassigned(L, image, p)) < size && written < stop;) {
		if (page_is_zero(image + p)) {
			p += WAL_PAGE;
			continue;
		}
		uint64_t e = p + WAL_PAGE;
		while (e < size && (e - p) / WAL_PAGE < stop - written && !page_is_zero(image + e))
			e += WAL_PAGE;
		if ((rc = st_pwrite_all(fd, image + p, e - p, p)))
			goto out;
		written += (e - p) / WAL_PAGE;
		if (!w->sim && (rc = write_behind(fd, &behind, e)))
			goto out;
		p = e;
	}
	if (cut)
		sim_die(nth, "checkpoint", written * WAL_PAGE, total * WAL_PAGE);
	if (!w->sim && fdatasync(fd) != 0) {
		rc = -errno;
		goto out;
	}
	close(fd);
	fd = -1;
	if (w->sim && sim_cut(w, true, &nth))
		sim_die(nth, "checkpoint rename", 0, 1);
	if (rename(tmp, final) != 0) {
		rc = -errno;
		goto out;
	}
	sync_dir_of(w->dir);
	st_wal_remove_segments_below(w->dir, w->node, gen);
	uint64_t us = now_us() - t0;
	__atomic_store_n(&w->st.checkpoint_us, us, __ATOMIC_RELAXED);
	__atomic_store_n(&w->st.checkpoint_at, (uint64_t)time(NULL), __ATOMIC_RELAXED);
	__atomic_add_fetch(&w->st.checkpoints, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&w->st.checkpoint_bytes, written * WAL_PAGE + ST_HEADER_BYTES,
			 __ATOMIC_RELAXED);
out:
	if (fd >= 0)
		close(fd);
	if (rc) {
		(void)unlink(tmp);
		__atomic_store_n(&w->st.checkpoint_err, rc, __ATOMIC_RELAXED);
	}
	return rc;
}

static int flush_barrier(struct st_region *r);

/* A cut's checkpoint: the copy, made while writers go on; the log synced
 * over what it may hold (invariant (5)); then the file. */
static int cut_checkpoint(struct st_wal *w, uint64_t gen)
{
	char *snap = calloc(1, w->r->layout.size);
	if (!snap)
		return -ENOMEM; /* no checkpoint this time: the log keeps it all */
	__atomic_store_n(&w->st.checkpoint_copy_us, copy_region(snap, w->r->base, &w->r->layout),
			 __ATOMIC_RELAXED);
	int rc = flush_barrier(w->r);
	if (rc == 0)
		rc = checkpoint_write(w, snap, gen, false);
	free(snap);
	return rc;
}

static void *ck_main(void *arg)
{
	struct st_wal *w = arg;
	pthread_setname_np(pthread_self(), "rckv-checkpoint"); /* top -H, perf, gdb */
	pthread_mutex_lock(&w->ck_lock);
	for (;;) {
		while (!w->cut && !w->ck_stop)
			pthread_cond_wait(&w->ck_cond, &w->ck_lock);
		if (!w->cut)
			break;
		uint64_t gen = w->cut_gen;
		pthread_mutex_unlock(&w->ck_lock);
		int rc = cut_checkpoint(w, gen);
		if (rc)
			__atomic_store_n(&w->st.checkpoint_err, rc, __ATOMIC_RELAXED);
		pthread_mutex_lock(&w->ck_lock);
		w->cut = false;
		w->ck_busy = false;
		w->ck_done_gen = gen;
		w->ck_done_rc = rc;
		pthread_cond_broadcast(&w->ck_cond);
	}
	pthread_mutex_unlock(&w->ck_lock);
	return NULL;
}

static void ck_wait_idle(struct st_wal *w)
{
	if (!w->ck_started)
		return;
	pthread_mutex_lock(&w->ck_lock);
	while (w->ck_busy)
		pthread_cond_wait(&w->ck_cond, &w->ck_lock);
	pthread_mutex_unlock(&w->ck_lock);
}

/* ---- flushes ---- */

/* Open segment gen, empty, as the current one (flush_lock held). */
static int segment_start(struct st_wal *w, uint64_t gen)
{
	char path[PATH_MAX + 64];
	seg_path(w, gen, path, sizeof(path));
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	sync_dir_of(w->dir);
	if (w->fd >= 0)
		close(w->fd);
	w->fd = fd;
	w->gen = gen;
	w->seg_bytes = 0;
	w->alloc_end = 0;
	return 0;
}

#define FILL_CHUNK (1u << 20)

/*
 * Keep the segment written with zeros ahead of its records, a chunk at a
 * time (flush_lock held): a flush then overwrites blocks the file already
 * has, and its fdatasync writes no metadata (measured here: about 120 us
 * against 210-290 us for an append). The chunk's own metadata goes with
 * the next sync, once per chunk. Replay takes zeros after the last record
 * for the end of the log. Not under power-sim: its files change only at
 * persists.
 */
static void fill_ahead(struct st_wal *w)
{
	static const char zeros[1 << 16];
	if (w->sim)
		return;
	if (w->alloc_end < w->seg_bytes)
		w->alloc_end = w->seg_bytes;
	if (w->seg_bytes + FILL_CHUNK / 2 < w->alloc_end)
		return;
	for (uint64_t off = w->alloc_end; off < w->alloc_end + FILL_CHUNK; off += sizeof(zeros))
		if (st_pwrite_all(w->fd, zeros, sizeof(zeros), off) != 0)
			return; /* no room ahead: the log appends instead */
	w->alloc_end += FILL_CHUNK;
}

/* Frame the taken appends (w->spare[0..n)) as one record onto w->out. */
static int frame(struct st_wal *w, const char *p, size_t n)
{
	if (n == 0)
		return 0;
	size_t need = w->outn + WAL_HDR + n;
	if (need > w->outcap) {
		size_t cap = w->outcap ? w->outcap : (1u << 16);
		while (cap < need)
			cap *= 2;
		char *q = realloc(w->out, cap);
		if (!q)
			return -ENOMEM;
		w->out = q;
		w->outcap = cap;
	}
	struct wal_hdr h = { .magic = WAL_MAGIC, .len = n, .seq = w->seq++ };
	h.sum = wal_sum(h.seq, p, n);
	memcpy(w->out + w->outn, &h, WAL_HDR);
	memcpy(w->out + w->outn + WAL_HDR, p, n);
	w->outn = need;
	__atomic_add_fetch(&w->st.records, 1, __ATOMIC_RELAXED);
	return 0;
}

/* Write w->out to the current segment; with sync, make it durable
 * (flush_lock held). power-sim writes only at a synced flush. */
static int write_out(struct st_wal *w, bool sync)
{
	if (w->sim) {
		if (!sync || (w->outn == 0 && !w->unsynced))
			return 0;
		uint64_t nth;
		if (sim_cut(w, false, &nth)) {
			uint64_t half = w->outn / 2;
			(void)st_pwrite_all(w->fd, w->out, half, w->seg_bytes);
			sim_die(nth, "log append", half, w->outn);
		}
	}
	if (w->outn) {
		int rc = st_pwrite_all(w->fd, w->out, w->outn, w->seg_bytes);
		if (rc)
			return rc;
		w->seg_bytes += w->outn;
		fill_ahead(w);
		__atomic_add_fetch(&w->st.bytes, w->outn, __ATOMIC_RELAXED);
		__atomic_add_fetch(&w->st.log_bytes, w->outn, __ATOMIC_RELAXED);
		w->outn = 0;
		w->unsynced = true;
	}
	if (sync && w->unsynced) {
		if (!w->sim && fdatasync(w->fd) != 0)
			return -errno;
		w->unsynced = false;
		__atomic_add_fetch(&w->st.fsyncs, 1, __ATOMIC_RELAXED);
	}
	return 0;
}

/* Due after checkpoint_bytes of log, and not before twice what the last
 * checkpoint wrote: a checkpoint never writes more than half the log it
 * trims (Redis rewrites its AOF once it doubled). */
static bool cut_due(struct st_wal *w, uint64_t n, bool force)
{
	if (force) { /* st_wal_save: now, if no checkpoint runs */
		pthread_mutex_lock(&w->ck_lock);
		bool idle = w->ck_started && !w->ck_busy;
		pthread_mutex_unlock(&w->ck_lock);
		return idle;
	}
	uint64_t due = w->checkpoint_bytes;
	uint64_t last = __atomic_load_n(&w->st.checkpoint_bytes, __ATOMIC_RELAXED);
	if (due && 2 * last > due)
		due = 2 * last;
	if (!w->ck_started || !due || w->since_cut + n < due)
		return false;
	pthread_mutex_lock(&w->ck_lock);
	bool free_ = !w->ck_busy; /* one at a time */
	pthread_mutex_unlock(&w->ck_lock);
	return free_;
}

/*
 * The journal ring's take (flush_lock held): what writers noted, into
 * w->spare. With a cut due, or for a barrier (invariant (5)), the ring's
 * mutex is taken (draining while it is busy: jring.c invariant (2)) and
 * the rest drained, so that no batch is half in the take: *cut says
 * whether a cut is due. *upto: the ring position taken to.
 */
static int ring_take(struct st_wal *w, size_t *n, bool barrier, bool force, bool *cut,
		     uint64_t *upto)
{
	*n = 0;
	int rc = st_jring_take(w->ring, &w->spare, n, &w->spare_cap, upto);
	*cut = rc == 0 && cut_due(w, *n, force);
	if (rc == 0 && (*cut || barrier)) {
		while (!st_jring_trylock(w->ring)) {
			if ((rc = st_jring_take(w->ring, &w->spare, n, &w->spare_cap, upto)))
				return rc;
			sched_yield();
		}
		rc = st_jring_take(w->ring, &w->spare, n, &w->spare_cap, upto);
		(void)st_jring_unlock(w->ring);
	}
	if (rc == 0 && w->nerr)
		rc = w->nerr;
	if (rc == 0 && st_jring_dropped(w->ring))
		rc = -EIO; /* a note never reached the ring: the log has a hole */
	return rc;
}

/* A flush; barrier: no batch half in its take, so the log holds every
 * write made before it whole (invariant (5)). force: cut a checkpoint now
 * unless one runs (*cut_gen says which segment it starts at; 0: none was
 * cut). */
static int flush_cut(struct st_region *r, bool sync, bool barrier, bool force,
		     uint64_t *cut_gen)
{
	struct st_wal *w = r->wal;
	if (!w)
		return 0;
	pthread_mutex_lock(&w->flush_lock);
	char *taken;
	bool cut = false;
	size_t n;
	uint64_t upto = 0, notes = 0;
	int rc;
	if (w->ring) {
		rc = ring_take(w, &n, barrier, force, &cut, &upto);
		taken = w->spare;
	} else {
		pthread_mutex_lock(&w->lock);
		taken = w->buf;
		n = w->n;
		notes = w->notes;
		size_t cap = w->cap;
		w->buf = w->spare;
		w->cap = w->spare_cap;
		w->n = 0;
		rc = w->nerr;
		cut = rc == 0 && cut_due(w, n, force);
		pthread_mutex_unlock(&w->lock);
		w->spare = taken;
		w->spare_cap = cap;
	}

	if (rc == 0 && (rc = frame(w, taken, n)) != 0) {
		/* Those writes are not in the log and never will be: no later
		 * record may reach it without them (invariant (2)). */
		pthread_mutex_lock(&w->lock);
		w->nerr = rc;
		pthread_mutex_unlock(&w->lock);
	}
	w->since_cut += n;
	if (rc == 0)
		rc = write_out(w, sync || cut);
	if (rc == 0 && w->ring)
		st_jring_publish(w->ring, upto); /* written (everysec) or synced */
	else if (rc == 0)
		__atomic_store_n(&w->notes_out, notes, __ATOMIC_RELEASE);
	if (rc == 0 && cut) {
		/* The old segment is synced (invariant (2)): everything after
		 * the cut goes to the next one, which the checkpoint names;
		 * its copy is made from here on (invariant (5)). */
		rc = segment_start(w, w->gen + 1);
		if (rc == 0) {
			pthread_mutex_lock(&w->ck_lock);
			w->cut = true;
			w->cut_gen = w->gen;
			w->ck_busy = true;
			pthread_cond_signal(&w->ck_cond);
			pthread_mutex_unlock(&w->ck_lock);
			w->since_cut = 0;
			__atomic_store_n(&w->st.log_bytes, 0, __ATOMIC_RELAXED);
			if (cut_gen)
				*cut_gen = w->gen;
		}
	}
	pthread_mutex_unlock(&w->flush_lock);
	if (rc)
		__atomic_store_n(&w->st.flush_err, rc, __ATOMIC_RELAXED);
	return rc;
}

static int flush(struct st_region *r, bool sync, bool barrier)
{
	return flush_cut(r, sync, barrier, false, NULL);
}

int st_wal_flush(struct st_region *r, bool sync)
{
	return flush(r, sync, false);
}

static int flush_barrier(struct st_region *r)
{
	return flush(r, true, true);
}

/*
 * SAVE: every write so far durable (a synced flush), then a checkpoint cut
 * right after it, made as the ones checkpoint_bytes cuts are (the copy
 * while writers go on, invariant (5)), and waited for. A checkpoint that
 * runs already is waited for first: its copy may predate the call.
 */
int st_wal_save(struct st_region *r)
{
	struct st_wal *w = r->wal;
	if (!w || !w->ck_started)
		return -EAGAIN;
	uint64_t gen = 0;
	while (gen == 0) {
		ck_wait_idle(w);
		int rc = flush_cut(r, true, true, true, &gen);
		if (rc)
			return rc;
	}
	pthread_mutex_lock(&w->ck_lock);
	while (w->ck_done_gen < gen)
		pthread_cond_wait(&w->ck_cond, &w->ck_lock);
	/* A later checkpoint that ended holds our writes too. */
	int rc = w->ck_done_rc;
	pthread_mutex_unlock(&w->ck_lock);
	return rc;
}

/*
 * A checkpoint now, on the calling thread, of the region as it is: every
 * writer is stopped (the node is quiesced, starting, or closing). Flushes
 * what is noted first, so the log stays whole up to the cut.
 */
static int checkpoint_now(struct st_wal *w, bool clean)
{
	int rc = st_wal_flush(w->r, true);
	ck_wait_idle(w);
	if (rc)
		return rc;
	pthread_mutex_lock(&w->flush_lock);
	uint64_t gen = w->gen + 1;
	rc = segment_start(w, gen);
	if (rc == 0)
		rc = checkpoint_write(w, w->r->base, gen, clean);
	if (rc == 0) {
		w->since_cut = 0;
		__atomic_store_n(&w->st.log_bytes, 0, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&w->flush_lock);
	return rc;
}

int st_wal_checkpoint(struct st_region *r)
{
	return r->wal ? checkpoint_now(r->wal, false) : 0;
}

/* ---- life ---- */

int st_wal_init(struct st_region *r, const struct st_config *cfg, uint64_t next_gen,
		const struct st_wal_stats *replayed, char *err, size_t errlen)
{
	struct st_wal *w = calloc(1, sizeof(*w));
	if (!w) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	w->r = r;
	snprintf(w->dir, sizeof(w->dir), "%s", cfg->dir && *cfg->dir ? cfg->dir : ".");
	w->node = cfg->node_id;
	w->checkpoint_bytes = cfg->checkpoint_bytes;
	w->fd = -1;
	w->gen = next_gen - 1; /* the first segment_start makes it next_gen */
	w->sim = cfg->power_sim;
	w->sim_crash_after = cfg->power_sim_crash_after;
	w->sim_ckpt_only = cfg->power_sim_crash_in_checkpoint;
	if (replayed)
		w->st = *replayed;
	pthread_mutex_init(&w->lock, NULL);
	pthread_mutex_init(&w->flush_lock, NULL);
	pthread_mutex_init(&w->ck_lock, NULL);
	pthread_cond_init(&w->ck_cond, NULL);
	if (cfg->wal_ring) {
		char path[PATH_MAX + 16];
		st_jring_path(r->path, path, sizeof(path));
		int rc = st_jring_create(path, WAL_RING_BYTES, &w->ring);
		if (rc) {
			snprintf(err, errlen, "write-ahead log: cannot make the journal ring %s: %s",
				 path, strerror(-rc));
			pthread_mutex_destroy(&w->lock);
			pthread_mutex_destroy(&w->flush_lock);
			pthread_mutex_destroy(&w->ck_lock);
			pthread_cond_destroy(&w->ck_cond);
			free(w);
			return rc;
		}
	}
	r->wal = w;
	return 0;
}

struct st_jring *st_wal_ring(struct st_region *r)
{
	return r->wal ? r->wal->ring : NULL;
}

int st_wal_start(struct st_region *r, bool checkpoint, char *err, size_t errlen)
{
	struct st_wal *w = r->wal;
	if (!w)
		return 0;
	int rc;
	if (checkpoint) {
		rc = checkpoint_now(w, false);
		if (rc) {
			snprintf(err, errlen, "write-ahead log: the checkpoint at start failed: %s",
				 strerror(-rc));
			return rc;
		}
	} else {
		pthread_mutex_lock(&w->flush_lock);
		rc = segment_start(w, w->gen + 1);
		pthread_mutex_unlock(&w->flush_lock);
		if (rc) {
			snprintf(err, errlen, "write-ahead log: cannot create segment %" PRIu64
				 " in %s: %s", w->gen + 1, w->dir, strerror(-rc));
			return rc;
		}
	}
	if ((rc = -pthread_create(&w->ck_thread, NULL, ck_main, w)) != 0) {
		snprintf(err, errlen, "write-ahead log: cannot start the checkpoint thread: %s",
			 strerror(-rc));
		return rc;
	}
	w->ck_started = true;
	__atomic_store_n(&w->started, true, __ATOMIC_RELEASE);
	return 0;
}

void st_wal_close(struct st_region *r, bool clean)
{
	struct st_wal *w = r->wal;
	if (!w)
		return;
	if (w->fd >= 0) {
		if (clean)
			(void)checkpoint_now(w, true);
		else
			(void)st_wal_flush(r, true);
	}
	if (w->ck_started) {
		pthread_mutex_lock(&w->ck_lock);
		w->ck_stop = true;
		pthread_cond_broadcast(&w->ck_cond);
		pthread_mutex_unlock(&w->ck_lock);
		pthread_join(w->ck_thread, NULL);
	}
	if (w->fd >= 0)
		close(w->fd);
	st_jring_close(w->ring);
	free(w->buf);
	free(w->spare);
	free(w->out);
	pthread_mutex_destroy(&w->lock);
	pthread_mutex_destroy(&w->flush_lock);
	pthread_mutex_destroy(&w->ck_lock);
	pthread_cond_destroy(&w->ck_cond);
	free(w);
	r->wal = NULL;
}

bool st_region_is_wal(struct st_region *r)
{
	return r->wal != NULL;
}

void st_wal_get_stats(struct st_region *r, struct st_wal_stats *out)
{
	memset(out, 0, sizeof(*out));
	struct st_wal *w = r->wal;
	if (!w)
		return;
	/* What replay found is fixed since open; the rest moves. */
	out->replayed_segments = w->st.replayed_segments;
	out->replayed_records = w->st.replayed_records;
	out->replayed_bytes = w->st.replayed_bytes;
	out->torn_bytes = w->st.torn_bytes;
	out->adopted_copy = w->st.adopted_copy;
	memcpy(out->torn, w->st.torn, sizeof(out->torn));
	out->records = __atomic_load_n(&w->st.records, __ATOMIC_RELAXED);
	out->bytes = __atomic_load_n(&w->st.bytes, __ATOMIC_RELAXED);
	out->log_bytes = __atomic_load_n(&w->st.log_bytes, __ATOMIC_RELAXED);
	out->fsyncs = __atomic_load_n(&w->st.fsyncs, __ATOMIC_RELAXED);
	out->checkpoints = __atomic_load_n(&w->st.checkpoints, __ATOMIC_RELAXED);
	out->checkpoint_us = __atomic_load_n(&w->st.checkpoint_us, __ATOMIC_RELAXED);
	out->checkpoint_at = __atomic_load_n(&w->st.checkpoint_at, __ATOMIC_RELAXED);
	out->checkpoint_bytes = __atomic_load_n(&w->st.checkpoint_bytes, __ATOMIC_RELAXED);
	out->checkpoint_copy_us = __atomic_load_n(&w->st.checkpoint_copy_us, __ATOMIC_RELAXED);
	out->checkpoint_err = __atomic_load_n(&w->st.checkpoint_err, __ATOMIC_RELAXED);
	out->flush_err = __atomic_load_n(&w->st.flush_err, __ATOMIC_RELAXED);
	pthread_mutex_lock(&w->ck_lock);
	out->checkpoint_running = w->ck_busy;
	pthread_mutex_unlock(&w->ck_lock);
	out->sim_persists = __atomic_load_n(&w->sim_persists, __ATOMIC_RELAXED);
	out->segment = w->gen;
}
