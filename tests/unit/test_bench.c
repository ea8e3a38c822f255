/*
 * test_bench: rckv-bench's building blocks (bench/ and client/).
 *
 *  - the Zipf generator against the exact Zipf law (chi-square at a fixed
 *    seed), and YCSB's original closed form failing the same test (so the
 *    test has the power to see a real deviation);
 *  - the histogram: exact percentiles on known data, the 0.1% bound above
 *    2048, merging;
 *  - ycsb-t's key chooser: exactly --nodes-per-txn nodes, distinct keys,
 *    and the clear refusals;
 *  - librckv: CRC16 slots equal the server's, RCKV NODES replies, the
 *    cluster file parser;
 *  - INFO parsing, the option parser and the JSON writer;
 *  - the OLTP workloads: their mixes, the calls they draw (KEYS and ARGV
 *    as the scripts read them, TPC-C's warehouses one per node and its
 *    remote shares), and how a script's reply is classified.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/config.h"
#include "bench/hist.h"
#include "bench/info.h"
#include "bench/json.h"
#include "bench/keys.h"
#include "bench/oltp.h"
#include "bench/rng.h"
#include "bench/zipf.h"
#include "client/rckv.h"
#include "placement/placement.h"

static int failures;

#define CHECK(cond)                                                              \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,   \
				__LINE__, #cond);                                \
			failures++;                                              \
		}                                                                \
	} while (0)

/* ---- Zipf ---- */

/* The chi-square critical value for k degrees of freedom at the upper
 * tail probability whose normal quantile is z (Wilson-Hilferty). */
static double chisq_crit(double k, double z)
{
	double a = 2.0 / (9.0 * k);
	double c = 1.0 - a + z * sqrt(a);
	return k * c * c * c;
}

#define Z_0001 3.0902 /* upper 0.1% quantile of the standard normal */

/*
 * Draw `draws` ranks from a generator over n items and return the
 * chi-square statistic against the exact Zipf law P(k) = (k+1)^-theta /
 * zeta(n, theta). Ranks are binned one by one while a rank's expected
 * count is large, then in bins holding at least 50 expected draws.
 * *dof gets bins - 1.
 */
static double zipf_chisq(const struct bench_zipf *z, uint64_t seed, long draws, int *dof)
{
	uint64_t n = z->n;
	long *count = calloc(n, sizeof(long));
	long double *p = calloc(n, sizeof(long double));
	long double zeta = 0;
	struct bench_rng r;

	/* the exact law, summed independently of bench_zeta */
	for (uint64_t k = 0; k < n; k++) {
		p[k] = powl((long double)(k + 1), -(long double)z->theta);
		zeta += p[k];
	}
	bench_rng_seed(&r, seed, 7);
	for (long i = 0; i < draws; i++) {
		uint64_t k = bench_zipf_next(z, &r);
		if (k >= n) {
			CHECK(k < n);
			k = n - 1;
		}
		count[k]++;
	}
	double stat = 0;
	int bins = 0;
	long double e = 0, cum = 0;
	long o = 0;
	for (uint64_t k = 0; k < n; k++) {
		e += p[k] / zeta;
		cum += p[k] / zeta;
		o += count[k];
		/* close the bin once it expects 50 draws, unless what is left
		 * would make a thinner last bin: then the last bin takes it */
		if ((e * draws >= 50 && (1 - cum) * draws >= 50) || k == n - 1) {
			double ed = (double)(e * draws);
			stat += ((double)o - ed) * ((double)o - ed) / ed;
			bins++;
			e = 0;
			o = 0;
		}
	}
	free(count);
	free(p);
	*dof = bins - 1;
	return stat;
}

static void test_zipf_chisq(void)
{
	static const struct {
		uint64_t n;
		double theta;
	} cases[] = {
		{ 1000, 0.2 },   /* rckv-bench's ycsb-t default */
		{ 1000, 0.5 },
		{ 1000, 0.99 },  /* YCSB's default */
		{ 100000, 0.99 },
		{ 1000, 0.0 },   /* uniform */
	};
	const long draws = 1000000;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct bench_zipf z;
		int dof;
		CHECK(bench_zipf_init(&z, cases[i].n, cases[i].theta, BENCH_ZIPF_HEAD_DEFAULT) == 0);
		double stat = zipf_chisq(&z, 42, draws, &dof);
		double crit = chisq_crit(dof, Z_0001);
		if (!(stat < crit))
			fprintf(stderr, "zipf n=%llu theta=%g: chi-square %.1f >= %.1f (dof %d)\n",
				(unsigned long long)cases[i].n, cases[i].theta, stat, crit, dof);
		CHECK(stat < crit);
	}

	/* YCSB's closed form (head 2) over-draws rank 2 by ~17% at theta
	 * 0.99: the same test must reject it, or it could not see anything */
	{
		struct bench_zipf z;
		int dof;
		CHECK(bench_zipf_init(&z, 1000, 0.99, 2) == 0);
		double stat = zipf_chisq(&z, 42, draws, &dof);
		CHECK(stat > 2 * chisq_crit(dof, Z_0001));
	}
}

static void test_zipf_misc(void)
{
	struct bench_zipf a, b;
	struct bench_rng r1, r2;

	/* bad parameters */
	CHECK(bench_zipf_init(&a, 0, 0.5, 256) == -EINVAL);
	CHECK(bench_zipf_init(&a, 10, 1.0, 256) == -EINVAL);
	CHECK(bench_zipf_init(&a, 10, -0.1, 256) == -EINVAL);
	CHECK(bench_zipf_init(&a, 10, 0.5, 1) == -EINVAL);
	CHECK(bench_zipf_init(&a, 10, 0.5, BENCH_ZIPF_HEAD_MAX + 1) == -EINVAL);

	/* growing is the same as building at the larger size */
	CHECK(bench_zipf_init(&a, 100, 0.9, 256) == 0);
	CHECK(bench_zipf_grow(&a, 50000) == 0);
	CHECK(bench_zipf_init(&b, 50000, 0.9, 256) == 0);
	CHECK(fabs(a.zetan - b.zetan) < 1e-9 * b.zetan);
	CHECK(a.head == b.head && fabs(a.b - b.b) < 1e-9);
	CHECK(bench_zipf_grow(&a, 10) == -EINVAL);

	/* the same seed gives the same ranks; another seed others */
	bench_rng_seed(&r1, 5, 1);
	bench_rng_seed(&r2, 5, 1);
	int same = 1;
	for (int i = 0; i < 10000; i++)
		same &= bench_zipf_next(&b, &r1) == bench_zipf_next(&b, &r2);
	CHECK(same);
	bench_rng_seed(&r2, 6, 1);
	int diff = 0;
	for (int i = 0; i < 100; i++)
		diff += bench_zipf_next(&b, &r1) != bench_zipf_next(&b, &r2);
	CHECK(diff > 0);

	/* a one-item generator always draws rank 0; small n stays in range */
	CHECK(bench_zipf_init(&a, 1, 0.99, 256) == 0);
	CHECK(bench_zipf_next(&a, &r1) == 0);
	CHECK(bench_zipf_init(&a, 3, 0.5, 2) == 0);
	int ok = 1;
	for (int i = 0; i < 10000; i++)
		ok &= bench_zipf_next(&a, &r1) < 3;
	CHECK(ok);
}

/* ---- histogram ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v[0..n). */
static uint64_t nearest_rank(const uint64_t *v, size_t n, double p)
{
	double r = ceil(p / 100.0 * (double)n - 1e-9);
	size_t rank = r < 1 ? 1 : (size_t)r;
	return v[rank - 1];
}

static void test_hist(void)
{
	struct bench_hist *h = bench_hist_new(), *h2 = bench_hist_new();
	static const double ps[] = { 0.1, 1, 10, 25, 50, 75, 90, 99, 99.9, 99.99, 100 };
	struct bench_rng r;

	CHECK(h && h2);
	if (!h || !h2)
		return;
	/* empty */
	CHECK(bench_hist_percentile(h, 50) == 0 && h->count == 0);

	/* 1..1000: every percentile is known exactly */
	for (uint64_t v = 1; v <= 1000; v++)
		bench_hist_record(h, v);
	CHECK(bench_hist_percentile(h, 50) == 500);
	CHECK(bench_hist_percentile(h, 90) == 900);
	CHECK(bench_hist_percentile(h, 99) == 990);
	CHECK(bench_hist_percentile(h, 99.9) == 999);
	CHECK(bench_hist_percentile(h, 100) == 1000);
	CHECK(bench_hist_percentile(h, 0.05) == 1);
	CHECK(h->min == 1 && h->max == 1000 && h->count == 1000);
	CHECK(fabs(bench_hist_mean(h) - 500.5) < 1e-9);

	/* random data below 2048: equal to sorting, at every percentile */
	enum { N = 100000 };
	uint64_t *v = malloc(N * sizeof(uint64_t));
	bench_hist_reset(h);
	bench_rng_seed(&r, 1, 2);
	for (int i = 0; i < N; i++) {
		v[i] = bench_rng_below(&r, BENCH_HIST_EXACT);
		bench_hist_record(h, v[i]);
	}
	qsort(v, N, sizeof(uint64_t), cmp_u64);
	for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++)
		CHECK(bench_hist_percentile(h, ps[i]) == nearest_rank(v, N, ps[i]));

	/* wide data (latencies from 1 us to 10 s in ns, log-uniform): never
	 * below the true value, at most 1/1024 above it */
	bench_hist_reset(h);
	bench_hist_reset(h2);
	for (int i = 0; i < N; i++) {
		v[i] = (uint64_t)exp(log(1e3) + bench_rng_double(&r) * (log(1e10) - log(1e3)));
		bench_hist_record(i % 2 ? h : h2, v[i]);
	}
	bench_hist_merge(h, h2); /* the two halves merged are the whole */
	CHECK(h->count == N);
	qsort(v, N, sizeof(uint64_t), cmp_u64);
	CHECK(h->min == v[0] && h->max == v[N - 1]);
	for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
		uint64_t want = nearest_rank(v, N, ps[i]), got = bench_hist_percentile(h, ps[i]);
		CHECK(got >= want);
		CHECK((double)(got - want) <= (double)want / 1024.0);
	}
	free(v);

	/* bucket arithmetic: contiguous, and every value inside its bucket */
	for (unsigned i = 0; i + 1 < BENCH_HIST_COUNTS; i++)
		if (bench_hist_highest(i) + 1 != bench_hist_lowest(i + 1)) {
			CHECK(bench_hist_highest(i) + 1 == bench_hist_lowest(i + 1));
			break;
		}
	int inside = 1;
	for (int i = 0; i < 100000; i++) {
		uint64_t x = bench_rng_next(&r) >> (20 + bench_rng_below(&r, 44));
		unsigned idx = bench_hist_index(x);
		inside &= bench_hist_lowest(idx) <= x && x <= bench_hist_highest(idx);
	}
	CHECK(inside);
	/* huge values share the last bucket, the maximum stays exact */
	bench_hist_reset(h);
	bench_hist_record(h, UINT64_MAX / 2);
	CHECK(bench_hist_percentile(h, 50) == UINT64_MAX / 2 && h->max == UINT64_MAX / 2);
	free(h);
	free(h2);
}

/* ---- keys and the transaction key chooser ---- */

/* n nodes, slots spread evenly in order (as the server's placement does:
 * test_keyslot checks that they agree). */
static void make_map(struct rckv_map *m, int n)
{
	memset(m, 0, sizeof(*m));
	m->nnodes = n;
	for (int i = 0; i < n; i++) {
		m->nodes[i].id = i + 1;
		snprintf(m->nodes[i].host, sizeof(m->nodes[i].host), "127.0.0.1");
		m->nodes[i].port = 7001 + i;
	}
	for (unsigned s = 0; s < RCKV_SLOTS; s++)
		m->owner[s] = (uint8_t)((uint64_t)s * (uint64_t)n / RCKV_SLOTS);
}

static void test_keys(void)
{
	char key[BENCH_KEY_LEN + 1], err[256];
	struct rckv_map m;
	struct bench_keyspace ks;
	struct bench_rng r;
	uint64_t ids[64];
	int nodes[64];

	CHECK(bench_key(key, 42) == 14 && strcmp(key, "user0000000042") == 0);
	CHECK(bench_key(key, BENCH_KEY_MAX_ID) == 14 && strcmp(key, "user9999999999") == 0);

	make_map(&m, 3);
	const uint16_t pids[3] = { 1, 2, 3 };
	struct pl_map *pm = pl_map_spread(pids, 3, 1, 1);
	CHECK(pm);
	CHECK(bench_keyspace_build(&ks, &m, 30000, 0.99, 256) == 0);
	uint64_t total = 0;
	for (int n = 0; n < 3; n++)
		total += ks.count[n];
	CHECK(total == 30000 && ks.neligible == 3);

	bench_rng_seed(&r, 3, 0);
	for (int k = 1; k <= 3; k++) {
		for (int ops = k; ops <= 12; ops += 11 - k) {
			long bad_nodes = 0, bad_dup = 0, bad_range = 0, bad_owner = 0;
			long picked[3] = { 0 };
			CHECK(bench_keyspace_check(&ks, k, ops, err, sizeof(err)) == 0);
			for (int t = 0; t < 20000; t++) {
				bench_txn_keys(&ks, &r, k, ops, ids, nodes);
				int seen[3] = { 0 }, distinct = 0;
				for (int i = 0; i < ops; i++) {
					bad_range += ids[i] >= 30000;
					bench_key(key, ids[i]);
					/* the owner, recomputed with the server's function */
					int own = pl_primary(pm, key, BENCH_KEY_LEN) - 1;
					bad_owner += own != nodes[i];
					if (!seen[own]++)
						distinct++;
					for (int j = 0; j < i; j++)
						bad_dup += ids[i] == ids[j];
				}
				bad_nodes += distinct != k;
				for (int n = 0; n < 3; n++)
					picked[n] += seen[n] > 0;
			}
			CHECK(bad_nodes == 0);
			CHECK(bad_dup == 0);
			CHECK(bad_range == 0);
			CHECK(bad_owner == 0);
			/* nodes are picked uniformly: each in about k/3 of the txns */
			for (int n = 0; n < 3; n++)
				CHECK(fabs((double)picked[n] / 20000.0 - k / 3.0) < 0.03);
		}
	}
	/* the refusals, with reasons a user can act on */
	CHECK(bench_keyspace_check(&ks, 4, 10, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "--nodes-per-txn 4") && strstr(err, "3 nodes"));
	CHECK(bench_keyspace_check(&ks, 3, 2, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "--ops 2"));
	CHECK(bench_keyspace_check(&ks, 0, 2, err, sizeof(err)) == -EINVAL);
	bench_keyspace_free(&ks);
	pl_map_free(pm);

	/* a one-node map: one node per txn works, two is refused */
	make_map(&m, 1);
	CHECK(bench_keyspace_build(&ks, &m, 1000, 0.2, 256) == 0);
	CHECK(bench_keyspace_check(&ks, 1, 10, err, sizeof(err)) == 0);
	CHECK(bench_keyspace_check(&ks, 2, 10, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "1 node;") != NULL);
	bench_keyspace_free(&ks);

	/* records too few for distinct keys on a node */
	make_map(&m, 3);
	CHECK(bench_keyspace_build(&ks, &m, 20, 0.2, 256) == 0);
	CHECK(bench_keyspace_check(&ks, 1, 10, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "--records") != NULL);
	bench_keyspace_free(&ks);
	CHECK(bench_keyspace_build(&ks, &m, 0, 0.2, 256) == -EINVAL);
}

/* ---- librckv ---- */

static void test_keyslot(void)
{
	struct bench_rng r;
	char key[40];

	/* CRC-16/XMODEM check value, and slots Redis Cluster documents */
	CHECK(rckv_crc16("123456789", 9) == 0x31c3);
	CHECK(rckv_keyslot("foo", 3) == 12182);
	CHECK(rckv_keyslot("somekey", 7) == 11058);
	CHECK(rckv_keyslot("{user1000}.following", 20) == rckv_keyslot("user1000", 8));
	CHECK(rckv_keyslot("foo{}bar", 8) == (rckv_crc16("foo{}bar", 8) & 16383));
	CHECK(rckv_keyslot("foo{{bar}}zap", 13) == rckv_keyslot("{bar", 4));
	/* the client's map of a 3-node cluster puts every key on the node
	 * the server's placement does */
	struct rckv_map cm;
	make_map(&cm, 3);
	const uint16_t ids[3] = { 1, 2, 3 };
	struct pl_map *pm = pl_map_spread(ids, 3, 1, 1);
	CHECK(pm);
	bench_rng_seed(&r, 9, 9);
	int agree = 1;
	for (int i = 0; i < 100000; i++) {
		int len = 1 + (int)bench_rng_below(&r, sizeof(key) - 1);
		for (int j = 0; j < len; j++)
			key[j] = "ab{}c0123456789"[bench_rng_below(&r, 15)];
		agree &= cm.nodes[rckv_map_node_of(&cm, key, (size_t)len)].id ==
			 pl_primary(pm, key, (size_t)len);
	}
	CHECK(agree);
	pl_map_free(pm);
}

static redisReply *mk(int type)
{
	redisReply *r = calloc(1, sizeof(*r));
	r->type = type;
	return r;
}

static redisReply *mk_int(long long v)
{
	redisReply *r = mk(REDIS_REPLY_INTEGER);
	r->integer = v;
	return r;
}

static redisReply *mk_str(const char *s)
{
	redisReply *r = mk(REDIS_REPLY_STRING);
	r->len = strlen(s);
	r->str = strdup(s);
	return r;
}

static redisReply *mk_arr(size_t n)
{
	redisReply *r = mk(REDIS_REPLY_ARRAY);
	r->elements = n;
	r->element = calloc(n ? n : 1, sizeof(redisReply *));
	return r;
}

static void free_tree(redisReply *r)
{
	if (!r)
		return;
	for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++)
		free_tree(r->element[i]);
	free(r->element);
	free(r->str);
	free(r);
}

/* [id, host, port, fabric, [[s, e], ...]] with the ranges given flat */
static redisReply *mk_node(int id, int port, const int *ranges, int nranges)
{
	redisReply *n = mk_arr(5);
	n->element[0] = mk_int(id);
	n->element[1] = mk_str("127.0.0.1");
	n->element[2] = mk_int(port);
	n->element[3] = mk_str("");
	n->element[4] = mk_arr((size_t)nranges);
	for (int i = 0; i < nranges; i++) {
		redisReply *rg = mk_arr(2);
		rg->element[0] = mk_int(ranges[2 * i]);
		rg->element[1] = mk_int(ranges[2 * i + 1]);
		n->element[4]->element[i] = rg;
	}
	return n;
}

static void test_map_reply(void)
{
	struct rckv_map m;
	char err[256];
	static const int a[] = { 0, 5000, 10001, 16383 }, b[] = { 5001, 10000 };
	static const int gap[] = { 5001, 9999 }, overlap[] = { 5000, 10000 };

	redisReply *r = mk_arr(2);
	r->element[0] = mk_node(1, 7001, a, 2);
	r->element[1] = mk_node(2, 7002, b, 1);
	CHECK(rckv_map_from_reply(r, &m, err, sizeof(err)) == 0);
	CHECK(m.nnodes == 2 && m.nodes[1].id == 2 && m.nodes[1].port == 7002);
	CHECK(m.owner[0] == 0 && m.owner[5000] == 0 && m.owner[5001] == 1 &&
	      m.owner[10000] == 1 && m.owner[10001] == 0 && m.owner[16383] == 0);
	CHECK(rckv_map_node_of(&m, "foo", 3) == 0); /* slot 12182 */
	free_tree(r);

	r = mk_arr(2); /* slot 10000 owned by nobody */
	r->element[0] = mk_node(1, 7001, a, 2);
	r->element[1] = mk_node(2, 7002, gap, 1);
	CHECK(rckv_map_from_reply(r, &m, err, sizeof(err)) == RCKV_ERANGE);
	CHECK(strstr(err, "slot 10000 has no owner") != NULL);
	free_tree(r);

	r = mk_arr(2); /* slot 5000 claimed twice */
	r->element[0] = mk_node(1, 7001, a, 2);
	r->element[1] = mk_node(2, 7002, overlap, 1);
	CHECK(rckv_map_from_reply(r, &m, err, sizeof(err)) == RCKV_ERANGE);
	free_tree(r);

	r = mk_arr(1); /* wrong shape */
	r->element[0] = mk_int(3);
	CHECK(rckv_map_from_reply(r, &m, err, sizeof(err)) == RCKV_EPROTO);
	free_tree(r);
	r = mk(REDIS_REPLY_NIL);
	CHECK(rckv_map_from_reply(r, &m, err, sizeof(err)) == RCKV_EPROTO);
	free_tree(r);

	rckv_map_single(&m, "10.0.0.1", 6380);
	CHECK(m.nnodes == 1 && m.owner[16383] == 0 && m.nodes[0].port == 6380);
}

static void test_cluster_file(void)
{
	struct rckv_node n;
	struct rckv_cluster_file cf;
	char err[512], path[] = "/tmp/test_bench_cluster_XXXXXX";

	CHECK(rckv_cluster_parse_line("cluster-node 1   127.0.0.1:7001   127.0.0.1:8001", &n, err,
				      sizeof(err)) == 1);
	CHECK(n.id == 1 && !strcmp(n.host, "127.0.0.1") && n.port == 7001 &&
	      !strcmp(n.fabric, "127.0.0.1:8001"));
	CHECK(rckv_cluster_parse_line("  node 2 [::1]:7002   # v6", &n, err, sizeof(err)) == 1);
	CHECK(n.id == 2 && !strcmp(n.host, "::1") && n.port == 7002 && n.fabric[0] == '\0');
	CHECK(rckv_cluster_parse_line("", &n, err, sizeof(err)) == 0);
	CHECK(rckv_cluster_parse_line("# node 1 a:1", &n, err, sizeof(err)) == 0);
	CHECK(rckv_cluster_parse_line("fabric shm", &n, err, sizeof(err)) == 0);
	CHECK(rckv_cluster_parse_line("cluster-node 1", &n, err, sizeof(err)) == RCKV_EPARSE);
	CHECK(strstr(err, "cluster-node <id>") != NULL);
	CHECK(rckv_cluster_parse_line("node x h:1", &n, err, sizeof(err)) == RCKV_EPARSE);
	CHECK(rckv_cluster_parse_line("node 1 host", &n, err, sizeof(err)) == RCKV_EPARSE);
	CHECK(strstr(err, "host:port") != NULL);
	CHECK(rckv_cluster_parse_line("node 1 h:99999", &n, err, sizeof(err)) == RCKV_EPARSE);
	CHECK(rckv_cluster_parse_line("node 1", &n, err, sizeof(err)) == RCKV_EPARSE);
	CHECK(rckv_cluster_parse_line("node 1 h:1 f r:2 extra", &n, err, sizeof(err)) == RCKV_EPARSE);
	/* The raft address, a fourth word, is the server's alone. */
	CHECK(rckv_cluster_parse_line("node 1 h:1 f:2 r:3", &n, err, sizeof(err)) == 1 && n.port == 1);

	int fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	FILE *f = fdopen(fd, "w");
	fputs("# three local nodes\nfabric shm\n\ncluster-node 1 127.0.0.1:7001 shm:1\n"
	      "cluster-node 2 127.0.0.1:7002 shm:2\r\nnode 3 localhost:7003 shm:3\nmemory 256mb\n",
	      f);
	fclose(f);
	CHECK(rckv_cluster_file_read(path, &cf, err, sizeof(err)) == 0);
	CHECK(cf.n == 3 && cf.nodes[2].id == 3 && !strcmp(cf.nodes[2].host, "localhost") &&
	      cf.nodes[1].port == 7002 && !strcmp(cf.nodes[1].fabric, "shm:2"));

	f = fopen(path, "w");
	fputs("node 1 a:1\nnode 1 b:2\n", f);
	fclose(f);
	CHECK(rckv_cluster_file_read(path, &cf, err, sizeof(err)) == RCKV_ERANGE);
	CHECK(strstr(err, ":2: node id 1 listed twice") != NULL);

	f = fopen(path, "w");
	fputs("node 1 a:1\nnode 2 b\n", f);
	fclose(f);
	CHECK(rckv_cluster_file_read(path, &cf, err, sizeof(err)) == RCKV_EPARSE);
	CHECK(strstr(err, ":2: bad address") != NULL);

	f = fopen(path, "w");
	fputs("# nothing\n", f);
	fclose(f);
	CHECK(rckv_cluster_file_read(path, &cf, err, sizeof(err)) == RCKV_EPARSE);
	unlink(path);
	CHECK(rckv_cluster_file_read(path, &cf, err, sizeof(err)) == -ENOENT);
}

/* ---- INFO, options, JSON ---- */

static void test_info(void)
{
	static const char rckv[] =
		"# Server\r\nredis_version:7.0.15\r\nprocess_id:42\r\nserver_name:rckv\r\n\r\n"
		"# Stats\r\ntotal_commands_processed:10\r\ntxn_committed:100\r\ntxn_aborts:5\r\n"
		"txn_retries:5\r\ntxn_timeouts:0\r\n\r\n# CPU\r\nused_cpu_sys:1.500000\r\n"
		"used_cpu_user:2.250000\r\n\r\n# CC\r\ncc_protocol:silo\r\n\r\n# Fabric\r\n"
		"fabric_txns:100\r\nfabric_reads:300\r\nfabric_writes:100\r\nfabric_cas:50\r\n"
		"fabric_faa:0\r\nfabric_round_trips:250\r\n";
	static const char redis[] = "# Server\r\nredis_version:7.0.15\r\n# CPU\r\n"
				    "used_cpu_sys:1.0\r\nused_cpu_user:1.0\r\n";
	struct bench_info a, b, d;

	bench_info_parse(rckv, sizeof(rckv) - 1, &a);
	CHECK(a.has_txn && a.has_fabric && a.has_cpu);
	CHECK(a.txn_committed == 100 && a.txn_aborts == 5 && a.fab_round_trips == 250);
	CHECK(bench_info_verbs(&a) == 450 && a.pid == 42 && a.commands == 10);
	CHECK(fabs(a.cpu_s - 3.75) < 1e-9);
	CHECK(!strcmp(a.cc, "silo") && !strcmp(a.server, "rckv") && !strcmp(a.version, "7.0.15"));
	b = a;
	b.txn_committed = 160;
	b.fab_txns = 160;
	b.cpu_s = 4.75;
	bench_info_delta(&a, &b, &d);
	CHECK(d.txn_committed == 60 && d.fab_txns == 60 && d.txn_aborts == 0);
	CHECK(fabs(d.cpu_s - 1.0) < 1e-9);
	bench_info_add(&d, &a, false);
	CHECK(d.txn_committed == 160 && d.has_txn);

	bench_info_parse(redis, sizeof(redis) - 1, &b);
	CHECK(!b.has_txn && !b.has_fabric && b.has_cpu && fabs(b.cpu_s - 2.0) < 1e-9);
	bench_info_add(&d, &b, false);
	CHECK(!d.has_txn); /* known only if every node reports it */
}

static int parse(struct bench_config *c, char *err, size_t errlen, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;

	argv[argc++] = "rckv-bench";
	va_start(ap, errlen);
	for (char *a; (a = va_arg(ap, char *));)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	return bench_config_parse(c, argc, argv, err, errlen);
}

static void test_config(void)
{
	struct bench_config c;
	char err[512];

	CHECK(parse(&c, err, sizeof(err), "ycsb-t", NULL) == 0);
	CHECK(c.workload == BW_YCSB_T && c.zipf == 0.2 && c.ops == 10 && c.write_ratio == 0.2);
	CHECK(c.records == 1000000 && c.value_size == 1000 && c.nodes_per_txn == 2);
	CHECK(c.rounds == 1 && !c.compare);
	CHECK(parse(&c, err, sizeof(err), "--port", "7000", "ycsb-a", "--records", "10k",
		    "--compare", "localhost:6379", NULL) == 0);
	CHECK(c.workload == BW_YCSB_A && c.zipf == 0.99 && c.port == 7000 && c.records == 10000);
	CHECK(c.compare && !strcmp(c.compare_host, "localhost") && c.compare_port == 6379);
	CHECK(c.rounds == 2);
	CHECK(parse(&c, err, sizeof(err), "ycsb-t", "--sweep", "cc=nowait,silo", "--sweep",
		    "zipf=0,0.5,0.99", NULL) == 0);
	CHECK(c.nsweeps == 2 && c.sweeps[1].nvalues == 3 && !strcmp(c.sweeps[1].values[2], "0.99"));
	CHECK(bench_config_set(&c, "zipf", "0.7", err, sizeof(err)) == 0 && c.zipf == 0.7);
	CHECK(bench_config_set(&c, "records", "5", err, sizeof(err)) == -1);

	CHECK(parse(&c, err, sizeof(err), NULL) == -1 && strstr(err, "no workload"));
	CHECK(parse(&c, err, sizeof(err), "ycsb-z", NULL) == -1 && strstr(err, "unknown workload"));
	CHECK(parse(&c, err, sizeof(err), "ycsb-t", "--zipf", "1", NULL) == -1);
	CHECK(parse(&c, err, sizeof(err), "ycsb-t", "--sweep", "zipf=0,1.5", NULL) == -1);
	CHECK(parse(&c, err, sizeof(err), "ycsb-t", "--port", "1", "--cluster", "x", NULL) == -1);
	CHECK(parse(&c, err, sizeof(err), "ycsb-t", "--bogus", NULL) == -1 &&
	      strstr(err, "--bogus"));
	CHECK(parse(&c, err, sizeof(err), "ycsb-t", "--ops", NULL) == -1 && strstr(err, "needs"));
	CHECK(parse(&c, err, sizeof(err), "load", "--compare", "h:1", NULL) == -1);
}

static void test_json(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct bench_json j;

	bench_json_init(&j, f, false);
	bench_json_obj(&j, NULL);
	bench_json_str(&j, "s", "a\"b\\c\n");
	bench_json_num(&j, "x", 0.25);
	bench_json_num(&j, "nan", NAN);
	bench_json_arr(&j, "a");
	bench_json_int(&j, NULL, -3);
	bench_json_bool(&j, NULL, true);
	bench_json_null(&j, NULL);
	bench_json_end_arr(&j);
	bench_json_obj(&j, "empty");
	bench_json_end_obj(&j);
	bench_json_uint(&j, "u", 18446744073709551615ull);
	bench_json_end_obj(&j);
	fclose(f);
	CHECK(!strcmp(buf, "{\"s\":\"a\\\"b\\\\c\\n\",\"x\":0.25,\"nan\":null,\"a\":[-3,true,null],"
			   "\"empty\":{},\"u\":18446744073709551615}"));
	free(buf);
}

/* ---- OLTP workloads ---- */

static struct bench_oltp_call oltp_call;

static const char *call_key(int i)
{
	static char buf[BENCH_OLTP_BUF];
	memcpy(buf, oltp_call.buf + oltp_call.koff[i], oltp_call.klen[i]);
	buf[oltp_call.klen[i]] = '\0';
	return buf;
}

/* Two buffers in turn: two results may meet in one strcmp. */
static const char *call_arg(int i)
{
	static char bufs[2][BENCH_OLTP_BUF];
	static int turn;
	char *buf = bufs[turn ^= 1];
	memcpy(buf, oltp_call.buf + oltp_call.aoff[i], oltp_call.alen[i]);
	buf[oltp_call.alen[i]] = '\0';
	return buf;
}

static void draw(const struct bench_oltp_ops *ops, const void *st,
		 const struct bench_config *cfg, struct bench_rng *r, int type)
{
	memset(&oltp_call, 0, sizeof(oltp_call));
	oltp_call.type = type;
	ops->next(st, cfg, r, 1700000000L, &oltp_call);
}

static void test_oltp(void)
{
	const struct bench_oltp_ops *all[3] = { &bench_smallbank, &bench_tpcc, &bench_tatp };
	struct bench_config cfg;
	struct rckv_map m;
	struct bench_rng r;
	char sig[512], err[256];

	for (int w = 0; w < 3; w++) {
		int sum = 0;
		CHECK(all[w]->ntypes <= BENCH_OLTP_MAX_TYPES);
		for (int t = 0; t < all[w]->ntypes; t++) {
			sum += all[w]->mix[t];
			CHECK(all[w]->scripts[t] && strstr(all[w]->scripts[t], "return"));
			/* Redis's sandbox: no globals */
			CHECK(!strstr(all[w]->scripts[t], "\nfunction "));
		}
		CHECK(sum == 100);
	}

	/* replies */
	redisReply rep = { 0 };
	int64_t delta;
	rep.type = REDIS_REPLY_INTEGER;
	rep.integer = -7;
	CHECK(bench_oltp_classify(&rep, &delta) == BO_COMMIT && delta == -7);
	rep.type = REDIS_REPLY_ERROR;
	rep.str = (char *)"USERABORT smallbank: insufficient funds";
	CHECK(bench_oltp_classify(&rep, &delta) == BO_USER_ABORT && delta == 0);
	rep.str = (char *)"NOSCRIPT No matching script. Please use EVAL.";
	CHECK(bench_oltp_classify(&rep, &delta) == BO_NOSCRIPT);
	rep.str = (char *)"ERR tpcc: no such stock";
	CHECK(bench_oltp_classify(&rep, &delta) == BO_ERROR);
	rep.type = REDIS_REPLY_STATUS;
	rep.str = (char *)"OK";
	CHECK(bench_oltp_classify(&rep, &delta) == BO_COMMIT && delta == 0);

	/* TPC-C on 3 nodes, 3 warehouses: one per node */
	const char *argv[] = { "rckv-bench", "tpcc", "--warehouses", "3", "--items", "1000",
			       "--customers", "30" };
	CHECK(bench_config_parse(&cfg, 8, (char **)argv, err, sizeof(err)) == 0);
	make_map(&m, 3);
	void *st = calloc(1, bench_tpcc.state_size);
	CHECK(st && bench_tpcc.setup(st, &cfg, &m, sig, sizeof(sig), err, sizeof(err)) == 0);
	bench_rng_seed(&r, 9, 1);
	int owner_seen[3] = { 0 };
	long lines = 0, remote_lines = 0, payments = 0, remote_payments = 0, rollbacks = 0;
	for (int i = 0; i < 20000; i++) {
		draw(&bench_tpcc, st, &cfg, &r, 0); /* NewOrder */
		int n = atoi(call_arg(4));
		CHECK(n >= 5 && n <= 15);
		CHECK(oltp_call.nkeys == 3 + 2 * n && oltp_call.nargs == 7 + 3 * n);
		const char *home = call_arg(0);
		owner_seen[rckv_map_node_of(&m, home, strlen(home))] = 1;
		for (int k = 0; k < n; k++) {
			lines++;
			remote_lines += strcmp(call_arg(8 + 3 * k), call_arg(1)) != 0;
		}
		rollbacks += atoi(call_arg(7 + 3 * (n - 1))) == 1001;
		draw(&bench_tpcc, st, &cfg, &r, 1); /* Payment */
		CHECK(oltp_call.nkeys == 4 && oltp_call.nargs == 9);
		payments++;
		remote_payments += strcmp(call_arg(1), call_arg(3)) != 0;
	}
	CHECK(owner_seen[0] && owner_seen[1] && owner_seen[2]);
	/* TPC-C: 1% of lines and 15% of payments remote, 1% of NewOrders roll back */
	CHECK(fabs((double)remote_lines / lines - 0.01) < 0.002);
	CHECK(fabs((double)remote_payments / payments - 0.15) < 0.01);
	CHECK(rollbacks > 100 && rollbacks < 300);
	draw(&bench_tpcc, st, &cfg, &r, 3); /* Delivery: the ten cursors */
	CHECK(oltp_call.nkeys == 10 && strstr(call_key(9), ":dn:10"));
	free(st);

	/* SmallBank: two distinct accounts; hot ones 90% of the time */
	const char *sargv[] = { "rckv-bench", "smallbank", "--accounts", "1000" };
	CHECK(bench_config_parse(&cfg, 4, (char **)sargv, err, sizeof(err)) == 0);
	st = calloc(1, bench_smallbank.state_size);
	CHECK(st && bench_smallbank.setup(st, &cfg, &m, sig, sizeof(sig), err, sizeof(err)) == 0);
	long hot = 0, same = 0;
	for (int i = 0; i < 20000; i++) {
		draw(&bench_smallbank, st, &cfg, &r, 3); /* SendPayment */
		CHECK(oltp_call.nkeys == 2 && oltp_call.nargs == 1);
		char a[BENCH_OLTP_BUF];
		snprintf(a, sizeof(a), "%s", call_key(0));
		same += !strcmp(a, call_key(1));
		hot += atoi(a + 2) < 40; /* "{a<id>}:c", the first 4% */
	}
	CHECK(same == 0);
	CHECK(fabs(hot / 20000.0 - (0.9 + 0.1 * 0.04)) < 0.01);
	free(st);
	rckv_map_single(&m, "127.0.0.1", 1);
}

int main(void)
{
	test_zipf_chisq();
	test_zipf_misc();
	test_hist();
	test_keys();
	test_keyslot();
	test_map_reply();
	test_cluster_file();
	test_info();
	test_config();
	test_json();
	test_oltp();
	if (failures) {
		fprintf(stderr, "test_bench: %d check(s) failed\n", failures);
		return 1;
	}
	printf("test_bench: all checks passed\n");
	return 0;
}
