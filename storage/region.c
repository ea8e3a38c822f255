/*
 * region.c: a node's MemStore region as a file, mapped through libpmem
 * (DESIGN.md section 9): layout, header, open/validate/create, close and
 * persistence.
 *
 * Files:
 *   persistence none:          /dev/shm/rckv-<pid>-node-<id>.region, unlinked
 *                              at close (or by a later open, once <pid> is
 *                              gone: sweep_dead_shm);
 *   persistence process/power: <dir>/node-<id>.region;
 *   power-sim (testing):       <dir>/node-<id>.region is the durable
 *                              medium, mapped through a volatile copy
 *                              /dev/shm/rckv-<pid>-node-<id>-sim.region
 *                              (st.h; swept like the none files).
 * A new file is created under a temporary name with all its space
 * reserved (reserve_space: a file system too small for `memory` stops the
 * start with a message, where a sparse file would die of SIGBUS on the
 * first page that finds no room), gets its header, and is renamed into
 * place, so a crash during creation never leaves a half-made region under
 * the real name. A reopened file gets its holes reserved the same way
 * (fallocate mode 0 allocates holes and never writes a byte of data).
 *
 * Invariants:
 * (1) An existing file is checked with pread() before it is mapped
 *     read-write; if any check fails, open returns ST_ECORRUPT and nothing
 *     was written to the file.
 * (2) header->clean_shutdown is 0 while a process has the region open and
 *     1 only after st_region_close(clean = true); incarnation grows by one
 *     per open.
 * (3) One process at a time opens a region file: flock(LOCK_EX) on r->fd,
 *     held until close. Peers of a shm cluster map the file themselves,
 *     without st_region_open, and are not affected.
 * (4) power-sim: the durable file changes only by copies of whole pages of
 *     the mapping, made under sim_lock, which also reads the pages: two
 *     copies of one page never overlap, so a later persist never lands
 *     before an earlier one with older contents.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <inttypes.h>
#include <libpmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "storage/st_internal.h"

static_assert(sizeof(struct st_header) <= ST_HEADER_BYTES, "header fits its page");
static_assert(offsetof(struct st_item, ident) == ST_ITEM_IDENT, "ident word offset");
static_assert(offsetof(struct st_item, data) == ST_ITEM_DATA, "data word offset");

#define TXN_SLOTS 4096u
static_assert(TXN_SLOTS >= ST_LOG_SLOTS + ST_TXN_STATES, "decision records and txn records fit");
#define LOG_MIN (2ull << 20)
#define PAGE 4096ull

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

const char *st_strerror(int err)
{
	switch (err) {
	case 0: return "ok";
	case ST_ENOTFOUND: return "key not found";
	case ST_EFULL: return "MemStore full";
	case ST_ESTALE: return "stale item reference";
	case ST_EBUSY: return "MemStore structure busy";
	case ST_ECORRUPT: return "MemStore region refused";
	default: return err < 0 && err > -4096 ? strerror(-err) : "unknown MemStore error";
	}
}

int st_layout_compute(uint64_t size, unsigned log_nodes, struct st_layout *L, char *err,
		      size_t errlen)
{
	size &= ~(PAGE - 1);
	if (size < ST_MIN_REGION) {
		snprintf(err, errlen, "memory %" PRIu64 " is too small: the MemStore needs at least %llumb",
			 size, ST_MIN_REGION >> 20);
		return ST_ECORRUPT;
	}
	if (size > ST_MAX_REGION) {
		snprintf(err, errlen, "memory %" PRIu64 " is too large: the MemStore holds at most %llugb",
			 size, ST_MAX_REGION >> 30);
		return ST_ECORRUPT;
	}
	memset(L, 0, sizeof(*L));
	L->size = size;
	L->txn_off = ST_HEADER_BYTES;
	L->txn_slots = TXN_SLOTS;
	L->index_off = align_up(L->txn_off + L->txn_slots * ST_TXN_BYTES, PAGE);
	/* About 1/16 of the memory for the index: one 8-byte slot per ~146
	 * bytes of region, enough for items of the smaller classes. */
	L->index_buckets = size / 16 / 64;
	/* The undo log: 1/32 of the memory, at least LOG_MIN (but at most a
	 * quarter), split into ST_LOG_SLOTS slots per coordinator node. */
	if (log_nodes < 1)
		log_nodes = 1;
	if (log_nodes >= FAB_MAX_NODES) {
		snprintf(err, errlen, "node ids go up to %d", FAB_MAX_NODES - 1);
		return ST_ECORRUPT;
	}
	uint64_t lsz = size / 32 > LOG_MIN ? size / 32 : LOG_MIN;
	if (size >= (64ull << 20) && lsz < (log_nodes << 20))
		lsz = log_nodes << 20; /* at least 1 MiB per coordinator node */
	if (lsz > size / 4)
		lsz = size / 4;
	L->log_nodes = log_nodes;
	L->log_slot_bytes = (lsz / (log_nodes * ST_LOG_SLOTS)) & ~(uint64_t)63;
	L->log_size = align_up(L->log_slot_bytes * log_nodes * ST_LOG_SLOTS, PAGE);
	L->log_off = size - L->log_size;
	L->slabtab_off = align_up(L->index_off + L->index_buckets * 64, PAGE);
	uint64_t avail = L->log_off - L->slabtab_off;
	uint64_t n = avail / (ST_SLAB_BYTES + ST_SLAB_BITMAP_BYTES + 8);
	for (; n > 0; n--) {
		uint64_t bm = align_up(L->slabtab_off + n * 8, PAGE);
		uint64_t so = align_up(bm + n * ST_SLAB_BITMAP_BYTES, PAGE);
		if (so + n * ST_SLAB_BYTES <= L->log_off) {
			L->bitmap_off = bm;
			L->slab_off = so;
			break;
		}
	}
	if (n == 0) {
		snprintf(err, errlen, "memory %" PRIu64 " is too small: no room for one slab", size);
		return ST_ECORRUPT;
	}
	L->slab_count = n;
	return 0;
}

void *st_region_base(struct st_region *r) { return r->base; }
const struct st_layout *st_region_layout(struct st_region *r) { return &r->layout; }
const struct st_coord *st_region_coord(struct st_region *r) { return &r->coord; }
struct st_header *st_region_header(struct st_region *r) { return (struct st_header *)r->base; }
bool st_region_reopened(struct st_region *r) { return r->reopened; }
bool st_region_was_clean(struct st_region *r) { return r->was_clean; }

bool st_region_is_pmem(struct st_region *r) { return r->is_pmem != 0; }

void st_region_set_persister(struct st_region *r, st_persist_fn fn, void *arg)
{
	r->coord.persist = fn;
	r->coord.persist_arg = fn ? arg : NULL;
}

/* ---- power-sim ---- */

int st_pwrite_all(int fd, const char *buf, uint64_t len, uint64_t off)
{
	while (len > 0) {
		ssize_t k = pwrite(fd, buf, len > (1u << 30) ? (1u << 30) : (size_t)len, (off_t)off);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += k;
		off += (uint64_t)k;
		len -= (uint64_t)k;
	}
	return 0;
}

#define SIM_BUF_BYTES (64 * PAGE)

/*
 * Write pages [a, e) of the mapping to the durable file through r->sim_buf
 * (sim_lock held). Workers write the mapping meanwhile, as they would
 * while a real msync or a DMA reads it: the pages are read word by word
 * with relaxed atomic loads (the fabric's 8-byte atomicity, rdma/shm.c),
 * so each word is old or new, and the race is a defined one.
 */
static int sim_write(struct st_region *r, uint64_t a, uint64_t e)
{
	while (a < e) {
		uint64_t n = e - a < SIM_BUF_BYTES ? e - a : SIM_BUF_BYTES;
		const uint64_t *src = (const uint64_t *)(r->base + a);
		uint64_t *dst = (uint64_t *)r->sim_buf;
		for (uint64_t i = 0; i < n / 8; i++)
			dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
		int rc = st_pwrite_all(r->sim_fd, r->sim_buf, n, a);
		if (rc)
			return rc;
		a += n;
	}
	return 0;
}

/*
 * Copy pages [a, e) of the mapping to the durable file. Small ranges are
 * copied whole; large ones (recovery, a clean close) extent by extent of
 * the volatile file, punching the holes out of the durable file, so that
 * neither file grows by gigabytes of zeros.
 */
static int sim_copy(struct st_region *r, uint64_t a, uint64_t e)
{
	if (e - a <= SIM_BUF_BYTES)
		return sim_write(r, a, e);
	uint64_t pos = a;
	while (pos < e) {
		off_t d = lseek(r->fd, (off_t)pos, SEEK_DATA);
		uint64_t data = d < 0 || (uint64_t)d > e ? e : (uint64_t)d;
		if (data > pos &&
		    fallocate(r->sim_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)pos,
			      (off_t)(data - pos)) != 0) {
			/* No hole punching here: write the zeros. */
			int rc = sim_write(r, pos, data);
			if (rc)
				return rc;
		}
		if (data >= e)
			break;
		off_t h = lseek(r->fd, (off_t)data, SEEK_HOLE);
		uint64_t hole = h < 0 || (uint64_t)h > e ? e : (uint64_t)h;
		int rc = sim_write(r, data, hole);
		if (rc)
			return rc;
		pos = hole;
	}
	return 0;
}

static int sim_persist(struct st_region *r, uint64_t off, uint64_t len)
{
	uint64_t a = off & ~(PAGE - 1);
	uint64_t e = align_up(off + len, PAGE);
	if (e > r->layout.size)
		e = r->layout.size;
	pthread_mutex_lock(&r->sim_lock);
	uint64_t nth = ++r->sim_persists;
	if (r->sim_crash_after && nth >= r->sim_crash_after) {
		/* The power cut, in the middle of this flush: its first half
		 * of pages made it, the rest did not, nor anything later. */
		uint64_t half = ((e - a) / PAGE / 2) * PAGE;
		if (half)
			(void)sim_copy(r, a, a + half);
		char msg[160];
		int k = snprintf(msg, sizeof(msg),
				 "power-sim: power cut at persist %" PRIu64 " (%" PRIu64
				 " of %" PRIu64 " pages written)\n",
				 nth, (uint64_t)(half / PAGE), (uint64_t)((e - a) / PAGE));
		ssize_t w = write(2, msg, (size_t)k);
		(void)w;
		kill(getpid(), SIGKILL);
		for (;;)
			pause();
	}
	int rc = sim_copy(r, a, e);
	pthread_mutex_unlock(&r->sim_lock);
	return rc;
}

uint64_t st_region_sim_persists(struct st_region *r)
{
	if (!r->sim)
		return 0;
	pthread_mutex_lock(&r->sim_lock);
	uint64_t n = r->sim_persists;
	pthread_mutex_unlock(&r->sim_lock);
	return n;
}

bool st_region_is_sim(struct st_region *r) { return r->sim; }

const char *st_region_durable_path(struct st_region *r)
{
	return r->sim ? r->sim_path : r->wal ? r->wal_path : r->path;
}

int st_region_persist_checked(struct st_region *r, uint64_t off, uint64_t len)
{
	if (r->wal) {
		st_wal_note_range(r, off, len); /* durable at the next st_region_sync */
		return 0;
	}
	if (r->persistence != ST_PERSIST_POWER || off >= r->layout.size || len == 0)
		return 0;
	if (len > r->layout.size - off)
		len = r->layout.size - off;
	if (r->sim)
		return sim_persist(r, off, len);
	if (r->is_pmem) {
		pmem_persist(r->base + off, len);
		return 0;
	}
	/* pmem_msync rounds the start down to a page itself. */
	return pmem_msync(r->base + off, len) != 0 ? (errno ? -errno : -EIO) : 0;
}

int st_region_persist_ranges(struct st_region *r, const struct fab_range *rg, size_t n)
{
	if (r->persistence != ST_PERSIST_POWER || r->wal || n == 0)
		return 0;
	int err = 0;
	if (r->sim || r->is_pmem || n == 1) {
		for (size_t i = 0; i < n; i++) {
			int rc = st_region_persist_checked(r, rg[i].off, rg[i].len);
			if (rc && !err)
				err = rc;
		}
		return err;
	}
	/* Start the writeback of every range, then wait for each: the disk
	 * gets them all at once. */
	const uint64_t size = r->layout.size;
	for (int pass = 0; pass < 2 && !err; pass++) {
		unsigned flags = pass == 0 ? SYNC_FILE_RANGE_WRITE
					   : SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
						     SYNC_FILE_RANGE_WAIT_AFTER;
		for (size_t i = 0; i < n; i++) {
			if (rg[i].off >= size)
				continue;
			uint64_t len = rg[i].len > size - rg[i].off ? size - rg[i].off : rg[i].len;
			if (sync_file_range(r->fd, (off_t)rg[i].off, (off_t)len, flags) != 0) {
				err = -errno;
				break;
			}
		}
	}
	if (err) { /* no sync_file_range here: msync each range */
		err = 0;
		for (size_t i = 0; i < n; i++) {
			int rc = st_region_persist_checked(r, rg[i].off, rg[i].len);
			if (rc && !err)
				err = rc;
		}
		return err;
	}
	/* The pages are written; fsync the (now clean) first range: it commits
	 * the journal if their blocks were newly allocated (the file is
	 * sparse), and flushes the device's write cache. */
	return st_region_persist_checked(r, rg[0].off, rg[0].len);
}

void st_region_persist(struct st_region *r, uint64_t off, uint64_t len)
{
	(void)st_region_persist_checked(r, off, len);
}

int st_region_sync(struct st_region *r)
{
	return r->wal ? st_wal_flush(r, true) : 0;
}

int st_region_save(struct st_region *r)
{
	if (r->persistence == ST_PERSIST_NONE)
		return -ENOTSUP;
	if (r->wal)
		return st_wal_save(r);
	if (r->sim)
		return sim_persist(r, 0, r->layout.size);
	if (r->is_pmem) {
		pmem_persist(r->base, r->layout.size);
		return 0;
	}
	/* msync writes back only the dirty pages, and (MS_SYNC) the file's
	 * metadata: the blocks a sparse file gained. */
	return pmem_msync(r->base, r->layout.size) != 0 ? (errno ? -errno : -EIO) : 0;
}

/* Durably record a directory entry change (create, rename, unlink). */
static void sync_dir(const char *path)
{
	char d[PATH_MAX];
	snprintf(d, sizeof(d), "%s", path);
	char *slash = strrchr(d, '/');
	if (slash)
		*(slash == d ? slash + 1 : slash) = '\0';
	else
		snprintf(d, sizeof(d), ".");
	int fd = open(d, O_RDONLY | O_DIRECTORY);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

/*
 * Check an existing region file through fd without writing to it
 * (invariant (1)). Returns 0 or ST_ECORRUPT/-errno with the reason in err.
 */
static int validate(int fd, const char *path, const struct st_config *cfg,
		    const struct st_layout *want, char *err, size_t errlen)
{
	struct stat st;
	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	struct st_header h;
	if ((uint64_t)st.st_size < sizeof(h)) {
		snprintf(err, errlen, "%s: truncated or not an rckv region (file is %lld bytes)",
			 path, (long long)st.st_size);
		return ST_ECORRUPT;
	}
	ssize_t got = pread(fd, &h, sizeof(h), 0);
	if (got != (ssize_t)sizeof(h)) {
		snprintf(err, errlen, "%s: cannot read header: %s", path,
			 got < 0 ? strerror(errno) : "short read");
		return got < 0 ? -errno : ST_ECORRUPT;
	}
	if (h.magic != ST_MAGIC) {
		snprintf(err, errlen, "%s: not an rckv region (bad magic)", path);
		return ST_ECORRUPT;
	}
	if (h.layout_version != ST_LAYOUT_VERSION) {
		/* Never read across versions: version 2's slot words and
		 * class numbers mean other blocks (st.h, ST_LAYOUT_VERSION). */
		snprintf(err, errlen,
			 "%s: region layout version %" PRIu64 ", this build reads version %d "
			 "(%s); it is left as it is: keep it for the build that wrote it, or "
			 "remove it to start empty",
			 path, h.layout_version, ST_LAYOUT_VERSION,
			 h.layout_version < ST_LAYOUT_VERSION
				 ? "written by an older build, with other size classes"
				 : "written by a newer build");
		return ST_ECORRUPT;
	}
	if (h.node_id != cfg->node_id) {
		snprintf(err, errlen, "%s: created for node %" PRIu64 ", this is node %u", path,
			 h.node_id, cfg->node_id);
		return ST_ECORRUPT;
	}
	if (h.cluster_id != cfg->cluster_id) {
		snprintf(err, errlen,
			 "%s: created for cluster %" PRIu64 ", this node is in cluster %" PRIu64, path,
			 h.cluster_id, cfg->cluster_id);
		return ST_ECORRUPT;
	}
	if ((uint64_t)st.st_size < h.layout.size) {
		snprintf(err, errlen, "%s: truncated: file is %lld bytes, its header says %" PRIu64,
			 path, (long long)st.st_size, h.layout.size);
		return ST_ECORRUPT;
	}
	if (h.layout.size != want->size) {
		snprintf(err, errlen,
			 "%s: region is %" PRIu64 " bytes, config says memory %" PRIu64
			 " (start with the old memory setting, or move the file away)",
			 path, h.layout.size, want->size);
		return ST_ECORRUPT;
	}
	if ((uint64_t)st.st_size != h.layout.size) {
		snprintf(err, errlen, "%s: file is %lld bytes, its header says %" PRIu64, path,
			 (long long)st.st_size, h.layout.size);
		return ST_ECORRUPT;
	}
	if (memcmp(&h.layout, want, sizeof(*want)) != 0) {
		snprintf(err, errlen, "%s: region layout differs from this build's for the same size",
			 path);
		return ST_ECORRUPT;
	}
	return 0;
}

static int lock_file(int fd, const char *path, char *err, size_t errlen)
{
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return 0;
	int e = errno;
	if (e == EWOULDBLOCK)
		snprintf(err, errlen, "%s: in use by another process", path);
	else
		snprintf(err, errlen, "%s: cannot lock: %s", path, strerror(e));
	return e == EWOULDBLOCK ? ST_EBUSY : -e;
}

/* Bytes as "64.0 MiB" (messages). */
static void human_bytes(uint64_t b, char *out, size_t len)
{
	static const char *const unit[] = { "bytes", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	int u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, len, "%" PRIu64 " bytes", b);
	else
		snprintf(out, len, "%.1f %s", v, unit[u]);
}

/* The directory part of path, for messages. */
static void dir_of(const char *path, char *dir, size_t len)
{
	snprintf(dir, len, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
	else
		snprintf(dir, len, ".");
}

/* MemAvailable of /proc/meminfo in bytes, or 0 if unknown. */
static uint64_t mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long kb = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}

/*
 * Reserve the blocks of fd's first `size` bytes, so that no later store to
 * the mapping can find its file system full (a SIGBUS). The space free is
 * checked first, so a region that cannot fit is refused without filling
 * the file system for a moment (other processes write there too). Then
 * fallocate mode 0, which allocates only the holes and never changes a
 * byte already written, so it is safe on an existing region. On a file
 * system in memory (tmpfs: /dev/shm) the reservation is memory, so the
 * size must also fit 80% of the machine's available memory (MemAvailable:
 * a region that takes it all takes the machine down with it). @fresh: the file is
 * new and empty, so where the file system has no fallocate (EOPNOTSUPP),
 * posix_fallocate's fallback, which writes a zero into every block, may
 * be used; an existing file is never written that way (invariant (1)) and
 * stays as it is. @name: the file as the user knows it (not a temporary
 * name). On failure err names the directory, the size asked for and the
 * space free there. Returns 0 or -errno.
 */
static int reserve_space(int fd, const char *name, uint64_t size, bool fresh, char *err,
			 size_t errlen)
{
	char dir[PATH_MAX], want[32], avail[32] = "unknown", total[32] = "?";
	struct statvfs vfs;
	struct statfs fs;
	struct stat sb;
	uint64_t have = 0, need = size, ram = 0;
	bool known = fstatvfs(fd, &vfs) == 0;
	int e = 0;

	if (fstat(fd, &sb) == 0) { /* a reopened file needs only its holes */
		uint64_t got = (uint64_t)sb.st_blocks * 512;
		need = got < size ? size - got : 0;
	}
	if (known) {
		have = (uint64_t)vfs.f_bavail * vfs.f_frsize;
		human_bytes(have, avail, sizeof(avail));
		human_bytes((uint64_t)vfs.f_blocks * vfs.f_frsize, total, sizeof(total));
	}
	if (need > 0 && fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC)
		ram = mem_available();
	if (known && need > have)
		e = ENOSPC;
	else if (ram && need > ram / 5 * 4)
		e = ENOMEM; /* leave the machine a fifth of what it has free */
	else if (need > 0 && fallocate(fd, 0, 0, (off_t)size) != 0) {
		e = errno;
		if (e == EOPNOTSUPP || e == ENOSYS)
			e = fresh ? posix_fallocate(fd, 0, (off_t)size) : 0;
	}
	if (e == 0)
		return 0;
	dir_of(name, dir, sizeof(dir));
	human_bytes(size, want, sizeof(want));
	if (e == ENOMEM) {
		char ramh[32];
		human_bytes(ram, ramh, sizeof(ramh));
		snprintf(err, errlen,
			 "cannot reserve %s (%" PRIu64 " bytes, the 'memory' option) for the region "
			 "file %s in %s: that file system is memory, and the machine has %s "
			 "available (MemAvailable; a region may take 80%% of it); %s free of %s "
			 "on the file system. Choose a smaller 'memory', or persistence process "
			 "with a 'dir' on disk",
			 want, size, name, dir, ramh, avail, total);
		return -ENOMEM;
	}
	snprintf(err, errlen,
		 "cannot reserve %s (%" PRIu64 " bytes, the 'memory' option) for the region "
		 "file %s in %s: %s; %s free of %s on that file system. Free space there, "
		 "choose another 'dir' or a smaller 'memory'",
		 want, size, name, dir, strerror(e), avail, total);
	return -e;
}

/* Map an existing, validated region and mark it open (invariant (2)). */
static int open_existing(struct st_region *r, const struct st_config *cfg, char *err,
			 size_t errlen)
{
	int rc = lock_file(r->fd, r->path, err, errlen);
	if (rc)
		return rc;
	rc = validate(r->fd, r->path, cfg, &r->layout, err, errlen);
	if (rc)
		return rc;
	rc = reserve_space(r->fd, r->path, r->layout.size, false, err, errlen);
	if (rc)
		return rc;
	size_t len = 0;
	r->base = pmem_map_file(r->path, 0, 0, 0, &len, &r->is_pmem);
	if (!r->base) {
		snprintf(err, errlen, "%s: cannot map: %s", r->path, pmem_errormsg());
		return errno ? -errno : -EIO;
	}
	r->mapped_len = len;
	if (len != r->layout.size) { /* the file changed under us since validate() */
		snprintf(err, errlen, "%s: file changed size while opening", r->path);
		pmem_unmap(r->base, len);
		r->base = NULL;
		return ST_ECORRUPT;
	}
	struct st_header *h = st_region_header(r);
	r->reopened = true;
	r->was_clean = h->clean_shutdown == 1;
	h->clean_shutdown = 0;
	h->incarnation++;
	st_region_persist(r, 0, sizeof(*h));
	return 0;
}

/* Create, map and initialize a new region file at r->path. */
static int create_new(struct st_region *r, const struct st_config *cfg, bool tmpname,
		      char *err, size_t errlen)
{
	char tmp[PATH_MAX + 8];
	const char *mk = r->path;
	if (tmpname) {
		snprintf(tmp, sizeof(tmp), "%s.tmp", r->path);
		(void)unlink(tmp); /* a leftover of a crash during creation */
		mk = tmp;
	}
	size_t len = 0;
	int rc;
	r->fd = open(mk, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (r->fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: cannot create: %s", mk, strerror(-rc));
		return rc;
	}
	rc = lock_file(r->fd, mk, err, errlen);
	if (rc)
		goto fail;
	/* The whole size, reserved before the first store (reserve_space);
	 * the blocks read as zeros. */
	rc = reserve_space(r->fd, r->path, r->layout.size, true, err, errlen);
	if (rc)
		goto fail;
	errno = 0;
	r->base = pmem_map_file(mk, 0, 0, 0, &len, &r->is_pmem);
	if (!r->base || len != r->layout.size) {
		rc = r->base ? -EINVAL : -(errno ? errno : EIO);
		snprintf(err, errlen, "%s: cannot map: %s", mk,
			 r->base ? "the file changed size" : pmem_errormsg());
		goto fail;
	}
	r->mapped_len = len;
	/* The file is sparse and reads as zeros: every area but the header
	 * starts out right (empty index, unassigned slabs, free bitmaps). */
	struct st_header *h = st_region_header(r);
	h->magic = ST_MAGIC;
	h->layout_version = ST_LAYOUT_VERSION;
	h->node_id = cfg->node_id;
	h->cluster_id = cfg->cluster_id;
	h->clean_shutdown = 0;
	h->incarnation = 1;
	h->layout = r->layout;
	if (tmpname) {
		/* The header must be durable before the name makes the file
		 * a region that a restart would trust. */
		if (r->is_pmem)
			pmem_persist(h, sizeof(*h));
		else
			(void)pmem_msync(h, sizeof(*h));
		if (rename(tmp, r->path) < 0) {
			rc = -errno;
			snprintf(err, errlen, "%s: cannot rename into place: %s", r->path,
				 strerror(-rc));
			goto fail;
		}
		sync_dir(r->path);
	}
	r->reopened = false;
	r->was_clean = true;
	return 0;
fail:
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	(void)unlink(mk);
	if (r->base)
		pmem_unmap(r->base, len);
	r->base = NULL;
	return rc;
}

/*
 * Persistence none keeps nothing across runs, but a process that died
 * without st_region_close (kill -9, a crash, a failed test) leaves its
 * /dev/shm file behind, holding memory. Remove those of processes that no
 * longer exist. A live pid keeps its file even if the pid was reused: only
 * files that certainly have no owner go.
 */
static void sweep_dead_shm(void)
{
	DIR *d = opendir("/dev/shm");
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		int pid = 0, n = 0;
		if (sscanf(de->d_name, "rckv-%d-node-%*u%n", &pid, &n) != 1 || n == 0 || pid <= 0 ||
		    pid == getpid() || !strstr(de->d_name + n, ".region"))
			continue;
		if (kill(pid, 0) == -1 && errno == ESRCH)
			(void)unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
}

static void pid_copy_path(const struct st_config *cfg, const char *tag, char *out, size_t len)
{
	snprintf(out, len, "/dev/shm/rckv-%d-node-%u-%s.region", (int)getpid(), cfg->node_id, tag);
}

/*
 * A cluster node's log (cfg->wal_ring) keeps its region copy under a name
 * that outlives the process: /dev/shm/rckv-wal-<hash of dir>-node-<id>
 * with .region (the copy), .journal (jring.c) and .dir (dir's path, for
 * the sweep). A restart after kill -9 takes the copy whole, exactly as
 * persistence process takes its file: peers wrote into it while the node
 * was down and keep addresses into it. Only a power cut (or a clean stop,
 * which removes it) sends the start to the checkpoint and the log.
 */
static void stable_copy_base(const char *dir, unsigned node, char *out, size_t len)
{
	char abs[PATH_MAX];
	if (!realpath(dir, abs))
		snprintf(abs, sizeof(abs), "%s", dir);
	uint64_t h = 0xcbf29ce484222325ull;
	for (const char *p = abs; *p; p++)
		h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
	snprintf(out, len, "/dev/shm/rckv-wal-%016" PRIx64 "-node-%u", h, node);
}

static void stable_remove(const char *base)
{
	char p[PATH_MAX + 16];
	static const char *const ext[] = { ".region", ".journal", ".dir" };
	for (unsigned i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s%s", base, ext[i]);
		(void)unlink(p);
	}
}

/* Remove the stable copies whose dir is gone (a test's temporary dir). */
static void sweep_stable_copies(void)
{
	DIR *d = opendir("/dev/shm");
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		size_t n = strlen(de->d_name);
		if (strncmp(de->d_name, "rckv-wal-", 9) != 0 || n < 4 ||
		    strcmp(de->d_name + n - 4, ".dir") != 0)
			continue;
		char path[PATH_MAX + 300], dir[PATH_MAX] = "";
		snprintf(path, sizeof(path), "/dev/shm/%s", de->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		bool ok = fgets(dir, sizeof(dir), f) != NULL;
		fclose(f);
		struct stat sb;
		if (!ok || dir[0] != '/' || stat(dir, &sb) == 0 || errno != ENOENT)
			continue; /* in use, or not known gone (a node writing it now) */
		path[strlen(path) - 4] = '\0';
		stable_remove(path);
	}
	closedir(d);
}

/*
 * Take the copy a killed run left at vpath in place of the region file's
 * mapping (wal_open). Its header keeps what the run had (the peers'
 * incarnations it saw); the incarnation is the one this open gave the
 * file. Returns 0, or 1 when there is no usable copy (then nothing
 * changed).
 */
static int adopt_copy(struct st_region *r, const char *vpath, int *durable_fd)
{
	int vfd = open(vpath, O_RDWR | O_CLOEXEC);
	if (vfd < 0)
		return 1;
	struct stat sb;
	size_t len = 0;
	int is_pmem = 0;
	char *vbase = NULL;
	if (fstat(vfd, &sb) != 0 || (uint64_t)sb.st_size != r->layout.size ||
	    !(vbase = pmem_map_file(vpath, 0, 0, 0, &len, &is_pmem)) || len != r->layout.size)
		goto no;
	const struct st_header *fh = st_region_header(r);
	struct st_header *vh = (struct st_header *)vbase;
	if (vh->magic != fh->magic || vh->layout_version != fh->layout_version ||
	    vh->node_id != fh->node_id || vh->cluster_id != fh->cluster_id ||
	    memcmp(&vh->layout, &fh->layout, sizeof(vh->layout)) != 0)
		goto no;
	vh->incarnation = fh->incarnation;
	vh->clean_shutdown = 0;
	pmem_unmap(r->base, r->mapped_len);
	r->base = vbase;
	r->mapped_len = len;
	r->is_pmem = 0;
	r->was_clean = false;
	*durable_fd = r->fd;
	r->fd = vfd;
	snprintf(r->path, sizeof(r->path), "%s", vpath);
	r->unlink_at_close = true;
	return 0;
no:
	if (vbase)
		pmem_unmap(vbase, len);
	close(vfd);
	(void)unlink(vpath);
	return 1;
}

/*
 * The region file is open, validated (or created), locked and mapped at
 * r->base. Copy it into a fresh volatile file at vpath (pid_copy_path,
 * stable_copy_path) and map that instead; r->fd
 * becomes the volatile file's and the region file's fd is returned in
 * *durable_fd. On failure the caller unmaps r->base and closes r->fd.
 */
static int volatile_copy(struct st_region *r, const char *vpath, int *durable_fd, char *err,
			 size_t errlen)
{
	sweep_dead_shm();
	(void)unlink(vpath);
	int vfd = open(vpath, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (vfd < 0) {
		snprintf(err, errlen, "cannot create %s: %s", vpath, strerror(errno));
		return -errno;
	}
	int rc = 0;
	const uint64_t size = r->layout.size;
	if ((rc = reserve_space(vfd, vpath, size, true, err, errlen)) != 0) {
		close(vfd);
		(void)unlink(vpath);
		return rc;
	}
	/* The region file's data extents, from its mapping (the same page
	 * cache): holes stay holes in the copy. */
	for (uint64_t pos = 0; pos < size;) {
		off_t d = lseek(r->fd, (off_t)pos, SEEK_DATA);
		if (d < 0 || (uint64_t)d >= size)
			break;
		off_t h = lseek(r->fd, d, SEEK_HOLE);
		uint64_t end = h < 0 || (uint64_t)h > size ? size : (uint64_t)h;
		if ((rc = st_pwrite_all(vfd, r->base + d, end - (uint64_t)d, (uint64_t)d)) != 0)
			goto fail;
		pos = end;
	}
	size_t len = 0;
	int is_pmem = 0;
	char *vbase = pmem_map_file(vpath, 0, 0, 0, &len, &is_pmem);
	if (!vbase || len != size) {
		rc = vbase ? -EINVAL : (errno ? -errno : -EIO);
		if (vbase)
			pmem_unmap(vbase, len);
		goto fail;
	}
	pmem_unmap(r->base, r->mapped_len);
	r->base = vbase;
	r->mapped_len = len;
	r->is_pmem = 0; /* the durable medium is reached by copies or a log */
	*durable_fd = r->fd;
	r->fd = vfd;
	snprintf(r->path, sizeof(r->path), "%s", vpath);
	r->unlink_at_close = true;
	return 0;
fail:
	snprintf(err, errlen, "cannot make the volatile copy %s: %s", vpath, strerror(-rc));
	close(vfd);
	(void)unlink(vpath);
	return rc;
}

/* power-sim: the region's pages reach the region file by copies (st.h). */
static int sim_start(struct st_region *r, const struct st_config *cfg, char *err, size_t errlen)
{
	char *buf = malloc(SIM_BUF_BYTES);
	if (!buf) {
		snprintf(err, errlen, "power-sim: out of memory");
		return -ENOMEM;
	}
	char durable[PATH_MAX], vpath[PATH_MAX];
	snprintf(durable, sizeof(durable), "%s", r->path);
	pid_copy_path(cfg, "sim", vpath, sizeof(vpath));
	char verr[PATH_MAX + 100] = "";
	int rc = volatile_copy(r, vpath, &r->sim_fd, verr, sizeof(verr));
	if (rc) {
		snprintf(err, errlen, "power-sim: %s", verr);
		free(buf);
		return rc;
	}
	r->sim_buf = buf;
	r->sim = true;
	r->sim_crash_after = cfg->power_sim_crash_after;
	r->sim_persists = 0;
	pthread_mutex_init(&r->sim_lock, NULL);
	snprintf(r->sim_path, sizeof(r->sim_path), "%s", durable);
	return 0;
}

/*
 * The write-ahead log (st.h): the region file is the last checkpoint.
 * Map a volatile copy of it, replay the log onto the copy, and keep the
 * log's state for st_wal_start.
 */
static int wal_open(struct st_region *r, const struct st_config *cfg, const char *dir,
		    char *err, size_t errlen)
{
	snprintf(r->wal_path, sizeof(r->wal_path), "%s", r->path);
	int dfd = -1, rc = 1;
	char vpath[PATH_MAX], base[PATH_MAX];
	struct st_wal_stats st;
	memset(&st, 0, sizeof(st));
	const uint64_t ck_gen = st_region_header(r)->wal_gen;
	if (cfg->wal_ring) {
		sweep_stable_copies();
		stable_copy_base(dir, cfg->node_id, base, sizeof(base));
		snprintf(vpath, sizeof(vpath), "%.*s.region", (int)sizeof(base) - 8, base);
		rc = adopt_copy(r, vpath, &dfd);
		st.adopted_copy = rc == 0;
	} else {
		stable_copy_base(dir, cfg->node_id, base, sizeof(base));
		stable_remove(base); /* a cluster run's (see the other branch) */
		pid_copy_path(cfg, "wal", vpath, sizeof(vpath));
	}
	char verr[PATH_MAX + 100] = "";
	if (rc == 1 && (rc = volatile_copy(r, vpath, &dfd, verr, sizeof(verr))) != 0) {
		snprintf(err, errlen, "write-ahead log: %s", verr);
		return rc;
	}
	if (cfg->wal_ring) {
		/* Written aside and renamed: a sweep never reads half of it. */
		char dpath[PATH_MAX + 8], tpath[PATH_MAX + 16], abs[PATH_MAX];
		snprintf(dpath, sizeof(dpath), "%.*s.dir", (int)sizeof(base) - 8, base);
		snprintf(tpath, sizeof(tpath), "%s.%d", dpath, (int)getpid());
		FILE *f = fopen(tpath, "w");
		if (f) {
			fputs(realpath(dir, abs) ? abs : dir, f);
			if (fclose(f) != 0 || rename(tpath, dpath) != 0)
				(void)unlink(tpath);
		}
	}
	struct stat sb;
	if (fstat(dfd, &sb) == 0) /* the checkpoint's age, until the next one */
		st.checkpoint_at = (uint64_t)sb.st_mtime;
	close(dfd); /* the lock that counts is lock_fd's: checkpoints rename */
	uint64_t next = 1;
	if (st.adopted_copy) /* newer than the log: only find where it goes on */
		next = st_wal_next_gen(dir, cfg->node_id, ck_gen);
	else
		rc = st_wal_replay_dir(dir, cfg->node_id, r->base, r->layout.size, &next, &st, err,
				       errlen);
	if (rc == 0)
		rc = st_wal_init(r, cfg, next, &st, err, errlen);
	if (rc) {
		pmem_unmap(r->base, r->mapped_len);
		r->base = NULL;
		(void)unlink(r->path);
		return rc;
	}
	if (st.replayed_records || st.torn_bytes)
		r->was_clean = false;
	return 0;
}

/*
 * A region file opened without the log whose dir still holds log
 * segments (the last run had the write-ahead log; this one does not):
 * replay them into the file, make it durable, then drop them.
 */
static int replay_into_file(struct st_region *r, const struct st_config *cfg, const char *dir,
			    char *err, size_t errlen)
{
	struct st_wal_stats st;
	memset(&st, 0, sizeof(st));
	uint64_t next = 1;
	int rc = st_wal_replay_dir(dir, cfg->node_id, r->base, r->layout.size, &next, &st, err,
				   errlen);
	if (rc || st.replayed_segments == 0)
		return rc;
	if (st.replayed_records || st.torn_bytes)
		r->was_clean = false;
	struct st_header *h = st_region_header(r);
	h->wal_gen = next;
	if (r->is_pmem)
		pmem_persist(r->base, r->layout.size);
	else if (pmem_msync(r->base, r->layout.size) != 0)
		return errno ? -errno : -EIO;
	st_wal_remove_segments_below(dir, cfg->node_id, next);
	return 0;
}

/* <dir>/node-<id>.lock, held for as long as the region is open: the region
 * file itself is renamed over by checkpoints (invariant (3)). */
static int lock_dir(struct st_region *r, const char *dir, unsigned node, char *err,
		    size_t errlen)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/node-%u.lock", dir, node);
	r->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (r->lock_fd < 0) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return -errno;
	}
	char what[PATH_MAX + 64];
	snprintf(what, sizeof(what), "%s/node-%u.region", dir, node);
	return lock_file(r->lock_fd, what, err, errlen);
}

int st_region_open(const struct st_config *cfg, struct st_region **out, char *err, size_t errlen)
{
	struct st_region *r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->fd = -1;
	r->lock_fd = -1;
	r->persistence = cfg->persistence;
	int rc = st_layout_compute(cfg->size, cfg->log_nodes, &r->layout, err, errlen);
	if (rc)
		goto fail;
	r->coord = (struct st_coord){ .L = &r->layout, .node = cfg->node_id };

	if (cfg->persistence == ST_PERSIST_NONE) {
		sweep_dead_shm();
		/* Nothing to keep across runs: a fresh shared-memory file. The
		 * pid keeps concurrent servers apart; the counter keeps several
		 * regions of one test process apart. */
		for (int i = 0;; i++) {
			if (i == 0)
				snprintf(r->path, sizeof(r->path), "/dev/shm/rckv-%d-node-%u.region",
					 (int)getpid(), cfg->node_id);
			else
				snprintf(r->path, sizeof(r->path), "/dev/shm/rckv-%d-node-%u-%d.region",
					 (int)getpid(), cfg->node_id, i);
			rc = create_new(r, cfg, false, err, errlen);
			if (rc != -EEXIST || i == 100)
				break;
		}
		if (rc)
			goto fail;
		r->unlink_at_close = true;
		*out = r;
		return 0;
	}

	const char *dir = cfg->dir && *cfg->dir ? cfg->dir : ".";
	if ((size_t)snprintf(r->path, sizeof(r->path), "%s/node-%u.region", dir, cfg->node_id) >=
	    sizeof(r->path)) {
		snprintf(err, errlen, "dir '%s': path too long", dir);
		rc = -ENAMETOOLONG;
		goto fail;
	}
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		rc = -errno;
		snprintf(err, errlen, "cannot create directory %s: %s", dir, strerror(errno));
		goto fail;
	}
	if ((rc = lock_dir(r, dir, cfg->node_id, err, errlen)) != 0)
		goto fail;
	r->fd = open(r->path, O_RDWR | O_CLOEXEC);
	if (r->fd >= 0) {
		rc = open_existing(r, cfg, err, errlen);
	} else if (errno == ENOENT) {
		rc = create_new(r, cfg, true, err, errlen);
	} else {
		rc = -errno;
		snprintf(err, errlen, "%s: cannot open: %s", r->path, strerror(errno));
	}
	if (rc)
		goto fail;
	/* Peers map the file by this path (shm fabric): make it absolute. */
	char abs[PATH_MAX];
	if (realpath(r->path, abs))
		snprintf(r->path, sizeof(r->path), "%s", abs);
	if (cfg->persistence == ST_PERSIST_POWER && cfg->wal && (!r->is_pmem || cfg->wal_on_pmem)) {
		if ((rc = wal_open(r, cfg, dir, err, errlen)) != 0) {
			if (r->base)
				pmem_unmap(r->base, r->mapped_len);
			goto fail;
		}
	} else {
		/* A cluster log's copy left by kill -9 (stable_copy_base) is
		 * not this run's: the log below has every commit. */
		char base[PATH_MAX];
		stable_copy_base(dir, cfg->node_id, base, sizeof(base));
		stable_remove(base);
		rc = replay_into_file(r, cfg, dir, err, errlen);
		if (rc == 0 && cfg->power_sim && cfg->persistence == ST_PERSIST_POWER)
			rc = sim_start(r, cfg, err, errlen);
		if (rc) {
			pmem_unmap(r->base, r->mapped_len);
			goto fail;
		}
	}
	*out = r;
	return 0;
fail:
	if (r->fd >= 0)
		close(r->fd);
	if (r->lock_fd >= 0)
		close(r->lock_fd);
	free(r);
	return rc;
}

void st_region_close(struct st_region *r, bool clean)
{
	if (!r)
		return;
	if (r->wal) {
		st_wal_close(r, clean); /* clean: a last checkpoint, marked clean */
	} else if (clean) {
		struct st_header *h = st_region_header(r);
		/* Everything the header vouches for first, then the flag. */
		st_region_persist(r, 0, r->layout.size);
		h->clean_shutdown = 1;
		st_region_persist(r, 0, sizeof(*h));
	}
	pmem_unmap(r->base, r->mapped_len);
	if (r->unlink_at_close)
		(void)unlink(r->path);
	if (r->fd >= 0)
		close(r->fd); /* drops the flock (invariant (3)) */
	if (r->sim) {
		close(r->sim_fd); /* power-sim: the flock is on the durable file */
		pthread_mutex_destroy(&r->sim_lock);
		free(r->sim_buf);
	}
	if (r->lock_fd >= 0)
		close(r->lock_fd);
	free(r);
}

const char *st_region_path(struct st_region *r)
{
	return r->path;
}
