/*
 * test_tcp_wire: the tcp fabric's frames (rdma/tcp_wire.c) without sockets:
 * a request of every kind of op encodes and decodes back to the same ops,
 * and the decoder refuses what a peer must never send: a truncated
 * payload, an unknown kind, a flag on the wrong op, non-zero reserved
 * bytes (found by tests/fuzz/fuzz_tcp_wire.c: such a frame decoded but did
 * not encode back to itself), a one-sided op after an RPC, a response of
 * the wrong size.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdma/fab.h"
#include "rdma/tcp_wire.h"

static int failures;

#define CHECK(cond)                                                              \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,   \
				__LINE__, #cond);                                \
			failures++;                                              \
		}                                                                \
	} while (0)

static char wbuf[5] = "hello", rpcreq[3] = "abc", rbuf[16], repbuf[8];
static uint64_t old_cas, old_faa;
static struct fab_rpc_reply rep = { .buf = repbuf, .cap = sizeof(repbuf) };
static struct fab_op ops[5];
static struct fab_op *opp[5];

static void setup(void)
{
	ops[0] = (struct fab_op){ .kind = FAB_READ, .len = sizeof(rbuf), .off = 64, .buf = rbuf,
				  .flags = FAB_OP_FLUSH };
	ops[1] = (struct fab_op){ .kind = FAB_WRITE, .len = sizeof(wbuf), .off = 128, .buf = wbuf };
	ops[2] = (struct fab_op){ .kind = FAB_CAS, .len = 8, .off = 8, .cmp = 1, .swp = 2,
				  .old = &old_cas };
	ops[3] = (struct fab_op){ .kind = FAB_FAA, .len = 8, .off = 16, .swp = 5, .old = &old_faa };
	ops[4] = (struct fab_op){ .kind = FAB_RPC, .len = sizeof(rpcreq), .off = 3, .buf = rpcreq,
				  .rep = &rep };
	for (int i = 0; i < 5; i++)
		opp[i] = &ops[i];
}

/* The encoded request of ops[0..n); caller frees. */
static char *encode(int n, size_t *size)
{
	*size = tcp_request_size(opp, n);
	char *q = malloc(*size);
	tcp_request_encode(q, opp, n);
	return q;
}

static int decode(const char *q, struct fab_op *out, uint32_t *resp)
{
	uint32_t flen, nops;
	memcpy(&flen, q, 4);
	memcpy(&nops, q + 4, 4);
	return tcp_request_decode(q, flen, out, nops, resp);
}

static void test_round_trip(void)
{
	size_t size;
	char *q = encode(5, &size);
	struct fab_op d[5];
	uint32_t resp = 0;
	CHECK(decode(q, d, &resp) == 0);
	CHECK(resp == sizeof(rbuf) + 8 + 8);
	CHECK(d[0].kind == FAB_READ && d[0].flags == FAB_OP_FLUSH && d[0].off == 64);
	CHECK(d[1].kind == FAB_WRITE && d[1].len == 5 && memcmp(d[1].buf, "hello", 5) == 0);
	CHECK(d[2].kind == FAB_CAS && d[2].cmp == 1 && d[2].swp == 2);
	CHECK(d[3].kind == FAB_FAA && d[3].swp == 5);
	CHECK(d[4].kind == FAB_RPC && d[4].off == 3 && d[4].cmp == sizeof(repbuf) &&
	      memcmp(d[4].buf, "abc", 3) == 0);
	free(q);
}

/* Byte offset of op i's wire struct in a request. */
static size_t op_at(int i) { return 8 + (size_t)i * sizeof(struct tcp_wire_op); }

static void test_refusals(void)
{
	size_t size;
	struct fab_op d[5];
	uint32_t resp, flen;
	char *q = encode(5, &size);

	/* Reserved bytes: pad[1] and pad[2] of any op (the fuzzer's find). */
	for (int i = 0; i < 5; i++)
		for (int b = 1; b <= 2; b++) {
			q[op_at(i) + 1 + b] = 1;
			CHECK(decode(q, d, &resp) == -EPROTO);
			q[op_at(i) + 1 + b] = 0;
		}
	CHECK(decode(q, d, &resp) == 0);
	/* The flush flag on a WRITE, an unknown flag on a READ. */
	q[op_at(1) + 1] = FAB_OP_FLUSH;
	CHECK(decode(q, d, &resp) == -EPROTO);
	q[op_at(1) + 1] = 0;
	q[op_at(0) + 1] = 0x80;
	CHECK(decode(q, d, &resp) == -EPROTO);
	q[op_at(0) + 1] = FAB_OP_FLUSH;
	/* An unknown kind. */
	q[op_at(2)] = FAB_KINDS;
	CHECK(decode(q, d, &resp) == -EPROTO);
	q[op_at(2)] = FAB_CAS;
	/* A frame one byte short of its payload, and one byte long. */
	memcpy(&flen, q, 4);
	CHECK(tcp_request_decode(q, flen - 1, d, 5, &resp) == -EPROTO);
	CHECK(tcp_request_decode(q, flen + 1, d, 5, &resp) == -EPROTO);
	/* More ops than the frame has room for. */
	CHECK(tcp_request_decode(q, 4 + 2 * sizeof(struct tcp_wire_op) - 1, d, 2, &resp) ==
	      -EPROTO);
	free(q);

	/* A one-sided op after an RPC. */
	struct fab_op *swapped[2] = { &ops[4], &ops[0] };
	size = tcp_request_size(swapped, 2);
	q = malloc(size);
	tcp_request_encode(q, swapped, 2);
	CHECK(decode(q, d, &resp) == -EPROTO);
	free(q);
}

static void test_response(void)
{
	/* READ bytes, CAS old, FAA old, then the RPC's status, len, body. */
	char r[16 + 8 + 8 + 8 + 2];
	memset(r, 'r', 16);
	uint64_t o1 = 11, o2 = 22;
	memcpy(r + 16, &o1, 8);
	memcpy(r + 24, &o2, 8);
	int32_t st = 7;
	uint32_t len = 2;
	memcpy(r + 32, &st, 4);
	memcpy(r + 36, &len, 4);
	memcpy(r + 40, "ok", 2);
	CHECK(tcp_response_decode(r, sizeof(r), opp, 5) == 0);
	CHECK(rbuf[0] == 'r' && old_cas == 11 && old_faa == 22);
	CHECK(rep.status == 7 && rep.len == 2 && memcmp(repbuf, "ok", 2) == 0);
	CHECK(tcp_response_decode(r, sizeof(r) - 1, opp, 5) == -EPROTO);
	/* A reply longer than the capacity asked for. */
	len = sizeof(repbuf) + 1;
	memcpy(r + 36, &len, 4);
	CHECK(tcp_response_decode(r, sizeof(r), opp, 5) == -EPROTO);
}

int main(void)
{
	setup();
	test_round_trip();
	test_refusals();
	test_response();
	if (failures) {
		fprintf(stderr, "test_tcp_wire: %d failures\n", failures);
		return 1;
	}
	printf("test_tcp_wire: ok\n");
	return 0;
}
