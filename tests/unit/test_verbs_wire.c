/*
 * test_verbs_wire: the verbs fabric backend without an RDMA device.
 *
 * Part 1 tests the pure module rdma/verbs_wire.c: the queue-pair bootstrap
 * messages (byte layout, round trip, wrong magic, wrong version, truncation,
 * field bounds), the bounce ring, the bounce layout of a part, fence
 * planning, GID choice and the small parsers.
 *
 * Part 2 runs rdma/verbs.c itself against a fake libibverbs defined in this
 * file. The test program's own definitions of ibv_open_device, ibv_create_qp,
 * ... take precedence over libibverbs.so's at link time (the backend is
 * linked in statically from rckv_core), and the fake context's ops table
 * provides ibv_post_send, ibv_poll_cq and ibv_req_notify_cq. The fake is a
 * small NIC: it checks the QP state machine and the attributes each
 * transition requires, that connected QPs name each other with matching
 * QPNs, PSNs, MTU and addresses, keys, bounds and access rights of every
 * WR, and that the CQ never overruns; it executes WRs in order on process
 * memory, completes only signaled WRs (failed and flushed ones always), and
 * raises a completion-channel event when an armed CQ gets an entry. It
 * counts live objects, so every test also checks that close releases
 * everything. What it cannot show is how a real NIC or Soft-RoCE behaves;
 * README 'Running on RDMA hardware' says how to run that.
 *
 * One test calls the real libibverbs (dlsym RTLD_NEXT): on a machine without
 * RDMA devices, fab_open must fail with the message the server prints.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdma/fab.h"
#include "rdma/fab_internal.h"
#include "rdma/verbs_wire.h"
#include "rpc_handlers.h"

static int failures;

#define CHECK(cond)                                                              \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,   \
				__LINE__, #cond);                                \
			failures++;                                              \
		}                                                                \
	} while (0)

/* ======================= part 1: pure helpers ======================= */

static struct verbs_qp_req sample_req(void)
{
	struct verbs_qp_req r = { .from = 63, .worker = 0xbeef, .lid = 0xfffe, .qpn = 0xffffff,
				  .psn = 0xabcdef, .mtu = IBV_MTU_4096, .rd_atomic = 255 };
	for (int i = 0; i < 16; i++)
		r.gid[i] = (uint8_t)(0xa0 + i);
	return r;
}

static struct verbs_qp_rep sample_rep(void)
{
	struct verbs_qp_rep r = { .status = VERBS_ST_OK, .lid = 7, .qpn = 0x123456, .psn = 1,
				  .mtu = IBV_MTU_256, .rd_atomic = 16, .rkey = 0xdeadbeef,
				  .err = 0, .base = 0x7f0000001000ull, .size = 1ull << 33 };
	for (int i = 0; i < 16; i++)
		r.gid[i] = (uint8_t)i;
	return r;
}

/* Field by field: the structs have padding that encode never reads. */
static bool req_eq(const struct verbs_qp_req *a, const struct verbs_qp_req *b)
{
	return a->from == b->from && a->worker == b->worker && a->lid == b->lid &&
	       memcmp(a->gid, b->gid, 16) == 0 && a->qpn == b->qpn && a->psn == b->psn &&
	       a->mtu == b->mtu && a->rd_atomic == b->rd_atomic;
}

static bool rep_eq(const struct verbs_qp_rep *a, const struct verbs_qp_rep *b)
{
	return a->status == b->status && a->lid == b->lid && memcmp(a->gid, b->gid, 16) == 0 &&
	       a->qpn == b->qpn && a->psn == b->psn && a->mtu == b->mtu &&
	       a->rd_atomic == b->rd_atomic && a->rkey == b->rkey && a->err == b->err &&
	       a->base == b->base && a->size == b->size;
}

static void test_req_codec(void)
{
	struct verbs_qp_req r = sample_req(), d;
	uint8_t b[VERBS_REQ_BYTES];
	verbs_req_encode(&r, b);
	/* The layout of verbs_wire.h, little-endian, byte for byte. */
	CHECK(memcmp(b, "KVRQ", 4) == 0);
	CHECK(b[4] == VERBS_WIRE_VERSION && b[5] == 0);
	CHECK(b[6] == 63 && b[7] == 0);
	CHECK(b[8] == 0xef && b[9] == 0xbe);
	CHECK(b[10] == 0xfe && b[11] == 0xff);
	CHECK(b[12] == 0xa0 && b[27] == 0xaf);
	CHECK(b[28] == 0xff && b[29] == 0xff && b[30] == 0xff && b[31] == 0);
	CHECK(b[32] == 0xef && b[33] == 0xcd && b[34] == 0xab && b[35] == 0);
	CHECK(b[36] == IBV_MTU_4096 && b[37] == 255 && b[38] == 0 && b[39] == 0);
	uint16_t ver = 0;
	CHECK(verbs_req_decode(b, sizeof(b), &d, &ver) == 0);
	CHECK(ver == VERBS_WIRE_VERSION);
	CHECK(req_eq(&r, &d));

	/* Wrong magic, and a reply where a request is expected. */
	uint8_t bad[VERBS_REQ_BYTES];
	memcpy(bad, b, sizeof(b));
	bad[0] ^= 1;
	CHECK(verbs_req_decode(bad, sizeof(bad), &d, NULL) == -EBADMSG);
	struct verbs_qp_rep rp = sample_rep();
	uint8_t rb[VERBS_REP_BYTES];
	verbs_rep_encode(&rp, rb);
	CHECK(verbs_req_decode(rb, VERBS_REQ_BYTES, &d, NULL) == -EBADMSG);

	/* Another version, even of another size, is reported as a version. */
	memcpy(bad, b, sizeof(b));
	bad[4] = 2;
	ver = 0;
	CHECK(verbs_req_decode(bad, sizeof(bad), &d, &ver) == -EPROTONOSUPPORT);
	CHECK(ver == 2);
	CHECK(verbs_req_decode(bad, 12, &d, &ver) == -EPROTONOSUPPORT);

	/* Truncated or padded. */
	for (size_t len = 0; len < sizeof(b); len++)
		CHECK(verbs_req_decode(b, len, &d, NULL) == -EMSGSIZE);
	uint8_t longer[VERBS_REQ_BYTES + 1] = { 0 };
	memcpy(longer, b, sizeof(b));
	CHECK(verbs_req_decode(longer, sizeof(longer), &d, NULL) == -EMSGSIZE);

	/* Field bounds: each out-of-range field alone is rejected. */
	struct verbs_qp_req t;
#define BOUND(stmt, want)                                                \
	do {                                                             \
		t = sample_req();                                        \
		stmt;                                                    \
		verbs_req_encode(&t, b);                                 \
		CHECK(verbs_req_decode(b, sizeof(b), &d, NULL) == (want)); \
	} while (0)
	BOUND(t.from = FAB_MAX_NODES, -ERANGE);
	BOUND(t.from = FAB_MAX_NODES - 1, 0);
	BOUND(t.qpn = VERBS_QPN_MAX + 1, -ERANGE);
	BOUND(t.qpn = 0, -ERANGE);
	BOUND(t.qpn = 1, -ERANGE);
	BOUND(t.qpn = 2, 0);
	BOUND(t.psn = VERBS_PSN_MASK + 1, -ERANGE);
	BOUND(t.psn = 0, 0);
	BOUND(t.mtu = 0, -ERANGE);
	BOUND(t.mtu = IBV_MTU_4096 + 1, -ERANGE);
	BOUND(t.mtu = IBV_MTU_256, 0);
	BOUND(t.rd_atomic = 0, -ERANGE);
	BOUND(t.rd_atomic = 1, 0);
	BOUND(t.lid = 0, 0); /* RoCE has no LID */
#undef BOUND
}

static void test_rep_codec(void)
{
	struct verbs_qp_rep r = sample_rep(), d;
	uint8_t b[VERBS_REP_BYTES];
	verbs_rep_encode(&r, b);
	CHECK(memcmp(b, "KVRP", 4) == 0);
	CHECK(b[6] == 0 && b[7] == 0);
	CHECK(b[40] == 0xef && b[43] == 0xde);
	CHECK(b[48] == 0x00 && b[49] == 0x10 && b[53] == 0x7f && b[55] == 0);
	CHECK(b[56] == 0 && b[60] == 2); /* 1 << 33 */
	uint16_t ver = 0;
	CHECK(verbs_rep_decode(b, sizeof(b), &d, &ver) == 0);
	CHECK(ver == VERBS_WIRE_VERSION);
	CHECK(rep_eq(&r, &d));

	uint8_t bad[VERBS_REP_BYTES];
	memcpy(bad, b, sizeof(b));
	bad[3] ^= 0x80;
	CHECK(verbs_rep_decode(bad, sizeof(bad), &d, NULL) == -EBADMSG);
	memcpy(bad, b, sizeof(b));
	bad[5] = 1; /* version 257 */
	CHECK(verbs_rep_decode(bad, sizeof(bad), &d, &ver) == -EPROTONOSUPPORT);
	CHECK(ver == 257);
	for (size_t len = 0; len < sizeof(b); len++)
		CHECK(verbs_rep_decode(b, len, &d, NULL) == -EMSGSIZE);

	struct verbs_qp_rep t;
#define BOUND(stmt, want)                                                \
	do {                                                             \
		t = sample_rep();                                        \
		stmt;                                                    \
		verbs_rep_encode(&t, b);                                 \
		CHECK(verbs_rep_decode(b, sizeof(b), &d, NULL) == (want)); \
	} while (0)
	BOUND(t.status = VERBS_ST_COUNT, -ERANGE);
	BOUND(t.qpn = VERBS_QPN_MAX + 1, -ERANGE);
	BOUND(t.qpn = 1, -ERANGE);
	BOUND(t.psn = 0x1000000, -ERANGE);
	BOUND(t.mtu = 6, -ERANGE);
	BOUND(t.rd_atomic = 0, -ERANGE);
	BOUND(t.size = 0, -ERANGE);
	BOUND((t.base = UINT64_MAX - 10, t.size = 11), -ERANGE);
	BOUND((t.base = UINT64_MAX - 10, t.size = 10), 0);
	/* An error reply carries no QP: its other fields are not checked. */
	BOUND((t = (struct verbs_qp_rep){ .status = VERBS_ST_QP, .err = EINVAL }), 0);
	CHECK(d.status == VERBS_ST_QP && d.err == EINVAL);
#undef BOUND
	for (unsigned s = 0; s <= VERBS_ST_COUNT; s++)
		CHECK(verbs_status_str(s) && verbs_status_str(s)[0]);
}

static void test_ring(void)
{
	struct verbs_ring r;
	uint64_t off, used, c1, c2, c3;
	verbs_ring_init(&r, 128);
	CHECK(verbs_ring_alloc(&r, 136, &off, &used) == -E2BIG);
	CHECK(verbs_ring_alloc(&r, 48, &off, &c1) == 0 && off == 0 && c1 == 48);
	CHECK(verbs_ring_alloc(&r, 48, &off, &c2) == 0 && off == 48 && c2 == 48);
	/* 32 bytes left at the end: 40 must skip them and wait for the start. */
	CHECK(verbs_ring_alloc(&r, 40, &off, &c3) == -ENOSPC);
	CHECK(verbs_ring_alloc(&r, 32, &off, &c3) == 0 && off == 96 && c3 == 32);
	verbs_ring_free(&r, c1);
	CHECK(verbs_ring_alloc(&r, 56, &off, &used) == -ENOSPC);
	CHECK(verbs_ring_alloc(&r, 48, &off, &c1) == 0 && off == 0 && c1 == 48);
	verbs_ring_free(&r, c2);
	verbs_ring_free(&r, c3);
	/* Wrap with a skip: head at 48, 96 bytes do not fit before the end. */
	CHECK(verbs_ring_alloc(&r, 96, &off, &c2) == -ENOSPC);
	verbs_ring_free(&r, c1);
	/* Empty again: it restarts at 0, so a full-size allocation fits. */
	CHECK(verbs_ring_alloc(&r, 128, &off, &c1) == 0 && off == 0 && c1 == 128);
	CHECK(verbs_ring_alloc(&r, 8, &off, &c2) == -ENOSPC);
	verbs_ring_free(&r, c1);

	/* Random FIFO traffic: live allocations never overlap and stay inside. */
	verbs_ring_init(&r, 1024);
	struct {
		uint64_t off, len, consumed;
	} live[256];
	int head = 0, n = 0;
	unsigned seed = 12345;
	for (int step = 0; step < 20000; step++) {
		seed = seed * 1103515245u + 12345u;
		bool alloc = n == 0 || (n < 256 && (seed >> 16) % 3 != 0);
		if (alloc) {
			uint64_t len = 8 * (1 + (seed >> 20) % 40);
			if (verbs_ring_alloc(&r, len, &off, &used) != 0) {
				alloc = false;
			} else {
				CHECK(off + len <= 1024 && off % 8 == 0 && used >= len);
				for (int i = 0; i < n; i++) {
					int k = (head + i) % 256;
					CHECK(off + len <= live[k].off || live[k].off + live[k].len <= off);
				}
				int k = (head + n) % 256;
				live[k].off = off;
				live[k].len = len;
				live[k].consumed = used;
				n++;
			}
		}
		if (!alloc && n) {
			verbs_ring_free(&r, live[head].consumed);
			head = (head + 1) % 256;
			n--;
		}
	}
	while (n) {
		verbs_ring_free(&r, live[head].consumed);
		head = (head + 1) % 256;
		n--;
	}
	CHECK(r.head == r.tail);
}

static void test_bounce_layout(void)
{
	char w1[13], r1[5], w2[8];
	memcpy(w1, "thirteen byte", 13);
	memcpy(w2, "8 bytes!", 8);
	uint64_t old_cas = 1, old_faa = 2;
	struct fab_op ops[] = {
		{ .kind = FAB_WRITE, .len = 13, .off = 0, .buf = w1 },
		{ .kind = FAB_READ, .len = 5, .off = 64, .buf = r1 },
		{ .kind = FAB_CAS, .len = 8, .off = 8, .cmp = 1, .swp = 2, .old = &old_cas },
		{ .kind = FAB_FAA, .len = 8, .off = 16, .swp = 3, .old = &old_faa },
		{ .kind = FAB_CAS, .len = 8, .off = 24, .old = NULL },
		{ .kind = FAB_WRITE, .len = 8, .off = 32, .buf = w2 },
	};
	struct fab_op *p[6];
	for (int i = 0; i < 6; i++)
		p[i] = &ops[i];
	CHECK(verbs_op_bounce(&ops[0]) == 16);
	CHECK(verbs_op_bounce(&ops[1]) == 8);
	CHECK(verbs_op_bounce(&ops[2]) == 8);
	CHECK(verbs_part_bounce(p, 6) == 16 + 8 + 8 + 8 + 8 + 8);
	uint64_t area64[7];
	char *area = (char *)area64;
	memset(area, 0xee, sizeof(area64));
	verbs_bounce_fill(area, p, 6);
	CHECK(memcmp(area, "thirteen byte", 13) == 0);
	CHECK(memcmp(area + 48, "8 bytes!", 8) == 0);
	CHECK((unsigned char)area[16] == 0xee); /* READ slot untouched by fill */
	/* What the NIC would leave there: READ data, atomics' old values. */
	memcpy(area + 16, "hello", 5);
	uint64_t v1 = 0x1111222233334444ull, v2 = 42, v3 = 7;
	memcpy(area + 24, &v1, 8);
	memcpy(area + 32, &v2, 8);
	memcpy(area + 40, &v3, 8);
	verbs_bounce_drain(area, p, 6);
	CHECK(memcmp(r1, "hello", 5) == 0);
	CHECK(old_cas == v1 && old_faa == v2);
	CHECK(memcmp(w1, "thirteen byte", 13) == 0); /* WRITE sources untouched */
}

static void test_fences(void)
{
	struct fab_op o[8];
	struct fab_op *p[8];
	bool f[8];
	for (int i = 0; i < 8; i++)
		p[i] = &o[i];
#define OP(i, k, of, l) (o[i] = (struct fab_op){ .kind = (k), .off = (of), .len = (l) })
	/* READ then WRITE of the same bytes: the WRITE waits. */
	OP(0, FAB_READ, 0, 16);
	OP(1, FAB_WRITE, 8, 8);
	CHECK(verbs_plan_fences(p, 2, f) == 1 && !f[0] && f[1]);
	/* Disjoint bytes: no fence, even if adjacent. */
	OP(1, FAB_WRITE, 16, 8);
	CHECK(verbs_plan_fences(p, 2, f) == 0 && !f[1]);
	OP(0, FAB_READ, 0, 5);
	OP(1, FAB_WRITE, 5, 3);
	CHECK(verbs_plan_fences(p, 2, f) == 0);
	/* WRITE then READ or WRITE: RC keeps that order by itself. */
	OP(0, FAB_WRITE, 0, 8);
	OP(1, FAB_READ, 0, 8);
	OP(2, FAB_WRITE, 0, 8);
	OP(3, FAB_CAS, 0, 8);
	CHECK(verbs_plan_fences(p, 4, f) == 2 && !f[1] && f[2] && f[3]);
	/* CAS then CAS or FAA of the same word; READs never wait. */
	OP(0, FAB_CAS, 64, 8);
	OP(1, FAB_FAA, 64, 8);
	OP(2, FAB_READ, 64, 8);
	OP(3, FAB_CAS, 72, 8);
	OP(4, FAB_WRITE, 0, 128);
	CHECK(verbs_plan_fences(p, 5, f) == 2 && !f[0] && f[1] && !f[2] && !f[3] && f[4]);
	/* A call after a READ or atomic of any bytes is fenced once; after
	 * WRITEs only, not at all. */
	OP(0, FAB_WRITE, 0, 8);
	OP(1, FAB_RPC, 1, 16);
	OP(2, FAB_RPC, 1, 16);
	CHECK(verbs_plan_fences(p, 3, f) == 0);
	OP(0, FAB_READ, 4096, 8);
	CHECK(verbs_plan_fences(p, 3, f) == 1 && f[1] && !f[2]);
	OP(0, FAB_FAA, 4096, 8);
	CHECK(verbs_plan_fences(p, 3, f) == 1 && f[1] && !f[2]);
#undef OP
}

/* The RPC messages' headers: layout, round trip, and what is refused. */
static void test_rpc_codec(void)
{
	uint8_t m[VERBS_RPC_HDR + 4] = { 0 };
	struct verbs_call_hdr c = { .tag = 0x01020304, .handler = 31, .cap = FAB_RPC_MAX }, dc;
	verbs_call_encode(&c, m);
	CHECK(memcmp(m, "KVCL", 4) == 0 && m[4] == 4 && m[7] == 1 && m[8] == 31 && m[10] == 0 &&
	      m[12] == 0 && m[14] == 1);
	CHECK(verbs_call_decode(m, VERBS_RPC_HDR + 3, &dc) == 0);
	CHECK(dc.tag == c.tag && dc.handler == 31 && dc.cap == FAB_RPC_MAX && dc.len == 3);
	CHECK(verbs_call_decode(m, VERBS_RPC_HDR - 1, &dc) == -EMSGSIZE);
	CHECK(verbs_call_decode(m, VERBS_MSG_BYTES + 1, &dc) == -EMSGSIZE);
	c.handler = FAB_RPC_HANDLERS;
	verbs_call_encode(&c, m);
	CHECK(verbs_call_decode(m, VERBS_RPC_HDR, &dc) == -ERANGE);
	c = (struct verbs_call_hdr){ .cap = FAB_RPC_MAX + 1 };
	verbs_call_encode(&c, m);
	CHECK(verbs_call_decode(m, VERBS_RPC_HDR, &dc) == -ERANGE);

	struct verbs_answer_hdr a = { .tag = 7, .status = -EPERM, .len = 0 }, da;
	verbs_answer_encode(&a, m);
	CHECK(memcmp(m, "KVAN", 4) == 0 && m[8] == (uint8_t)-EPERM && m[11] == 0xff);
	CHECK(verbs_answer_decode(m, VERBS_RPC_HDR, &da) == 0 && da.tag == 7 &&
	      da.status == -EPERM && da.len == 0);
	CHECK(verbs_call_decode(m, VERBS_RPC_HDR, &dc) == -EBADMSG); /* an answer is no call */
	CHECK(verbs_answer_decode(m, VERBS_RPC_HDR + 1, &da) == -EMSGSIZE); /* len says 0 */
	a = (struct verbs_answer_hdr){ .tag = 7, .status = -EPERM, .len = 1 };
	verbs_answer_encode(&a, m);
	CHECK(verbs_answer_decode(m, VERBS_RPC_HDR + 1, &da) == -ERANGE); /* an error has no body */
	a.status = 3;
	verbs_answer_encode(&a, m);
	CHECK(verbs_answer_decode(m, VERBS_RPC_HDR + 1, &da) == 0 && da.status == 3 && da.len == 1);

	/* A call's bounce: header and request, rounded to 8; the request
	 * copied after the header's place. */
	char req[5] = "abcd", area[32];
	struct fab_rpc_reply rep = { .cap = 8 };
	struct fab_op op = { .kind = FAB_RPC, .len = 5, .buf = req, .rep = &rep }, *p = &op;
	CHECK(verbs_op_bounce(&op) == 24);
	verbs_bounce_fill(area, &p, 1);
	CHECK(memcmp(area + VERBS_RPC_HDR, "abcd", 5) == 0);
}

static struct ibv_gid_entry gid_entry(uint32_t index, uint32_t type, const char *hex16)
{
	struct ibv_gid_entry e = { .gid_index = index, .port_num = 1, .gid_type = type };
	for (int i = 0; i < 16 && hex16; i++) {
		unsigned v;
		sscanf(hex16 + 2 * i, "%2x", &v);
		e.gid.raw[i] = (uint8_t)v;
	}
	return e;
}

static void test_pick_gid(void)
{
	const char *ll = "fe800000000000000211223344556677";
	const char *v4 = "00000000000000000000ffff0a000001";
	struct ibv_gid_entry e[4];
	e[0] = gid_entry(0, IBV_GID_TYPE_ROCE_V1, ll);
	e[1] = gid_entry(1, IBV_GID_TYPE_ROCE_V2, ll);
	e[2] = gid_entry(2, IBV_GID_TYPE_ROCE_V1, v4);
	e[3] = gid_entry(3, IBV_GID_TYPE_ROCE_V2, v4);
	CHECK(verbs_pick_gid(e, 4) == 3);
	CHECK(verbs_pick_gid(e, 3) == 1); /* no v2 IPv4: first v2 */
	CHECK(verbs_pick_gid(e, 1) == 0); /* no v2: first non-zero */
	e[0] = gid_entry(0, IBV_GID_TYPE_ROCE_V2, NULL);
	CHECK(verbs_pick_gid(e, 1) == -1); /* zero GIDs do not count */
	CHECK(verbs_pick_gid(e, 0) == -1);
	e[1] = gid_entry(5, IBV_GID_TYPE_IB, ll);
	CHECK(verbs_pick_gid(e, 2) == 1);
}

static void test_parsers(void)
{
	unsigned v = 99;
	CHECK(verbs_parse_index("0", 10, &v) == 0 && v == 0);
	CHECK(verbs_parse_index("3", 10, &v) == 0 && v == 3);
	CHECK(verbs_parse_index("10", 10, &v) == 0 && v == 10);
	CHECK(verbs_parse_index("11", 10, &v) == -EINVAL);
	CHECK(verbs_parse_index("", 10, &v) == -EINVAL);
	CHECK(verbs_parse_index(NULL, 10, &v) == -EINVAL);
	CHECK(verbs_parse_index("-1", 10, &v) == -EINVAL);
	CHECK(verbs_parse_index(" 1", 10, &v) == -EINVAL);
	CHECK(verbs_parse_index("1x", 10, &v) == -EINVAL);
	CHECK(verbs_parse_index("99999999999999999999999", 255, &v) == -EINVAL);
	CHECK(v == 10);

	CHECK(verbs_wc_errno(IBV_WC_SUCCESS) == 0);
	CHECK(verbs_wc_errno(IBV_WC_RETRY_EXC_ERR) == -EHOSTDOWN);
	CHECK(verbs_wc_errno(IBV_WC_RNR_RETRY_EXC_ERR) == -EHOSTDOWN);
	CHECK(verbs_wc_errno(IBV_WC_REM_ACCESS_ERR) == -EIO);
	CHECK(verbs_wc_errno(IBV_WC_WR_FLUSH_ERR) == -EIO);

	CHECK(verbs_mtu_bytes(IBV_MTU_256) == 256);
	CHECK(verbs_mtu_bytes(IBV_MTU_1024) == 1024);
	CHECK(verbs_mtu_bytes(IBV_MTU_4096) == 4096);
	CHECK(verbs_mtu_bytes(0) == 0 && verbs_mtu_bytes(6) == 0);
}

/* ================= part 2: the backend on a fake NIC ================= */

#define FK_PORT_GIDS 4

struct fk_ctx {
	struct ibv_context ctx;
	int id; /* 1, 2, ...: gives each opened context its own LID and GIDs */
};

struct fk_mr {
	struct ibv_mr mr;
	unsigned access;
	struct fk_mr *next;
};

/* A channel serves several CQs (the responders' do): each event names
 * its CQ, one byte in the pipe per event. */
struct fk_chan {
	struct ibv_comp_channel ch;
	int wfd;
	struct ibv_cq *ev[256];
	int nev;
};

struct fk_cq {
	struct ibv_cq cq;
	struct ibv_wc *q;
	int cap, head, n;
	bool armed;
	int unacked;
	struct fk_cq *next;
};

struct fk_wr {
	uint64_t wr_id;
	enum ibv_wr_opcode op;
	unsigned flags;
	uint64_t laddr;
	uint32_t len, lkey;
	uint64_t raddr;
	uint32_t rkey;
	uint64_t cmp_add, swap;
};

struct fk_rwr {
	uint64_t wr_id, addr;
	uint32_t len, lkey;
};

struct fk_qp {
	struct ibv_qp qp;
	unsigned access;
	uint32_t max_send_wr, max_recv_wr;
	struct fk_wr *sq;
	uint32_t sq_head, sq_n;
	struct fk_rwr *rq;
	uint32_t rq_head, rq_n;
	unsigned rnr_retry;
	uint32_t dest_qpn, rq_psn, sq_psn;
	unsigned path_mtu, max_rd_atomic, max_dest_rd_atomic;
	struct ibv_ah_attr ah;
	struct fk_qp *next;
};

static struct {
	bool real;            /* device listing goes to the real libibverbs */
	int ndev;
	enum ibv_atomic_cap atomic;
	enum ibv_port_state port_state;
	uint8_t link_layer;
	int max_qp_wr, max_cqe;
	bool auto_exec;       /* poll_cq first lets the NIC run */
	int exec_per_poll;    /* WRs each QP of the CQ runs then */
	int fail_at;          /* the fail_at-th WR executed from now fails (0: none) */
	bool fail_all;        /* every WR executed fails */
	enum ibv_wc_status fail_status;
	int fences, doorbells, executed;
	int sends, recvs, rnr_naks; /* SENDs executed, receives posted, RNR NAKs */
	bool tracing;         /* note each WR executed in trace[] */
	int ntrace;
	struct { uint32_t qpn; enum ibv_wr_opcode op; uint64_t raddr; uint32_t len; } trace[16];
	int live_ctx, live_pd, live_mr, live_cq, live_ch, live_qp;
	int next_ctx;
	uint32_t next_qpn, next_key;
	struct fk_mr *mrs;
	struct fk_qp *qps;
	struct fk_cq *cqs;
} fk;

static struct ibv_device fk_devs[2] = {
	{ .node_type = IBV_NODE_CA, .transport_type = IBV_TRANSPORT_IB, .name = "fake0" },
	{ .node_type = IBV_NODE_CA, .transport_type = IBV_TRANSPORT_IB, .name = "fake1" },
};

static void fk_reset(void)
{
	CHECK(fk.live_ctx == 0 && fk.live_pd == 0 && fk.live_mr == 0 && fk.live_cq == 0 &&
	      fk.live_ch == 0 && fk.live_qp == 0);
	fk.real = false;
	fk.ndev = 2;
	fk.atomic = IBV_ATOMIC_HCA;
	fk.port_state = IBV_PORT_ACTIVE;
	fk.link_layer = IBV_LINK_LAYER_INFINIBAND;
	fk.max_qp_wr = 2 * FAB_BATCH_MAX; /* small, so that the send queue fills */
	fk.max_cqe = 65536;
	fk.auto_exec = true;
	fk.exec_per_poll = 5;
	fk.fail_at = 0;
	fk.fail_all = false;
	if (!fk.next_qpn)
		fk.next_qpn = 0x100;
}

static int fk_id(struct ibv_context *c)
{
	return ((struct fk_ctx *)c)->id;
}

static uint16_t fk_lid(int id)
{
	return fk.link_layer == IBV_LINK_LAYER_ETHERNET ? 0 : (uint16_t)(0x10 + id);
}

static enum ibv_mtu fk_mtu(int id)
{
	return id % 2 ? IBV_MTU_1024 : IBV_MTU_2048;
}

/* GID table of context id: 0 fe80::id (v1, or IB), 1 fe80::id (v2),
 * 2 ::ffff:10.0.0.id (v2), 3 empty. InfiniBand ports have index 0 only. */
static bool fk_gid(int id, unsigned index, union ibv_gid *g, uint32_t *type)
{
	memset(g, 0, sizeof(*g));
	bool eth = fk.link_layer == IBV_LINK_LAYER_ETHERNET;
	if (index >= (eth ? 3u : 1u))
		return false;
	if (index < 2) {
		g->raw[0] = 0xfe;
		g->raw[1] = 0x80;
	} else {
		g->raw[10] = g->raw[11] = 0xff;
		g->raw[12] = 10;
	}
	g->raw[15] = (uint8_t)id;
	if (type)
		*type = !eth ? IBV_GID_TYPE_IB : index == 0 ? IBV_GID_TYPE_ROCE_V1
							     : IBV_GID_TYPE_ROCE_V2;
	return true;
}

typedef struct ibv_device **(*get_list_fn)(int *);
typedef void (*free_list_fn)(struct ibv_device **);

struct ibv_device **ibv_get_device_list(int *num)
{
	if (fk.real) {
		get_list_fn real = (get_list_fn)dlsym(RTLD_NEXT, "ibv_get_device_list");
		return real ? real(num) : NULL;
	}
	struct ibv_device **l = calloc((size_t)fk.ndev + 1, sizeof(*l));
	for (int i = 0; i < fk.ndev; i++)
		l[i] = &fk_devs[i];
	if (num)
		*num = fk.ndev;
	return l;
}

void ibv_free_device_list(struct ibv_device **list)
{
	if (fk.real) {
		free_list_fn real = (free_list_fn)dlsym(RTLD_NEXT, "ibv_free_device_list");
		if (real)
			real(list);
		return;
	}
	free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

static int fk_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
static int fk_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
static int fk_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
static int fk_req_notify(struct ibv_cq *cq, int solicited_only);

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct fk_ctx *c = calloc(1, sizeof(*c));
	c->ctx.device = device;
	c->ctx.ops.post_send = fk_post_send;
	c->ctx.ops.post_recv = fk_post_recv;
	c->ctx.ops.poll_cq = fk_poll_cq;
	c->ctx.ops.req_notify_cq = fk_req_notify;
	c->ctx.cmd_fd = c->ctx.async_fd = -1;
	c->id = ++fk.next_ctx;
	fk.live_ctx++;
	return &c->ctx;
}

int ibv_close_device(struct ibv_context *context)
{
	for (struct fk_qp *q = fk.qps; q; q = q->next)
		CHECK(q->qp.context != context);
	for (struct fk_mr *m = fk.mrs; m; m = m->next)
		CHECK(m->mr.context != context);
	fk.live_ctx--;
	free(context);
	return 0;
}

int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *a)
{
	(void)context;
	memset(a, 0, sizeof(*a));
	a->max_qp_wr = fk.max_qp_wr;
	a->max_sge = 4;
	a->max_cqe = fk.max_cqe;
	a->max_qp_rd_atom = 16;
	a->max_qp_init_rd_atom = 8;
	a->atomic_cap = fk.atomic;
	a->phys_port_cnt = 1;
	a->max_mr_size = UINT64_MAX;
	return 0;
}

int(ibv_query_port)(struct ibv_context *context, uint8_t port, struct _compat_ibv_port_attr *pa)
{
	if (port != 1)
		return EINVAL;
	struct ibv_port_attr *a = (struct ibv_port_attr *)pa;
	a->state = fk.port_state;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = fk_mtu(fk_id(context));
	a->gid_tbl_len = FK_PORT_GIDS;
	a->max_msg_sz = 1u << 30;
	a->lid = fk_lid(fk_id(context));
	a->link_layer = fk.link_layer;
	return 0;
}

int ibv_query_gid(struct ibv_context *context, uint8_t port, int index, union ibv_gid *gid)
{
	if (port != 1 || index < 0 || index >= FK_PORT_GIDS)
		return -1;
	fk_gid(fk_id(context), (unsigned)index, gid, NULL);
	return 0;
}

int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port, uint32_t index,
		      struct ibv_gid_entry *e, uint32_t flags, size_t size)
{
	CHECK(size == sizeof(*e) && flags == 0);
	if (port != 1 || !fk_gid(fk_id(context), index, &e->gid, &e->gid_type))
		return ENODATA;
	e->gid_index = index;
	e->port_num = port;
	e->ndev_ifindex = 0;
	return 0;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct ibv_pd *pd = calloc(1, sizeof(*pd));
	pd->context = context;
	fk.live_pd++;
	return pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	for (struct fk_mr *m = fk.mrs; m; m = m->next)
		CHECK(m->mr.pd != pd);
	for (struct fk_qp *q = fk.qps; q; q = q->next)
		CHECK(q->qp.pd != pd);
	fk.live_pd--;
	free(pd);
	return 0;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
				unsigned int access)
{
	/* As the kernel does: remote write and atomic need local write. */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE)) {
		errno = EINVAL;
		return NULL;
	}
	CHECK(iova == (uintptr_t)addr);
	struct fk_mr *m = calloc(1, sizeof(*m));
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = length;
	m->mr.lkey = ++fk.next_key;
	m->mr.rkey = 0x80000000u | fk.next_key;
	m->access = access;
	m->next = fk.mrs;
	fk.mrs = m;
	fk.live_mr++;
	return &m->mr;
}

struct ibv_mr *(ibv_reg_mr)(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	for (struct fk_mr **pp = &fk.mrs; *pp; pp = &(*pp)->next) {
		if (&(*pp)->mr == mr) {
			struct fk_mr *m = *pp;
			*pp = m->next;
			free(m);
			fk.live_mr--;
			return 0;
		}
	}
	CHECK(!"dereg of an unknown MR");
	return EINVAL;
}

static struct fk_mr *fk_mr_find(uint32_t key, bool remote)
{
	for (struct fk_mr *m = fk.mrs; m; m = m->next)
		if ((remote ? m->mr.rkey : m->mr.lkey) == key)
			return m;
	return NULL;
}

static bool fk_mr_covers(struct fk_mr *m, uint64_t addr, uint64_t len)
{
	uint64_t base = (uintptr_t)m->mr.addr;
	return addr >= base && addr + len <= base + m->mr.length;
}

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		return NULL;
	struct fk_chan *c = calloc(1, sizeof(*c));
	c->ch.context = context;
	c->ch.fd = p[0];
	c->wfd = p[1];
	fk.live_ch++;
	return &c->ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct fk_chan *c = (struct fk_chan *)channel;
	for (struct fk_cq *q = fk.cqs; q; q = q->next)
		CHECK(q->cq.channel != channel); /* the real one says EBUSY */
	close(c->ch.fd);
	close(c->wfd);
	free(c);
	fk.live_ch--;
	return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	CHECK(comp_vector == 0);
	if (cqe < 1 || cqe > fk.max_cqe) {
		errno = EINVAL;
		return NULL;
	}
	struct fk_cq *q = calloc(1, sizeof(*q));
	q->cq.context = context;
	q->cq.channel = channel;
	q->cq.cq_context = cq_context;
	q->cq.cqe = cqe;
	q->cap = cqe;
	q->q = calloc((size_t)cqe, sizeof(*q->q));
	q->next = fk.cqs;
	fk.cqs = q;
	fk.live_cq++;
	return &q->cq;
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
	struct fk_cq *q = (struct fk_cq *)cq;
	/* The real one waits forever for unacknowledged events. */
	CHECK(q->unacked == 0);
	for (struct fk_qp *p = fk.qps; p; p = p->next)
		CHECK(p->qp.send_cq != cq && p->qp.recv_cq != cq);
	/* As the kernel does: its events not yet read go with it. */
	struct fk_chan *c = (struct fk_chan *)cq->channel;
	for (int i = 0; c && i < c->nev; i++) {
		if (c->ev[i] != cq)
			continue;
		memmove(&c->ev[i], &c->ev[i + 1], sizeof(c->ev[0]) * (size_t)(c->nev - i - 1));
		c->nev--;
		i--;
		char b;
		CHECK(read(c->ch.fd, &b, 1) == 1);
	}
	for (struct fk_cq **pp = &fk.cqs; *pp; pp = &(*pp)->next)
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	free(q->q);
	free(q);
	fk.live_cq--;
	return 0;
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	struct fk_chan *c = (struct fk_chan *)channel;
	char b;
	if (read(c->ch.fd, &b, 1) != 1)
		return -1;
	CHECK(c->nev > 0);
	if (c->nev == 0)
		return -1;
	*cq = c->ev[0];
	memmove(&c->ev[0], &c->ev[1], sizeof(c->ev[0]) * (size_t)(c->nev - 1));
	c->nev--;
	*cq_context = (*cq)->cq_context;
	((struct fk_cq *)*cq)->unacked++;
	return 0;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	struct fk_cq *q = (struct fk_cq *)cq;
	q->unacked -= (int)nevents;
	CHECK(q->unacked >= 0);
}

static int fk_req_notify(struct ibv_cq *cq, int solicited_only)
{
	CHECK(solicited_only == 0);
	((struct fk_cq *)cq)->armed = true;
	return 0;
}

static void fk_cq_push(struct ibv_cq *cq, const struct ibv_wc *wc)
{
	struct fk_cq *q = (struct fk_cq *)cq;
	if (q->n == q->cap) {
		CHECK(!"CQ overrun");
		return;
	}
	q->q[(q->head + q->n) % q->cap] = *wc;
	q->n++;
	if (q->armed && cq->channel) {
		struct fk_chan *c = (struct fk_chan *)cq->channel;
		q->armed = false;
		char b = 1;
		CHECK(c->nev < 256);
		c->ev[c->nev++] = cq;
		CHECK(write(c->wfd, &b, 1) == 1);
	}
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	if (ia->qp_type != IBV_QPT_RC || ia->cap.max_send_wr < 1 ||
	    ia->cap.max_send_wr > (uint32_t)fk.max_qp_wr || ia->cap.max_send_sge > 4 ||
	    ia->cap.max_recv_wr > (uint32_t)fk.max_qp_wr || !ia->send_cq || !ia->recv_cq) {
		errno = EINVAL;
		return NULL;
	}
	CHECK(ia->sq_sig_all == 0);
	struct fk_qp *q = calloc(1, sizeof(*q));
	q->qp.context = pd->context;
	q->qp.pd = pd;
	q->qp.send_cq = ia->send_cq;
	q->qp.recv_cq = ia->recv_cq;
	q->qp.qp_num = fk.next_qpn++;
	q->qp.state = IBV_QPS_RESET;
	q->qp.qp_type = IBV_QPT_RC;
	q->max_send_wr = ia->cap.max_send_wr;
	q->sq = calloc(q->max_send_wr, sizeof(*q->sq));
	q->max_recv_wr = ia->cap.max_recv_wr;
	q->rq = calloc(q->max_recv_wr ? q->max_recv_wr : 1, sizeof(*q->rq));
	q->next = fk.qps;
	fk.qps = q;
	fk.live_qp++;
	return &q->qp;
}

static bool has(int mask, int need)
{
	return (mask & need) == need;
}

/* A QP entering the error state completes its posted receives at once
 * with a flush error, as a real one does (its send queue is flushed as
 * the NIC reaches each WR: fk_exec_qp). */
static void fk_qp_error(struct fk_qp *q)
{
	q->qp.state = IBV_QPS_ERR;
	while (q->rq_n) {
		struct ibv_wc wc = { .wr_id = q->rq[q->rq_head].wr_id, .status = IBV_WC_WR_FLUSH_ERR,
				     .qp_num = q->qp.qp_num };
		q->rq_head = (q->rq_head + 1) % q->max_recv_wr;
		q->rq_n--;
		fk_cq_push(q->qp.recv_cq, &wc);
	}
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	struct fk_qp *q = (struct fk_qp *)qp;
	int id = fk_id(qp->context);
	if (!(mask & IBV_QP_STATE))
		return EINVAL;
	enum ibv_qp_state to = a->qp_state;
	if (to == IBV_QPS_ERR && mask == IBV_QP_STATE) {
		fk_qp_error(q);
		return 0;
	}
	const char *why = NULL;
	if (to == IBV_QPS_INIT && qp->state == IBV_QPS_RESET) {
		if (!has(mask, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
			why = "INIT without pkey/port/access";
		else if (a->port_num != 1 || a->pkey_index != 0)
			why = "bad port or pkey index";
		q->access = a->qp_access_flags;
	} else if (to == IBV_QPS_RTR && qp->state == IBV_QPS_INIT) {
		if (!has(mask, IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
			why = "RTR without its attributes";
		else if (a->path_mtu > fk_mtu(id) || a->path_mtu < IBV_MTU_256)
			why = "path MTU above the port's";
		else if (a->max_dest_rd_atomic > 16 || a->min_rnr_timer > 31)
			why = "rd_atomic or rnr timer out of range";
		else if (a->rq_psn > 0xffffff || a->dest_qp_num > 0xffffff)
			why = "PSN or QPN over 24 bits";
		else if (a->ah_attr.port_num != 1)
			why = "AV port";
		else if (fk.link_layer == IBV_LINK_LAYER_ETHERNET &&
			 (!a->ah_attr.is_global || a->ah_attr.grh.sgid_index >= FK_PORT_GIDS ||
			  a->ah_attr.grh.hop_limit == 0))
			why = "RoCE needs a GRH with a valid source GID";
		else if (fk.link_layer != IBV_LINK_LAYER_ETHERNET && a->ah_attr.dlid == 0)
			why = "InfiniBand needs a destination LID";
		q->path_mtu = a->path_mtu;
		q->dest_qpn = a->dest_qp_num;
		q->rq_psn = a->rq_psn;
		q->max_dest_rd_atomic = a->max_dest_rd_atomic;
		q->ah = a->ah_attr;
	} else if (to == IBV_QPS_RTS && qp->state == IBV_QPS_RTR) {
		if (!has(mask, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				       IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
			why = "RTS without its attributes";
		else if (a->timeout > 31 || a->retry_cnt > 7 || a->rnr_retry > 7 ||
			 a->sq_psn > 0xffffff || a->max_rd_atomic > 8 || a->max_rd_atomic < 1)
			why = "RTS attribute out of range";
		q->sq_psn = a->sq_psn;
		q->max_rd_atomic = a->max_rd_atomic;
		q->rnr_retry = a->rnr_retry;
	} else {
		why = "transition not allowed";
	}
	if (why) {
		fprintf(stderr, "fake ibv_modify_qp(qpn %#x, %d -> %d): %s\n", qp->qp_num,
			qp->state, to, why);
		return EINVAL;
	}
	qp->state = to;
	return 0;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct fk_qp *q = (struct fk_qp *)qp;
	for (struct fk_qp **pp = &fk.qps; *pp; pp = &(*pp)->next)
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	free(q->sq);
	free(q->rq);
	free(q);
	fk.live_qp--;
	return 0;
}

static int fk_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct fk_qp *q = (struct fk_qp *)qp;
	fk.doorbells++;
	if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR) {
		*bad = wr;
		return EINVAL;
	}
	for (; wr; wr = wr->next) {
		if (q->sq_n == q->max_send_wr) {
			*bad = wr;
			return ENOMEM;
		}
		CHECK(wr->num_sge == 1);
		struct fk_wr *w = &q->sq[(q->sq_head + q->sq_n) % q->max_send_wr];
		*w = (struct fk_wr){ .wr_id = wr->wr_id, .op = wr->opcode, .flags = wr->send_flags,
				     .laddr = wr->sg_list[0].addr, .len = wr->sg_list[0].length,
				     .lkey = wr->sg_list[0].lkey };
		if (wr->opcode == IBV_WR_SEND) {
			/* no remote address: the peer's next receive */
		} else if (wr->opcode == IBV_WR_RDMA_READ || wr->opcode == IBV_WR_RDMA_WRITE) {
			w->raddr = wr->wr.rdma.remote_addr;
			w->rkey = wr->wr.rdma.rkey;
		} else {
			w->raddr = wr->wr.atomic.remote_addr;
			w->rkey = wr->wr.atomic.rkey;
			w->cmp_add = wr->wr.atomic.compare_add;
			w->swap = wr->wr.atomic.swap;
		}
		if (wr->send_flags & IBV_SEND_FENCE)
			fk.fences++;
		q->sq_n++;
	}
	return 0;
}

static int fk_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct fk_qp *q = (struct fk_qp *)qp;
	if (qp->state == IBV_QPS_RESET) {
		*bad = wr;
		return EINVAL;
	}
	for (; wr; wr = wr->next) {
		if (q->rq_n == q->max_recv_wr) {
			*bad = wr;
			return ENOMEM;
		}
		CHECK(wr->num_sge == 1);
		q->rq[(q->rq_head + q->rq_n) % q->max_recv_wr] = (struct fk_rwr){
			.wr_id = wr->wr_id, .addr = wr->sg_list[0].addr,
			.len = wr->sg_list[0].length, .lkey = wr->sg_list[0].lkey };
		q->rq_n++;
		fk.recvs++;
	}
	if (qp->state == IBV_QPS_ERR)
		fk_qp_error(q);
	return 0;
}

static struct fk_qp *fk_qp_find(uint32_t qpn)
{
	for (struct fk_qp *q = fk.qps; q; q = q->next)
		if (q->qp.qp_num == qpn)
			return q;
	return NULL;
}

/* Is q connected to a peer that names it back, at the right address? */
static struct fk_qp *fk_peer(struct fk_qp *q)
{
	struct fk_qp *p = fk_qp_find(q->dest_qpn);
	if (!p || p->dest_qpn != q->qp.qp_num || p->qp.state < IBV_QPS_RTR)
		return NULL;
	int pid = fk_id(p->qp.context);
	if (q->sq_psn != p->rq_psn || q->path_mtu != p->path_mtu ||
	    q->max_rd_atomic > p->max_dest_rd_atomic)
		return NULL;
	if (fk.link_layer == IBV_LINK_LAYER_ETHERNET) {
		union ibv_gid g;
		if (!fk_gid(pid, p->ah.grh.sgid_index, &g, NULL) ||
		    memcmp(g.raw, q->ah.grh.dgid.raw, 16) != 0)
			return NULL;
	} else if (q->ah.dlid != fk_lid(pid)) {
		return NULL;
	}
	return p;
}

/* Not a status: a SEND that found no receive posted, with rnr_retry 7
 * ("retry forever"): it stays at the head of its queue, as a real NIC
 * retries it after each RNR NAK, until the peer posts one. */
#define FK_RNR_HOLD ((enum ibv_wc_status)-1)

/* A SEND into the peer's next receive; its completion on the peer's
 * receive CQ. */
static enum ibv_wc_status fk_exec_send(struct fk_qp *q, struct fk_qp *p, struct fk_wr *w)
{
	if (p->qp.state == IBV_QPS_ERR)
		return IBV_WC_RETRY_EXC_ERR; /* a QP in error acknowledges nothing */
	struct fk_mr *l = fk_mr_find(w->lkey, false);
	if (!l || l->mr.pd != q->qp.pd || !fk_mr_covers(l, w->laddr, w->len))
		return IBV_WC_LOC_PROT_ERR;
	struct fk_rwr *r = &p->rq[p->rq_head];
	struct fk_mr *rm = fk_mr_find(r->lkey, false);
	struct ibv_wc wc = { .wr_id = r->wr_id, .qp_num = p->qp.qp_num, .opcode = IBV_WC_RECV,
			     .byte_len = w->len };
	p->rq_head = (p->rq_head + 1) % p->max_recv_wr;
	p->rq_n--;
	if (w->len > r->len || !rm || rm->mr.pd != p->qp.pd || !fk_mr_covers(rm, r->addr, w->len) ||
	    !(rm->access & IBV_ACCESS_LOCAL_WRITE)) {
		wc.status = IBV_WC_LOC_LEN_ERR;
		fk_cq_push(p->qp.recv_cq, &wc);
		fk_qp_error(p);
		return IBV_WC_REM_INV_REQ_ERR;
	}
	memcpy((void *)(uintptr_t)r->addr, (void *)(uintptr_t)w->laddr, w->len);
	wc.status = IBV_WC_SUCCESS;
	fk_cq_push(p->qp.recv_cq, &wc);
	fk.sends++;
	return IBV_WC_SUCCESS;
}

static enum ibv_wc_status fk_exec_one(struct fk_qp *q, struct fk_wr *w)
{
	struct fk_qp *p = fk_peer(q);
	if (!p) {
		CHECK(!"WR on a QP that is not connected to a matching peer");
		return IBV_WC_RETRY_EXC_ERR;
	}
	if (w->op == IBV_WR_SEND && p->qp.state != IBV_QPS_ERR && p->rq_n == 0) {
		fk.rnr_naks++;
		return q->rnr_retry == 7 ? FK_RNR_HOLD : IBV_WC_RNR_RETRY_EXC_ERR;
	}
	if (fk.fail_all || (fk.fail_at && --fk.fail_at == 0))
		return fk.fail_status;
	if (w->op == IBV_WR_SEND)
		return fk_exec_send(q, p, w);
	bool data = w->op == IBV_WR_RDMA_READ || w->op == IBV_WR_RDMA_WRITE;
	struct fk_mr *l = fk_mr_find(w->lkey, false);
	if (!l || l->mr.pd != q->qp.pd || !fk_mr_covers(l, w->laddr, w->len) ||
	    (w->op != IBV_WR_RDMA_WRITE && !(l->access & IBV_ACCESS_LOCAL_WRITE)))
		return IBV_WC_LOC_PROT_ERR;
	unsigned need = w->op == IBV_WR_RDMA_READ ? IBV_ACCESS_REMOTE_READ
			: w->op == IBV_WR_RDMA_WRITE ? IBV_ACCESS_REMOTE_WRITE
						     : IBV_ACCESS_REMOTE_ATOMIC;
	struct fk_mr *r = fk_mr_find(w->rkey, true);
	if (!r || r->mr.pd != p->qp.pd || !fk_mr_covers(r, w->raddr, w->len) ||
	    !(r->access & need) || !(p->access & need))
		return IBV_WC_REM_ACCESS_ERR;
	if (!data && (w->len != 8 || (w->raddr & 7) || (w->laddr & 7)))
		return IBV_WC_REM_INV_REQ_ERR;
	void *la = (void *)(uintptr_t)w->laddr, *ra = (void *)(uintptr_t)w->raddr;
	uint64_t old;
	switch (w->op) {
	case IBV_WR_RDMA_READ:
		memcpy(la, ra, w->len);
		break;
	case IBV_WR_RDMA_WRITE:
		memcpy(ra, la, w->len);
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		old = w->cmp_add;
		__atomic_compare_exchange_n((uint64_t *)ra, &old, w->swap, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
		memcpy(la, &old, 8);
		break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		old = __atomic_fetch_add((uint64_t *)ra, w->cmp_add, __ATOMIC_SEQ_CST);
		memcpy(la, &old, 8);
		break;
	default:
		return IBV_WC_REM_INV_REQ_ERR;
	}
	return IBV_WC_SUCCESS;
}

/* Let q's NIC run up to k WRs in order. */
static void fk_exec_qp(struct fk_qp *q, int k)
{
	while (k-- > 0 && q->sq_n) {
		struct fk_wr w = q->sq[q->sq_head];
		enum ibv_wc_status st = IBV_WC_WR_FLUSH_ERR;
		if (q->qp.state == IBV_QPS_RTS) {
			st = fk_exec_one(q, &w);
			if (st == FK_RNR_HOLD)
				return; /* tried again at the next run */
			fk.executed++;
			if (fk.tracing && fk.ntrace < 16)
				fk.trace[fk.ntrace++] = (typeof(fk.trace[0])){
					.qpn = q->qp.qp_num, .op = w.op, .raddr = w.raddr, .len = w.len };
		}
		q->sq_head = (q->sq_head + 1) % q->max_send_wr;
		q->sq_n--;
		if (st != IBV_WC_SUCCESS || (w.flags & IBV_SEND_SIGNALED)) {
			struct ibv_wc wc = { .wr_id = w.wr_id, .status = st, .qp_num = q->qp.qp_num,
					     .byte_len = w.len };
			fk_cq_push(q->qp.send_cq, &wc);
		}
		if (st != IBV_WC_SUCCESS && q->qp.state != IBV_QPS_ERR)
			fk_qp_error(q); /* the receives' flushes after the failed WR */
	}
}

/* The NIC runs outside any poll, as a real one does. */
static void fk_run_all(int k)
{
	for (struct fk_qp *q = fk.qps; q; q = q->next)
		fk_exec_qp(q, k);
}

static int fk_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct fk_cq *q = (struct fk_cq *)cq;
	if (fk.auto_exec) /* every NIC runs: a target's answers too */
		fk_run_all(fk.exec_per_poll);
	int k = 0;
	while (k < n && q->n) {
		wc[k++] = q->q[q->head];
		q->head = (q->head + 1) % q->cap;
		q->n--;
	}
	return k;
}

/* ---- fabric helpers ---- */

#define REGION (4u << 20)

struct node {
	struct fab *f;
	void *region;
};

static struct node nodes[3];
static uint16_t cluster_nodes; /* fab_config.nodes of the nodes opened next */

/* The control plane's call, in process: the peer's fab_ctl. */
static int ctl_call(void *ctx, uint16_t node, const void *req, size_t len, void *resp,
		    size_t *resp_len)
{
	struct node *n = ctx;
	if (node >= 3 || !n[node].f)
		return -EHOSTUNREACH;
	return fab_ctl(n[node].f, req, len, resp, resp_len);
}

static int node_open(int id, const char *device, char *err, size_t errlen)
{
	struct fab_config cfg = { .backend = "verbs", .self = (uint16_t)id, .device = device,
				  .nodes = cluster_nodes, .ctl_call = ctl_call, .ctl_ctx = nodes };
	return fab_open(&cfg, &nodes[id].f, err, errlen);
}

static void node_start(int id)
{
	char err[256] = "";
	CHECK(node_open(id, NULL, err, sizeof(err)) == 0);
	CHECK(posix_memalign(&nodes[id].region, 4096, REGION) == 0);
	memset(nodes[id].region, 0, REGION);
	int rc = fab_attach_err(nodes[id].f, (uint16_t)id, nodes[id].region, REGION, err,
				sizeof(err));
	if (rc)
		fprintf(stderr, "attach: %s\n", err);
	CHECK(rc == 0);
	CHECK(fab_local_base(nodes[id].f, (uint16_t)id) == nodes[id].region);
}

static void node_meet(int a, int b)
{
	char err[256] = "";
	struct fab_peer_info pi = { .node = (uint16_t)b, .region_size = REGION };
	int rc = fab_attach_peer(nodes[a].f, &pi, err, sizeof(err));
	if (rc)
		fprintf(stderr, "attach_peer: %s\n", err);
	CHECK(rc == 0);
}

static void node_stop(int id)
{
	fab_close(nodes[id].f);
	nodes[id].f = NULL;
	free(nodes[id].region);
	nodes[id].region = NULL;
}

static struct fab_worker *worker(int id, int wid)
{
	char err[256] = "";
	struct fab_worker *fw = fab_worker_create_err(nodes[id].f, wid, err, sizeof(err));
	if (!fw)
		fprintf(stderr, "worker: %s\n", err);
	CHECK(fw != NULL);
	return fw;
}

static uint64_t word(int id, uint64_t off)
{
	uint64_t v;
	memcpy(&v, (char *)nodes[id].region + off, 8);
	return v;
}

/* ---- the tests ---- */

static void test_open_errors(void)
{
	char err[256];
	fk_reset();
	fk.ndev = 0;
	CHECK(node_open(0, NULL, err, sizeof(err)) == -ENODEV);
	CHECK(strcmp(err, "verbs fabric: no RDMA device found (ibv_get_device_list returned none); "
			  "use --fabric shm or tcp, or see README 'Running on RDMA hardware'") == 0);

	fk.ndev = 2;
	CHECK(node_open(0, "mlx5_9", err, sizeof(err)) == -ENODEV);
	CHECK(strcmp(err, "verbs fabric: RDMA device 'mlx5_9' not found; devices found: fake0, "
			  "fake1") == 0);
	CHECK(node_open(0, "fake1", err, sizeof(err)) == 0);
	fab_close(nodes[0].f);
	nodes[0].f = NULL;

	fk.atomic = IBV_ATOMIC_NONE;
	CHECK(node_open(0, NULL, err, sizeof(err)) == -EOPNOTSUPP);
	CHECK(strstr(err, "fake0 has no RDMA atomics (atomic_cap is IBV_ATOMIC_NONE)") != NULL);
	fk.atomic = IBV_ATOMIC_GLOB;
	CHECK(node_open(0, NULL, err, sizeof(err)) == 0);
	fab_close(nodes[0].f);
	nodes[0].f = NULL;

	fk.port_state = IBV_PORT_DOWN;
	CHECK(node_open(0, NULL, err, sizeof(err)) == -ENETDOWN);
	CHECK(strstr(err, "fake0 port 1 is down, not ACTIVE") != NULL);
	fk.port_state = IBV_PORT_ACTIVE;

	fk.max_qp_wr = FAB_BATCH_MAX - 1;
	CHECK(node_open(0, NULL, err, sizeof(err)) == -EOPNOTSUPP);
	fk.max_qp_wr = 2 * FAB_BATCH_MAX;

	fk.link_layer = IBV_LINK_LAYER_ETHERNET;
	setenv("RCKV_VERBS_GID_INDEX", "4", 1);
	CHECK(node_open(0, NULL, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "RCKV_VERBS_GID_INDEX='4'") != NULL);
	setenv("RCKV_VERBS_GID_INDEX", "3", 1); /* in the table, but empty */
	CHECK(node_open(0, NULL, err, sizeof(err)) == -EADDRNOTAVAIL);
	unsetenv("RCKV_VERBS_GID_INDEX");
	setenv("RCKV_VERBS_PORT", "2", 1);
	CHECK(node_open(0, NULL, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "RCKV_VERBS_PORT='2'") != NULL);
	unsetenv("RCKV_VERBS_PORT");
	fk_reset(); /* also: nothing leaked by the failed opens */
}

/* The real libibverbs, on this machine. */
static void test_real_no_device(void)
{
	get_list_fn real_get = (get_list_fn)dlsym(RTLD_NEXT, "ibv_get_device_list");
	free_list_fn real_free = (free_list_fn)dlsym(RTLD_NEXT, "ibv_free_device_list");
	CHECK(real_get && real_free);
	if (!real_get || !real_free)
		return;
	int n = 0;
	struct ibv_device **l = real_get(&n);
	if (l)
		real_free(l);
	if (n > 0) {
		printf("test_verbs_wire: this machine has %d RDMA device(s); the no-device "
		       "message was checked on the fake only\n", n);
		return;
	}
	fk.real = true;
	char err[256];
	CHECK(node_open(0, NULL, err, sizeof(err)) == -ENODEV);
	CHECK(strstr(err, "verbs fabric: no RDMA device found (ibv_get_device_list returned "
			  "none); use --fabric shm or tcp, or see README 'Running on RDMA "
			  "hardware'") == err);
	fk.real = false;
}

static void test_loopback(void)
{
	fk_reset();
	node_start(0);
	/* verbs reaches its own region through the NIC as well. */
	CHECK(!nodes[0].f->peers[0].direct);
	struct fab_worker *fw = worker(0, 0);
	if (!fw) {
		node_stop(0);
		return;
	}
	struct fab_stats st = { 0 };
	struct fab_batch b;
	fab_batch_init(&b, fw, (struct fab_waiter){ 0 }, &st);

	char msg[] = "one-sided hello";
	CHECK(fab_write1(&b, 0, 4096, msg, sizeof(msg)) == 0);
	CHECK(memcmp((char *)nodes[0].region + 4096, msg, sizeof(msg)) == 0);
	char back[sizeof(msg)] = "";
	CHECK(fab_read1(&b, 0, 4096, back, sizeof(msg)) == 0);
	CHECK(memcmp(back, msg, sizeof(msg)) == 0);

	uint64_t old = 99;
	CHECK(fab_cas1(&b, 0, 64, 0, 5, &old) == 0 && old == 0 && word(0, 64) == 5);
	CHECK(fab_cas1(&b, 0, 64, 0, 6, &old) == 0 && old == 5 && word(0, 64) == 5);
	CHECK(fab_faa1(&b, 0, 64, 10, &old) == 0 && old == 5 && word(0, 64) == 15);
	CHECK(fab_faa1(&b, 0, 64, 1, NULL) == 0 && word(0, 64) == 16);

	/* One batch, one doorbell, in posting order: a READ before a WRITE of the
	 * same bytes sees the old value (and the WRITE is fenced), a READ after
	 * it the new one. */
	uint64_t a = 0x1111, c = 0x2222, r1 = 0, r2 = 0, o1 = 0, o2 = 0;
	int bells = fk.doorbells, fences = fk.fences;
	fab_write(&b, 0, 128, &a, 8);
	fab_read(&b, 0, 128, &r1, 8);
	fab_write(&b, 0, 128, &c, 8);
	fab_read(&b, 0, 128, &r2, 8);
	fab_cas(&b, 0, 128, 0x2222, 0x3333, &o1);
	fab_faa(&b, 0, 128, 1, &o2);
	CHECK(fab_exec(&b) == 0);
	CHECK(fk.doorbells == bells + 1);
	CHECK(fk.fences == fences + 3); /* WRITE after READ, CAS after READ, FAA after CAS */
	CHECK(r1 == 0x1111 && r2 == 0x2222 && o1 == 0x2222 && o2 == 0x3333);
	CHECK(word(0, 128) == 0x3334);
	CHECK(st.round_trips == 7 && st.verbs[FAB_READ] == 3 && st.verbs[FAB_WRITE] == 3);

	/* Out of bounds never reaches the NIC. */
	CHECK(fab_read1(&b, 0, REGION - 4, back, 8) == -EFAULT);
	CHECK(fab_read1(&b, 1, 0, back, 8) == -EHOSTDOWN);

	/* Completion channel, invariant (6): with the CQ armed, a completion the
	 * NIC delivers later makes the worker's fd readable; poll consumes the
	 * event and re-arms. The last exec's poll found its completion itself,
	 * after the event for it was raised: that event is still pending, a
	 * wake-up with nothing to do, which the next poll consumes. */
	int fd;
	CHECK(fab_worker_fds(fw, &fd, 1) == 1);
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	CHECK(poll(&pfd, 1, 0) == 1);
	CHECK(fab_worker_poll(fw) == 0);
	CHECK(poll(&pfd, 1, 0) == 0);
	fk.auto_exec = false;
	uint64_t v = 0;
	struct fab_op op = { .kind = FAB_READ, .node = 0, .len = 8, .off = 128, .buf = &v };
	struct fab_part part = { .b = &b, .node = 0, .n = 1, .ops = { &op } };
	b.pending = 1;
	b.err = 0;
	CHECK(fab_verbs_backend.post(fw, &part) == 0);
	CHECK(fab_worker_poll(fw) == 0 && b.pending == 1);
	CHECK(poll(&pfd, 1, 0) == 0);
	fk_run_all(100);
	CHECK(poll(&pfd, 1, 0) == 1);
	CHECK(fab_worker_poll(fw) == 1 && b.pending == 0 && v == 0x3334);
	CHECK(poll(&pfd, 1, 0) == 0);
	/* And again: the CQ was re-armed. */
	b.pending = 1;
	v = 0;
	CHECK(fab_verbs_backend.post(fw, &part) == 0);
	fk_run_all(100);
	CHECK(poll(&pfd, 1, 0) == 1);
	CHECK(fab_worker_poll(fw) == 1 && b.pending == 0 && v == 0x3334);
	fk.auto_exec = true;

	fab_worker_destroy(fw);
	node_stop(0);
	fk_reset();
}

/* Parts posted straight to the backend, as fab_exec does, but many at once
 * (as many coroutines would). */
static void post_parts(struct fab_worker *fw, struct fab_batch *b, struct fab_part *parts,
		       int n)
{
	b->pending = n;
	b->err = 0;
	b->handle = NULL;
	for (int i = 0; i < n; i++) {
		int r = fab_verbs_backend.post(fw, &parts[i]);
		if (r)
			fab_part_done(&parts[i], r);
	}
}

static void run_until_done(struct fab_worker *fw, struct fab_batch *b)
{
	for (int i = 0; i < 100000 && b->pending; i++)
		fab_worker_poll(fw);
	CHECK(b->pending == 0);
}

static void test_two_nodes(void)
{
	fk_reset();
	fk.link_layer = IBV_LINK_LAYER_ETHERNET; /* RoCE: GRH and GIDs */
	node_start(0);
	node_start(1);
	node_meet(0, 1);
	node_meet(1, 0);
	struct fab_worker *w0 = worker(0, 0), *w0b = worker(0, 1), *w1 = worker(1, 0);
	if (!w0 || !w0b || !w1)
		goto out;
	/* Every QP used the IPv4-mapped RoCE v2 GID (index 2), and each side the
	 * smaller of the two ports' MTUs. */
	int nqp = 0;
	for (struct fk_qp *q = fk.qps; q; q = q->next, nqp++) {
		CHECK(q->ah.is_global && q->ah.grh.sgid_index == 2);
		struct fk_qp *p = fk_qp_find(q->dest_qpn);
		CHECK(p != NULL);
		if (!p)
			continue;
		enum ibv_mtu m1 = fk_mtu(fk_id(q->qp.context)), m2 = fk_mtu(fk_id(p->qp.context));
		CHECK(q->path_mtu == (m1 < m2 ? m1 : m2));
	}
	CHECK(nqp == 12); /* 3 workers x 2 endpoints, each a requester and a responder */

	struct fab_batch b0, b1;
	fab_batch_init(&b0, w0, (struct fab_waiter){ 0 }, NULL);
	fab_batch_init(&b1, w1, (struct fab_waiter){ 0 }, NULL);
	char msg[300];
	for (int i = 0; i < 300; i++)
		msg[i] = (char)i;
	CHECK(fab_write1(&b0, 1, 1000, msg, 300) == 0);
	CHECK(memcmp((char *)nodes[1].region + 1000, msg, 300) == 0);
	char back[300] = { 0 };
	CHECK(fab_read1(&b1, 1, 1000, back, 300) == 0 && memcmp(back, msg, 300) == 0);
	uint64_t old = 1;
	CHECK(fab_cas1(&b1, 0, 8, 0, 77, &old) == 0 && old == 0 && word(0, 8) == 77);
	/* Both nodes' NIC atomics on one word, and node 0's through loopback. */
	CHECK(fab_faa1(&b0, 0, 8, 1, &old) == 0 && old == 77);
	CHECK(fab_faa1(&b1, 0, 8, 1, &old) == 0 && old == 78 && word(0, 8) == 79);

	/* A batch to both nodes: one part, one doorbell per node. */
	int bells = fk.doorbells;
	uint64_t x = 0, y = 0;
	fab_read(&b0, 0, 8, &x, 8);
	fab_read(&b0, 1, 1000, &y, 8);
	fab_faa(&b0, 1, 2048, 5, NULL);
	CHECK(fab_exec(&b0) == 0);
	CHECK(fk.doorbells == bells + 2);
	CHECK(x == 79 && memcmp(&y, msg, 8) == 0 && word(1, 2048) == 5);

	/* fab_flush, persistence power's remote flush (FORD): a READ of the
	 * region's first word behind the WRITEs it covers, on their queue
	 * pair, so that it completes only once they are placed; the own
	 * region's too, through the loopback. */
	fk.tracing = true;
	fk.ntrace = 0;
	fab_write(&b0, 1, 512, msg, 64);
	fab_write(&b0, 0, 512, msg, 64);
	fab_flush(&b0, 1);
	fab_flush(&b0, 0);
	CHECK(fab_exec(&b0) == 0);
	fk.tracing = false;
	CHECK(fk.ntrace == 4);
	for (int nd = 0; nd < 2 && fk.ntrace == 4; nd++) {
		const uint64_t base = (uint64_t)(uintptr_t)nodes[nd].region;
		int wi = -1, ri = -1;
		for (int i = 0; i < 4; i++) {
			if (fk.trace[i].op == IBV_WR_RDMA_WRITE && fk.trace[i].raddr == base + 512)
				wi = i;
			if (fk.trace[i].op == IBV_WR_RDMA_READ && fk.trace[i].raddr == base &&
			    fk.trace[i].len == 8)
				ri = i;
		}
		CHECK(wi >= 0 && ri > wi && fk.trace[wi].qpn == fk.trace[ri].qpn);
	}
	CHECK(memcmp((char *)nodes[0].region + 512, msg, 64) == 0);

	/* Backpressure, invariant (1): 12 parts of 64 FAAs on one word, while
	 * the NIC is stopped; the send queue (128 WRs here) takes two parts,
	 * the rest wait, and all complete in posting order. */
	enum { NP = 12 };
	static struct fab_op ops[NP][FAB_BATCH_MAX];
	static uint64_t olds[NP][FAB_BATCH_MAX];
	static struct fab_part parts[NP];
	for (int i = 0; i < NP; i++) {
		parts[i] = (struct fab_part){ .b = &b0, .node = 1, .n = FAB_BATCH_MAX };
		for (int j = 0; j < FAB_BATCH_MAX; j++) {
			ops[i][j] = (struct fab_op){ .kind = FAB_FAA, .node = 1, .len = 8,
						     .off = 4096, .swp = 1, .old = &olds[i][j] };
			parts[i].ops[j] = &ops[i][j];
		}
	}
	fk.auto_exec = false;
	post_parts(w0, &b0, parts, NP);
	struct fk_qp *rq = NULL;
	for (struct fk_qp *q = fk.qps; q; q = q->next)
		if (q->sq_n)
			rq = q;
	CHECK(rq && rq->sq_n == 2 * FAB_BATCH_MAX);
	CHECK(fab_worker_poll(w0) == 0 && b0.pending == NP);
	fk.auto_exec = true;
	fk.exec_per_poll = 7; /* completions land mid-part */
	run_until_done(w0, &b0);
	CHECK(b0.err == 0);
	bool inorder = true;
	for (int i = 0; i < NP; i++)
		for (int j = 0; j < FAB_BATCH_MAX; j++)
			inorder &= olds[i][j] == (uint64_t)(i * FAB_BATCH_MAX + j);
	CHECK(inorder);
	CHECK(word(1, 4096) == NP * FAB_BATCH_MAX);

	/* Bounce pressure: three 400 KiB READs fill the 1 MiB ring, so the third
	 * waits for the first; a 1.5 MiB READ gets a buffer of its own, which is
	 * released when it completes. */
	for (uint32_t i = 0; i < REGION / 8; i++)
		memcpy((char *)nodes[1].region + 8 * (uint64_t)i, &i, 4);
	enum { BIG = 400 << 10, HUGE = 1536 << 10 };
	char *bufs[4];
	uint32_t lens[4] = { BIG, BIG, BIG, HUGE };
	for (int i = 0; i < 4; i++) {
		bufs[i] = malloc(lens[i]);
		ops[i][0] = (struct fab_op){ .kind = FAB_READ, .node = 1, .len = lens[i],
					     .off = 8 * 4096 * (uint64_t)i, .buf = bufs[i] };
		parts[i] = (struct fab_part){ .b = &b0, .node = 1, .n = 1, .ops = { &ops[i][0] } };
	}
	int mrs = fk.live_mr;
	fk.auto_exec = false;
	post_parts(w0, &b0, parts, 4);
	CHECK(rq->sq_n == 2);            /* two READs posted, two waiting */
	fk.auto_exec = true;
	run_until_done(w0, &b0);
	CHECK(b0.err == 0 && fk.live_mr == mrs);
	for (int i = 0; i < 4; i++) {
		CHECK(memcmp(bufs[i], (char *)nodes[1].region + ops[i][0].off, lens[i]) == 0);
		free(bufs[i]);
	}

	/* A peer that stops answering, invariant (4): the second WR executed
	 * fails; its part and every later part of that QP fail with -EHOSTDOWN,
	 * the flushes are dropped, later posts fail at once, and the other
	 * endpoints keep working. */
	for (int i = 0; i < 3; i++) {
		parts[i] = (struct fab_part){ .b = &b0, .node = 1, .n = 2 };
		for (int j = 0; j < 2; j++) {
			ops[i][j] = (struct fab_op){ .kind = FAB_FAA, .node = 1, .len = 8,
						     .off = 4096, .swp = 1, .old = &olds[i][j] };
			parts[i].ops[j] = &ops[i][j];
		}
	}
	fk.fail_at = 2;
	fk.fail_status = IBV_WC_RETRY_EXC_ERR;
	post_parts(w0, &b0, parts, 3);
	run_until_done(w0, &b0);
	CHECK(b0.err == -EHOSTDOWN);
	CHECK(fab_read1(&b0, 1, 0, &x, 8) == -EHOSTDOWN);
	CHECK(fab_read1(&b0, 0, 8, &x, 8) == 0 && x == 79);
	fab_batch_init(&b0, w0b, (struct fab_waiter){ 0 }, NULL);
	CHECK(fab_read1(&b0, 1, 2048, &x, 8) == 0 && x == word(1, 2048)); /* worker 1's QP */

	/* The peer rejoins (its HELLO after a restart: fab_peer_back): worker
	 * 0's broken endpoint to it makes a new queue pair at its next post,
	 * against a new responder there (the old pair destroyed), and works;
	 * before that, it kept failing. */
	struct fab_batch b2;
	fab_batch_init(&b2, w0, (struct fab_waiter){ 0 }, NULL);
	CHECK(fab_read1(&b2, 1, 2048, &x, 8) == -EHOSTDOWN);
	int qps = fk.live_qp;
	fab_peer_back(nodes[0].f, 1);
	x = 0;
	CHECK(fab_read1(&b2, 1, 2048, &x, 8) == 0 && x == word(1, 2048));
	CHECK(fab_faa1(&b2, 1, 2048, 1, &old) == 0 && old == x && word(1, 2048) == x + 1);
	CHECK(fk.live_qp == qps);
	CHECK(fab_read1(&b2, 0, 8, &x, 8) == 0 && x == 79); /* the loopback never broke */

	/* fab_fence (the configuration took node 1 out: hung, say): a part in
	 * flight there fails at once with -EHOSTDOWN (its queue pair put in
	 * error, the NIC flushes it), later ops are refused, and after
	 * fab_unfence (it rejoined) a new queue pair works. */
	fk.auto_exec = false;
	ops[0][0] = (struct fab_op){ .kind = FAB_READ, .node = 1, .len = 8, .off = 2048, .buf = &x };
	parts[0] = (struct fab_part){ .b = &b2, .node = 1, .n = 1, .ops = { &ops[0][0] } };
	post_parts(w0, &b2, parts, 1);
	fab_fence(nodes[0].f, 1);
	fk.auto_exec = true;
	run_until_done(w0, &b2);
	CHECK(b2.err == -EHOSTDOWN);
	CHECK(fab_read1(&b2, 1, 2048, &x, 8) == -EHOSTDOWN);
	fab_unfence(nodes[0].f, 1);
	x = 0;
	CHECK(fab_read1(&b2, 1, 2048, &x, 8) == 0 && x == word(1, 2048));
	CHECK(fk.live_qp == qps);

	/* Invariant (5): both endpoints of that worker fail with full send
	 * queues; every WR, signaled or not, then completes, and the CQ holds
	 * them all. */
	for (int i = 0; i < 4; i++) {
		parts[i] = (struct fab_part){ .b = &b0, .node = (uint16_t)(i & 1),
					      .n = FAB_BATCH_MAX };
		for (int j = 0; j < FAB_BATCH_MAX; j++) {
			ops[i][j] = (struct fab_op){ .kind = FAB_FAA, .node = (uint16_t)(i & 1),
						     .len = 8, .off = 4096, .swp = 1 };
			parts[i].ops[j] = &ops[i][j];
		}
	}
	fk.auto_exec = false;
	post_parts(w0b, &b0, parts, 4);
	fk.fail_all = true;
	fk_run_all(1 << 20);
	run_until_done(w0b, &b0);
	CHECK(b0.err == -EHOSTDOWN);
	fk.fail_all = false;
	fk.auto_exec = true;
out:
	fab_worker_destroy(w0);
	fab_worker_destroy(w0b);
	fab_worker_destroy(w1);
	node_stop(0);
	node_stop(1);
	fk_reset();
}

/*
 * A node that comes up after the others' workers started (with replicas
 * the cluster starts without it): a worker reaches it at its first
 * operation there, in a slot of its CQ and bounce area kept for it
 * (fab_config.nodes). A worker that kept none cannot.
 */
static void test_late_node(void)
{
	fk_reset();
	cluster_nodes = 3;
	node_start(0);
	cluster_nodes = 0; /* node 1 keeps no slot */
	node_start(1);
	node_meet(0, 1);
	node_meet(1, 0);
	struct fab_worker *w = worker(0, 0);
	struct fab_worker *w1 = worker(1, 0);
	cluster_nodes = 3;
	node_start(2);
	node_meet(0, 2);
	node_meet(2, 0);
	node_meet(1, 2);
	struct fab_batch b, b1;
	fab_batch_init(&b, w, (struct fab_waiter){ 0 }, NULL);
	fab_batch_init(&b1, w1, (struct fab_waiter){ 0 }, NULL);
	uint64_t x = 5;
	CHECK(fab_write1(&b, 2, 64, &x, 8) == 0 && word(2, 64) == 5);
	CHECK(fab_faa1(&b, 2, 64, 1, &x) == 0 && x == 5 && word(2, 64) == 6);
	CHECK(fab_read1(&b, 1, 0, &x, 8) == 0);
	CHECK(fab_read1(&b1, 2, 64, &x, 8) == -EHOSTDOWN); /* no slot kept */
	CHECK(fab_read1(&b1, 0, 0, &x, 8) == 0);
	fab_worker_destroy(w);
	fab_worker_destroy(w1);
	node_stop(0);
	node_stop(1);
	node_stop(2);
	cluster_nodes = 0;
	fk_reset();
	printf("  late node: reached at the first operation, in a kept slot\n");
}

/* ---- two-sided RPC over SEND/RECV ---- */

/*
 * The nodes' workers in one thread: a batch's park polls every worker of
 * the test (the target's, whose polls take the calls off its responders'
 * CQs and run them, and the initiator's), then answers the deferred calls,
 * then runs the test's hook. The fake's NIC runs at every CQ poll.
 */
struct rpc_env {
	struct fab_worker *fw[4];
	int polls;
	void (*hook)(struct rpc_env *e);
};
static struct rpc_env env;

static void *env_self(void *ctx) { return ctx; }
static void env_unpark(void *ctx, void *h) { (void)ctx, (void)h; }

static struct fab_rpc_call *later[64];
static int nlater;

static void env_park(void *ctx)
{
	struct rpc_env *e = ctx;
	if (++e->polls > 200000) {
		fprintf(stderr, "test_verbs_wire: an exec never completed\n");
		abort();
	}
	for (int i = 0; i < 4; i++)
		if (e->fw[i])
			fab_worker_poll(e->fw[i]);
	for (int k = 0; k < nlater; k++) {
		struct fab_rpc_call *c = later[k];
		memcpy(c->resp, c->req, c->len < c->cap ? c->len : c->cap);
		fab_rpc_reply(c, 11, c->len);
	}
	nlater = 0;
	if (e->hook)
		e->hook(e);
}

static void env_batch(struct fab_batch *b, struct fab_worker *fw, struct fab_stats *st)
{
	fab_batch_init(b, fw, (struct fab_waiter){ .ctx = &env, .self = env_self,
						   .park = env_park, .unpark = env_unpark },
		       st);
}

enum { H_ADD = 1, H_FAIL = 2, H_ECHO = 3, H_LATER = 4, H_HOLD = 5, H_UNSET = 9 };

static int h_later(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	(void)arg, (void)len;
	if (nlater == 64)
		return -EBUSY;
	later[nlater++] = c;
	return FAB_RPC_DEFER;
}

/* Never answers (a target that dies, or hangs, mid-call). */
static int nheld;
static int h_hold(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	(void)arg, (void)c, (void)len;
	nheld++;
	return FAB_RPC_DEFER;
}

static void rpc_register(struct fab *f)
{
	CHECK(fab_rpc_register(f, H_ADD, "add", h_add, NULL) == 0);
	CHECK(fab_rpc_register(f, H_FAIL, "fail", h_fail, NULL) == 0);
	CHECK(fab_rpc_register(f, H_ECHO, "echo", h_echo, NULL) == 0);
	CHECK(fab_rpc_register(f, H_LATER, "later", h_later, NULL) == 0);
	CHECK(fab_rpc_register(f, H_HOLD, "hold", h_hold, NULL) == 0);
}

/* Nodes 0 (initiator) and 1 (target), each with one worker. */
static void rpc_up(struct fab_worker **w0, struct fab_worker **w1)
{
	fk_reset();
	node_start(0);
	node_start(1);
	node_meet(0, 1);
	node_meet(1, 0);
	rpc_register(nodes[0].f);
	rpc_register(nodes[1].f);
	*w0 = worker(0, 0);
	*w1 = worker(1, 0);
	env = (struct rpc_env){ .fw = { *w0, *w1 } };
}

static void rpc_down(struct fab_worker *w0, struct fab_worker *w1)
{
	fab_worker_destroy(w0);
	fab_worker_destroy(w1);
	node_stop(0);
	node_stop(1);
	env = (struct rpc_env){ 0 };
	fk_reset(); /* and nothing leaked: receives' MRs, responders' CQs */
}

/* Poll until quiet, then: is any of fw's fds readable? */
static bool fds_quiet(struct fab_worker *fw)
{
	for (int i = 0; i < 4; i++)
		fab_worker_poll(fw);
	int fds[8];
	struct pollfd pfd[8];
	int k = fab_worker_fds(fw, fds, 8);
	for (int i = 0; i < k; i++)
		pfd[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
	return k >= 2 && poll(pfd, (nfds_t)k, 0) == 0;
}

/*
 * The conformance test_fabric's test_rpc runs on shm and tcp, on the fake
 * NIC: replies and their effect on the region, ordering against one-sided
 * ops on the same QP, batching (one doorbell), failures, oversize replies,
 * the largest messages, deferred handlers, a burst past the target's
 * receives (RNR), the own node through the loopback, and idle workers
 * whose fds stay quiet.
 */
static void test_rpc(void)
{
	struct fab_worker *w0, *w1;
	rpc_up(&w0, &w1);
	if (!w0 || !w1)
		goto out;
	struct fab_stats st = { 0 };
	struct fab_batch b;
	env_batch(&b, w0, &st);
	char *t = nodes[1].region;

	/* Idle from the start: a responder's receives are posted, its CQ
	 * armed, and nothing wakes anyone. */
	CHECK(fds_quiet(w0) && fds_quiet(w1));

	/* A reply, and its effect on the region. */
	*(uint64_t *)t = 40;
	struct rpc_add_req rq = { 0, 1 };
	uint64_t old = 0;
	struct fab_rpc_reply rep = { .buf = &old, .cap = 8 };
	fab_rpc(&b, 1, H_ADD, &rq, sizeof(rq), &rep);
	CHECK(fab_exec(&b) == 0);
	CHECK(rep.status == 0 && rep.len == 8 && old == 40 && *(uint64_t *)t == 41);

	/* Ordering on one QP: the call sees the WRITE before it (the SEND
	 * follows the WRITE on the QP, one doorbell); the READ and CAS after
	 * it see its effect (a second phase). */
	uint64_t five = 5, seen = 0, cas_old = 0;
	st = (struct fab_stats){ 0 };
	uint64_t bells = fab_worker_doorbells(w0);
	fk.tracing = true;
	fk.ntrace = 0;
	fab_write(&b, 1, 64, &five, 8);
	rq = (struct rpc_add_req){ 64, 1 };
	fab_rpc(&b, 1, H_ADD, &rq, sizeof(rq), &rep);
	fab_read(&b, 1, 64, &seen, 8);
	fab_cas(&b, 1, 64, 6, 100, &cas_old);
	CHECK(fab_exec(&b) == 0);
	fk.tracing = false;
	CHECK(old == 5 && seen == 6 && cas_old == 6 && *(uint64_t *)(t + 64) == 100);
	CHECK(st.verbs[FAB_RPC] == 1 && st.verbs[FAB_WRITE] == 1 && st.round_trips == 2);
	CHECK(fab_worker_doorbells(w0) == bells + 2);
	CHECK(fk.ntrace >= 2 && fk.trace[0].op == IBV_WR_RDMA_WRITE && fk.trace[1].op == IBV_WR_SEND &&
	      fk.trace[0].qpn == fk.trace[1].qpn);

	/* A READ before a call is fenced from it (the handler may change
	 * what the READ still has to return). */
	int fences = fk.fences;
	uint64_t before = 0;
	fab_read(&b, 1, 64, &before, 8);
	rq = (struct rpc_add_req){ 64, 1 };
	fab_rpc(&b, 1, H_ADD, &rq, sizeof(rq), &rep);
	CHECK(fab_exec(&b) == 0 && before == 100 && old == 100 && fk.fences == fences + 1);

	/* Batching: 8 calls to one node in one part, one doorbell, one round
	 * trip; each answered into its own reply. */
	enum { NB = 8 };
	struct rpc_add_req rqs[64];
	uint64_t olds[64];
	struct fab_rpc_reply reps[64];
	st = (struct fab_stats){ 0 };
	bells = fab_worker_doorbells(w0);
	int sends = fk.sends;
	for (int k = 0; k < NB; k++) {
		rqs[k] = (struct rpc_add_req){ 128 + 8 * (uint64_t)k, (uint64_t)k + 1 };
		reps[k] = (struct fab_rpc_reply){ .buf = &olds[k], .cap = 8 };
		fab_rpc(&b, 1, H_ADD, &rqs[k], sizeof(rqs[k]), &reps[k]);
	}
	CHECK(fab_exec(&b) == 0);
	bool all = true;
	for (int k = 0; k < NB; k++)
		all &= reps[k].status == 0 && reps[k].len == 8 && olds[k] == 0 &&
		       *(uint64_t *)(t + 128 + 8 * k) == (uint64_t)k + 1;
	CHECK(all);
	CHECK(st.round_trips == 1 && st.verbs[FAB_RPC] == NB);
	CHECK(fab_worker_doorbells(w0) == bells + 1);
	CHECK(fk.sends - sends >= 2 * NB); /* the calls, their answers (and h_add's none) */

	/* A burst past the target's receives (a full part of calls): the
	 * SENDs that find none are NAKed and retried (rnr_retry 7), and every
	 * call is answered. */
	int naks = fk.rnr_naks;
	fk.exec_per_poll = 100; /* the NIC outruns the target's polls */
	for (int k = 0; k < FAB_BATCH_MAX; k++) {
		rqs[k] = (struct rpc_add_req){ 1024 + 8 * (uint64_t)k, 1 };
		reps[k] = (struct fab_rpc_reply){ .buf = &olds[k], .cap = 8 };
		fab_rpc(&b, 1, H_ADD, &rqs[k], sizeof(rqs[k]), &reps[k]);
	}
	CHECK(fab_exec(&b) == 0);
	all = true;
	for (int k = 0; k < FAB_BATCH_MAX; k++)
		all &= reps[k].status == 0 && *(uint64_t *)(t + 1024 + 8 * k) == 1;
	CHECK(all);
	CHECK(fk.rnr_naks > naks);
	fk.exec_per_poll = 5;

	/* A handler that fails answers its error and fails nothing else; so
	 * does an id with no handler; a reply larger than its buffer is
	 * refused. */
	char echo[300], back[300];
	for (int k = 0; k < 300; k++)
		echo[k] = (char)k;
	struct fab_rpc_reply rf = { .buf = back, .cap = 300 }, ru = rf, re = rf, rs = rf;
	rq = (struct rpc_add_req){ 0, 1 };
	fab_rpc(&b, 1, H_FAIL, NULL, 0, &rf);
	fab_rpc(&b, 1, H_UNSET, NULL, 0, &ru);
	fab_rpc(&b, 1, H_ADD, &rq, sizeof(rq), &rep);
	CHECK(fab_exec(&b) == 0);
	CHECK(rf.status == -EPERM && ru.status == -EOPNOTSUPP && rep.status == 0 && old == 41);
	fab_rpc(&b, 1, H_ECHO, echo, 300, &re);
	CHECK(fab_exec(&b) == 0 && re.status == 7 && re.len == 300 && memcmp(back, echo, 300) == 0);
	rs.cap = 100;
	fab_rpc(&b, 1, H_ECHO, echo, 300, &rs);
	CHECK(fab_exec(&b) == 0 && rs.status == -EMSGSIZE && rs.len == 0);

	/* The largest: FAB_RPC_MAX each way, twice in one part (the target's
	 * answer slots and the initiator's receives hold any message). */
	char *big = malloc(FAB_RPC_MAX), *bb1 = malloc(FAB_RPC_MAX), *bb2 = malloc(FAB_RPC_MAX);
	for (uint32_t k = 0; k < FAB_RPC_MAX; k++)
		big[k] = (char)(k * 7);
	struct fab_rpc_reply r1 = { .buf = bb1, .cap = FAB_RPC_MAX }, r2 = { .buf = bb2,
									     .cap = FAB_RPC_MAX };
	fab_rpc(&b, 1, H_ECHO, big, FAB_RPC_MAX, &r1);
	fab_rpc(&b, 1, H_ECHO, big, FAB_RPC_MAX, &r2);
	CHECK(fab_exec(&b) == 0 && r1.status == 7 && r1.len == FAB_RPC_MAX && r2.len == FAB_RPC_MAX &&
	      memcmp(big, bb1, FAB_RPC_MAX) == 0 && memcmp(big, bb2, FAB_RPC_MAX) == 0);
	free(big);
	free(bb1);
	free(bb2);

	/* Deferred handlers answer later, after a call that answers at once. */
	char la[3][16], lb[3][16];
	struct fab_rpc_reply rl[3];
	for (int k = 0; k < 3; k++) {
		snprintf(la[k], sizeof(la[k]), "later %d", k);
		rl[k] = (struct fab_rpc_reply){ .buf = lb[k], .cap = 16 };
		fab_rpc(&b, 1, H_LATER, la[k], 16, &rl[k]);
	}
	fab_rpc(&b, 1, H_ADD, &rq, sizeof(rq), &rep);
	CHECK(fab_exec(&b) == 0 && rep.status == 0);
	for (int k = 0; k < 3; k++)
		CHECK(rl[k].status == 11 && rl[k].len == 16 && strcmp(lb[k], la[k]) == 0);

	/* The own node: through the loopback QP to its own responder, run by
	 * the calling worker. */
	*(uint64_t *)((char *)nodes[0].region + 256) = 9;
	rq = (struct rpc_add_req){ 256, 1 };
	fab_rpc(&b, 0, H_ADD, &rq, sizeof(rq), &rep);
	CHECK(fab_exec(&b) == 0 && rep.status == 0 && old == 9 &&
	      word(0, 256) == 10);

	/* Idle again: nothing left to wake anyone. */
	CHECK(fds_quiet(w0) && fds_quiet(w1));
out:
	rpc_down(w0, w1);
	printf("  rpc: replies, ordering, batching (%d calls, 1 doorbell), RNR burst, failures, "
	       "deferred, own node, idle fds quiet\n", NB);
}

/* FAB_OP_TWOSIDED ops ride the same RPCs (twosided.c), unchanged. */
static void test_twosided(void)
{
	struct fab_worker *w0, *w1;
	rpc_up(&w0, &w1);
	if (!w0 || !w1)
		goto out;
	struct fab_stats st = { 0 };
	struct fab_batch b;
	env_batch(&b, w0, &st);
	char *t = nodes[1].region;
	enum { SHIP = 3 };
	b.twosided = 1u << SHIP;

	/* Every kind in one message: one RPC, one round trip, no verb. */
	uint64_t v = 7, got = 0;
	char five[5] = { 'a', 'b', 'c', 'd', 'e' }, back[21] = { 0 };
	uint64_t cas_old = 1, faa_old = 1;
	*(uint64_t *)(t + 528) = 40;
	int sends = fk.sends;
	fk.tracing = true;
	fk.ntrace = 0;
	b.tag = SHIP;
	fab_write(&b, 1, 512, &v, 8);
	fab_write(&b, 1, 520, five, 5);
	fab_cas(&b, 1, 512, 7, 8, &cas_old);
	fab_faa(&b, 1, 528, 2, &faa_old);
	fab_read(&b, 1, 512, back, 21);
	CHECK(fab_exec(&b) == 0);
	uint64_t w0v;
	memcpy(&w0v, back, 8);
	CHECK(cas_old == 7 && faa_old == 40 && w0v == 8 && memcmp(back + 8, five, 5) == 0 &&
	      *(uint64_t *)(t + 528) == 42);
	CHECK(st.round_trips == 1 && st.verbs[FAB_RPC] == 1 && st.verbs[FAB_CAS] == 0 &&
	      st.verbs[FAB_READ] == 0 && st.tag_rpcs[SHIP] == 1 && st.tag_verbs[SHIP] == 0);
	CHECK(fk.sends == sends + 2); /* the message and its answer */
	/* The target applied them through its NIC (the loopback QP), as the
	 * peers' one-sided atomics on those words are: NIC atomics are not
	 * atomic with the CPU's. */
	fk.tracing = false;
	const uint64_t tb = (uint64_t)(uintptr_t)t;
	int nic_cas = 0, nic_faa = 0;
	for (int i = 0; i < fk.ntrace; i++) {
		nic_cas += fk.trace[i].op == IBV_WR_ATOMIC_CMP_AND_SWP && fk.trace[i].raddr == tb + 512;
		nic_faa += fk.trace[i].op == IBV_WR_ATOMIC_FETCH_AND_ADD && fk.trace[i].raddr == tb + 528;
	}
	CHECK(nic_cas == 1 && nic_faa == 1);

	/* Ordering with one-sided ops of another tag on the same QP. */
	st = (struct fab_stats){ 0 };
	v = 100;
	b.tag = 0;
	fab_write(&b, 1, 544, &v, 8);
	b.tag = SHIP;
	fab_cas(&b, 1, 544, 100, 101, &cas_old);
	b.tag = 0;
	fab_read(&b, 1, 544, &got, 8);
	CHECK(fab_exec(&b) == 0);
	CHECK(cas_old == 100 && got == 101);
	CHECK(st.round_trips == 2 && st.verbs[FAB_RPC] == 1 && st.tag_verbs[0] == 2 &&
	      st.tag_rpcs[SHIP] == 1);

	/* The own node's shipped ops, through its loopback and responder. */
	*(uint64_t *)((char *)nodes[0].region + 256) = 9;
	b.tag = SHIP;
	fab_faa(&b, 0, 256, 1, &faa_old);
	CHECK(fab_exec(&b) == 0 && faa_old == 9 && word(0, 256) == 10);
out:
	rpc_down(w0, w1);
	printf("  twosided: every kind in one message, ordering, own node\n");
}

/* The park hook of test_rpc_peer_death: once the held call runs on the
 * target, the target dies (its worker and fabric go, its QPs with them),
 * and later the configuration fences it. */
static int die_at;
static void die_hook(struct rpc_env *e)
{
	if (nheld && e->fw[1] && !die_at) {
		fab_worker_destroy(e->fw[1]);
		e->fw[1] = NULL;
		node_stop(1);
		die_at = e->polls;
	}
	if (die_at && e->polls == die_at + 50)
		fab_fence(nodes[0].f, 1);
}

/* Fences the target a while after the held call runs (the calls of its
 * part that answer have answered by then). */
static void fence_hook(struct rpc_env *e)
{
	if (nheld && !die_at)
		die_at = e->polls;
	if (die_at && e->polls == die_at + 20)
		fab_fence(nodes[0].f, 1);
}

/*
 * Failures: a call whose SEND is not acknowledged (the peer stopped
 * answering), a call held on a target that is fenced, and one on a
 * target that dies: each fails the exec with -EHOSTDOWN and its calls get
 * -EHOSTDOWN, not -EINPROGRESS; the endpoint reconnects after the node's
 * HELLO and calls work again, and nothing leaks (receives, calls, QPs).
 */
static void test_rpc_peer_death(void)
{
	struct fab_worker *w0, *w1;
	rpc_up(&w0, &w1);
	if (!w0 || !w1)
		goto out;
	struct fab_batch b;
	env_batch(&b, w0, NULL);
	struct rpc_add_req rq = { 0, 1 };
	uint64_t old = 0, v = 3;
	struct fab_rpc_reply rep = { .buf = &old, .cap = 8 }, rep2 = rep;
	fab_rpc(&b, 1, H_ADD, &rq, sizeof(rq), &rep);
	CHECK(fab_exec(&b) == 0 && rep.status == 0);
	const int mrs = fk.live_mr, qps = fk.live_qp;

	/* The SEND is never acknowledged: retries exhausted. */
	fab_write(&b, 1, 8, &v, 8);
	fab_rpc(&b, 1, H_ADD, &rq, sizeof(rq), &rep);
	fab_rpc(&b, 1, H_ADD, &rq, sizeof(rq), &rep2);
	fk.fail_at = 2;
	fk.fail_status = IBV_WC_RETRY_EXC_ERR;
	int rc = fab_exec(&b);
	CHECK(rc == -EHOSTDOWN);
	if (rc != -EHOSTDOWN)
		fprintf(stderr, "lost send: exec %d, status %d %d, fail_at %d\n", rc, rep.status, rep2.status, fk.fail_at);
	CHECK(rep.status == -EHOSTDOWN && rep2.status == -EHOSTDOWN && (b.failed & 2));
	fab_rpc(&b, 1, H_ADD, &rq, sizeof(rq), &rep);
	CHECK(fab_exec(&b) == -EHOSTDOWN && rep.status == -EHOSTDOWN); /* until its HELLO */
	fab_peer_back(nodes[0].f, 1);
	fab_rpc(&b, 1, H_ADD, &rq, sizeof(rq), &rep);
	CHECK(fab_exec(&b) == 0 && rep.status == 0);
	CHECK(fk.live_mr == mrs && fk.live_qp == qps);

	/* A call that never answers, and the configuration fences its
	 * target: the QP's error flushes it. Answered ones keep their status. */
	nheld = 0;
	die_at = 0;
	env.hook = fence_hook;
	struct fab_rpc_reply hrep = { .buf = &old, .cap = 8 };
	fab_rpc(&b, 1, H_ADD, &rq, sizeof(rq), &rep);
	fab_rpc(&b, 1, H_HOLD, NULL, 0, &hrep);
	rc = fab_exec(&b);
	CHECK(rc == -EHOSTDOWN);
	CHECK(hrep.status == -EHOSTDOWN && rep.status == 0 && nheld == 1);
	if (hrep.status != -EHOSTDOWN || rep.status || nheld != 1)
		fprintf(stderr, "fenced: exec %d, held %d, add %d, nheld %d\n", rc, hrep.status,
			rep.status, nheld);
	env.hook = NULL;
	fab_unfence(nodes[0].f, 1);
	fab_rpc(&b, 1, H_ADD, &rq, sizeof(rq), &rep);
	CHECK(fab_exec(&b) == 0 && rep.status == 0);
	CHECK(fk.live_qp == qps); /* the old responder went with the new one */

	/* The target dies mid-call (the held call goes with its fabric), and
	 * is fenced later. */
	nheld = 0;
	die_at = 0;
	env.hook = die_hook;
	fab_rpc(&b, 1, H_HOLD, NULL, 0, &hrep);
	CHECK(fab_exec(&b) == -EHOSTDOWN && hrep.status == -EHOSTDOWN);
	env.hook = NULL;
	/* It restarts and says HELLO: calls reach it again. */
	node_start(1);
	node_meet(1, 0);
	rpc_register(nodes[1].f);
	w1 = worker(1, 0);
	env.fw[1] = w1;
	fab_unfence(nodes[0].f, 1);
	*(uint64_t *)nodes[1].region = 5;
	fab_rpc(&b, 1, H_ADD, &rq, sizeof(rq), &rep);
	CHECK(fab_exec(&b) == 0 && rep.status == 0 && old == 5);
out:
	rpc_down(w0, w1);
	printf("  rpc failures: lost SEND, fenced and dead targets fail their calls with "
	       "-EHOSTDOWN; reconnects answer again\n");
}

static void test_ctl_and_refusals(void)
{
	fk_reset();
	fk.link_layer = IBV_LINK_LAYER_ETHERNET;
	char err[256] = "";
	CHECK(node_open(0, NULL, err, sizeof(err)) == 0);
	struct fab *f = nodes[0].f;
	uint8_t rep[VERBS_REP_BYTES];
	size_t rlen = sizeof(rep);
	struct verbs_qp_rep rp;

	/* Not a bootstrap message; a reply buffer too small. */
	CHECK(fab_ctl(f, "hello", 5, rep, &rlen) == -EPROTO);
	struct verbs_qp_req rq = sample_req();
	rq.from = 1;
	uint8_t req[VERBS_REQ_BYTES];
	verbs_req_encode(&rq, req);
	rlen = VERBS_REP_BYTES - 1;
	CHECK(fab_ctl(f, req, sizeof(req), rep, &rlen) == -ENOBUFS);

	/* Before attach_self: no region to offer. */
	rlen = sizeof(rep);
	CHECK(fab_ctl(f, req, sizeof(req), rep, &rlen) == 0 && rlen == VERBS_REP_BYTES);
	CHECK(verbs_rep_decode(rep, rlen, &rp, NULL) == 0 && rp.status == VERBS_ST_NOREGION);

	/* Another version, a malformed request, an InfiniBand requester. */
	req[4] = 9;
	rlen = sizeof(rep);
	CHECK(fab_ctl(f, req, sizeof(req), rep, &rlen) == 0);
	CHECK(verbs_rep_decode(rep, rlen, &rp, NULL) == 0 && rp.status == VERBS_ST_VERSION);
	rq.mtu = 9;
	verbs_req_encode(&rq, req);
	rlen = sizeof(rep);
	CHECK(fab_ctl(f, req, sizeof(req), rep, &rlen) == 0);
	CHECK(verbs_rep_decode(rep, rlen, &rp, NULL) == 0 && rp.status == VERBS_ST_BADREQ);
	rq = sample_req();
	memset(rq.gid, 0, 16);
	verbs_req_encode(&rq, req);
	rlen = sizeof(rep);
	CHECK(fab_ctl(f, req, sizeof(req), rep, &rlen) == 0);
	CHECK(verbs_rep_decode(rep, rlen, &rp, NULL) == 0 && rp.status == VERBS_ST_LINK);
	CHECK(fk.live_qp == 0);
	fab_close(f);
	nodes[0].f = NULL;

	/* A worker whose peer refuses: the message says who and why, and
	 * nothing is left behind. */
	node_start(0);
	CHECK(node_open(1, NULL, err, sizeof(err)) == 0); /* open, region not attached */
	node_meet(0, 1);
	struct fab_worker *fw = fab_worker_create_err(nodes[0].f, 3, err, sizeof(err));
	CHECK(fw == NULL);
	CHECK(strstr(err, "node 1 refused a queue pair for worker 3: its region is not "
			  "registered yet") != NULL);
	fab_close(nodes[1].f);
	nodes[1].f = NULL;
	/* A peer that is gone: the control plane's error. */
	fw = fab_worker_create_err(nodes[0].f, 3, err, sizeof(err));
	CHECK(fw == NULL && strstr(err, "queue-pair exchange with node 1 failed") != NULL);
	CHECK(fk.live_qp == 0 && fk.live_cq == 0 && fk.live_ch == 1); /* responders' channel only */
	node_stop(0);
	fk_reset();
}

int main(void)
{
	test_req_codec();
	test_rep_codec();
	test_ring();
	test_bounce_layout();
	test_fences();
	test_rpc_codec();
	test_pick_gid();
	test_parsers();

	test_open_errors();
	test_real_no_device();
	test_loopback();
	test_two_nodes();
	test_late_node();
	test_rpc();
	test_twosided();
	test_rpc_peer_death();
	test_ctl_and_refusals();

	if (failures) {
		fprintf(stderr, "test_verbs_wire: %d check(s) failed\n", failures);
		return 1;
	}
	printf("test_verbs_wire: ok\n");
	return 0;
}
