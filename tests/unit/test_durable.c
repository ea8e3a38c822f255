/*
 * test_durable: unit tests of persistence power's pieces below the server:
 * the power-loss simulation of storage/region.c (power-sim) and the range
 * merging of the group commit (cc/durable.c).
 *
 * Covers: in power-sim, a persisted range survives an unclean close (the
 * power cut) and an unpersisted one does not, at page granularity (a
 * neighbour in a persisted page survives with it); a clean close keeps
 * everything; the persist counter; a cut at a chosen persist
 * (power_sim_crash_after) kills the process with SIGKILL after half the
 * pages of that persist, and nothing later reaches the file; FLUSHALL-style
 * hole punching reaches the file only when persisted. durable_merge sorts,
 * rounds to pages, merges touching ranges, keeps nodes apart.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cc/durable.h"
#include "storage/st.h"

static char tmpdir[64];
static int failures;

#define CHECK(c)                                                                        \
	do {                                                                            \
		if (!(c)) {                                                             \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
			failures++;                                                     \
		}                                                                       \
	} while (0)

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(p);
}

static void cleanup(void)
{
	if (tmpdir[0])
		nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

#define PG 4096u

static struct st_config sim_cfg(uint64_t crash_after)
{
	return (struct st_config){ .dir = tmpdir, .node_id = 1, .size = 16u << 20,
				   .log_nodes = 1, .persistence = ST_PERSIST_POWER,
				   .power_sim = true, .power_sim_crash_after = crash_after };
}

static struct st_region *open_sim(uint64_t crash_after)
{
	struct st_config c = sim_cfg(crash_after);
	struct st_region *r = NULL;
	char err[256] = "";
	int rc = st_region_open(&c, &r, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "st_region_open: %d %s\n", rc, err);
		failures++;
		exit(1);
	}
	return r;
}

/* The first byte of page p of the slab area, where nothing else writes. */
static char *page_at(struct st_region *r, unsigned p, uint64_t *off)
{
	*off = st_region_layout(r)->slab_off + (uint64_t)p * PG;
	return (char *)st_region_base(r) + *off;
}

static void test_discard_unpersisted(void)
{
	struct st_region *r = open_sim(0);
	CHECK(strstr(st_region_path(r), "/dev/shm/") != NULL);
	CHECK(strstr(st_region_durable_path(r), tmpdir) != NULL);
	uint64_t before = st_region_sim_persists(r);
	uint64_t oa, ob, oc;
	char *a = page_at(r, 0, &oa), *b = page_at(r, 1, &ob), *c = page_at(r, 10, &oc);
	memcpy(a, "persisted", 10);
	memcpy(a + 100, "neighbour", 10); /* same page as a: goes with it */
	memcpy(b, "next page", 10);       /* the page after: not persisted */
	memcpy(c, "far away", 9);
	CHECK(st_region_persist_checked(r, oa, 10) == 0);
	CHECK(st_region_sim_persists(r) == before + 1);
	st_region_close(r, false); /* the power cut */

	r = open_sim(0);
	CHECK(!st_region_was_clean(r));
	a = page_at(r, 0, &oa);
	b = page_at(r, 1, &ob);
	c = page_at(r, 10, &oc);
	CHECK(memcmp(a, "persisted", 10) == 0);
	CHECK(memcmp(a + 100, "neighbour", 10) == 0);
	CHECK(b[0] == 0);
	CHECK(c[0] == 0);
	/* A clean close keeps everything. */
	memcpy(b, "kept too", 9);
	st_region_close(r, true);
	r = open_sim(0);
	CHECK(st_region_was_clean(r));
	b = page_at(r, 1, &ob);
	CHECK(memcmp(b, "kept too", 9) == 0);
	st_region_close(r, true);
}

/* A large persisted range with holes in the volatile copy punches them
 * out of the durable file (a FLUSHALL that persisted), and only then. */
static void test_holes(void)
{
	struct st_region *r = open_sim(0);
	uint64_t o;
	for (unsigned p = 0; p < 200; p++)
		memcpy(page_at(r, p, &o), "data", 4);
	st_region_close(r, true);
	r = open_sim(0);
	char *base = page_at(r, 0, &o);
	/* Zero 200 pages of the mapping by punching the volatile file, as
	 * st_flush does through r->fd, without persisting... */
	int vfd = open(st_region_path(r), O_RDWR);
	CHECK(vfd >= 0);
	CHECK(fallocate(vfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)o,
			200 * PG) == 0);
	CHECK(base[0] == 0);
	st_region_close(r, false);
	r = open_sim(0);
	CHECK(memcmp(page_at(r, 199, &o), "data", 4) == 0); /* not persisted: back */
	vfd = open(st_region_path(r), O_RDWR);
	page_at(r, 0, &o);
	CHECK(fallocate(vfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)o,
			200 * PG) == 0);
	close(vfd);
	CHECK(st_region_persist_checked(r, o, 200 * PG) == 0); /* > 64 pages: by extents */
	st_region_close(r, false);
	r = open_sim(0);
	CHECK(page_at(r, 0, &o)[0] == 0);
	CHECK(page_at(r, 199, &o)[0] == 0);
	st_region_close(r, true);
}

/* A cut at persist N: the child dies by SIGKILL; the file has persists
 * 1..N-1 and the first half of N's pages. */
static void test_crash_after(void)
{
	struct st_region *r = open_sim(0);
	uint64_t at_open = st_region_sim_persists(r); /* persists open itself makes */
	st_region_close(r, true);
	pid_t pid = fork();
	if (pid == 0) {
		/* open's own persists + ours: cut at our second */
		struct st_region *c = open_sim(at_open + 2);
		uint64_t o1, o2, o3;
		memcpy(page_at(c, 20, &o1), "first", 6);
		memcpy(page_at(c, 30, &o2), "second-a", 9);
		memcpy(page_at(c, 31, &o3), "second-b", 9);
		(void)st_region_persist_checked(c, o1, 6);
		(void)st_region_persist_checked(c, o2, 2 * PG); /* the cut: page 30 only */
		_exit(3); /* not reached */
	}
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	r = open_sim(0);
	uint64_t o;
	CHECK(memcmp(page_at(r, 20, &o), "first", 6) == 0);
	CHECK(memcmp(page_at(r, 30, &o), "second-a", 9) == 0);
	CHECK(page_at(r, 31, &o)[0] == 0);
	st_region_close(r, true);
}

static void test_merge(void)
{
	struct fab_range r[] = {
		{ .node = 2, .off = 8192, .len = 8 },
		{ .node = 1, .off = 5000, .len = 100 },   /* page 1 */
		{ .node = 1, .off = 4096, .len = 8 },     /* page 1: merges */
		{ .node = 1, .off = 8190, .len = 4 },     /* pages 1-2: merges */
		{ .node = 1, .off = 20480, .len = 4096 }, /* page 5 exactly */
		{ .node = 1, .off = 16384, .len = 0 },    /* empty: dropped */
		{ .node = 2, .off = 0, .len = 1 },
	};
	size_t n = durable_merge(r, sizeof(r) / sizeof(r[0]), PG);
	CHECK(n == 4);
	CHECK(r[0].node == 1 && r[0].off == 4096 && r[0].len == 2 * PG);
	CHECK(r[1].node == 1 && r[1].off == 20480 && r[1].len == PG);
	CHECK(r[2].node == 2 && r[2].off == 0 && r[2].len == PG);
	CHECK(r[3].node == 2 && r[3].off == 8192 && r[3].len == PG);
	/* Touching pages merge into one range. */
	struct fab_range t[] = { { .node = 1, .off = 0, .len = 4096 },
				 { .node = 1, .off = 4096, .len = 1 } };
	CHECK(durable_merge(t, 2, PG) == 1 && t[0].len == 2 * PG);
	CHECK(durable_merge(t, 0, PG) == 0);
}

int main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/rckv-test-durable-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	atexit(cleanup);
	test_merge();
	test_discard_unpersisted();
	test_holes();
	test_crash_after();
	if (failures) {
		fprintf(stderr, "test_durable: %d failures\n", failures);
		return 1;
	}
	printf("test_durable: all passed\n");
	return 0;
}
