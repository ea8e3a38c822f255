/*
 * verbs_wire.c: the pure helpers of the verbs fabric backend: bootstrap
 * message codec, bounce ring and layout, fence planning, GID choice. See
 * verbs_wire.h for the formats and contracts.
 */
#include "rdma/verbs_wire.h"

#include <errno.h>
#include <string.h>

/* ---- little-endian fields ---- */

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* ---- bootstrap messages ---- */

void verbs_req_encode(const struct verbs_qp_req *r, uint8_t *out)
{
	memset(out, 0, VERBS_REQ_BYTES);
	put32(out + 0, VERBS_REQ_MAGIC);
	put16(out + 4, VERBS_WIRE_VERSION);
	put16(out + 6, r->from);
	put16(out + 8, r->worker);
	put16(out + 10, r->lid);
	memcpy(out + 12, r->gid, 16);
	put32(out + 28, r->qpn);
	put32(out + 32, r->psn);
	out[36] = r->mtu;
	out[37] = r->rd_atomic;
}

void verbs_rep_encode(const struct verbs_qp_rep *r, uint8_t *out)
{
	memset(out, 0, VERBS_REP_BYTES);
	put32(out + 0, VERBS_REP_MAGIC);
	put16(out + 4, VERBS_WIRE_VERSION);
	put16(out + 6, r->status);
	put16(out + 8, r->lid);
	memcpy(out + 12, r->gid, 16);
	put32(out + 28, r->qpn);
	put32(out + 32, r->psn);
	out[36] = r->mtu;
	out[37] = r->rd_atomic;
	put32(out + 40, r->rkey);
	put32(out + 44, r->err);
	put64(out + 48, r->base);
	put64(out + 56, r->size);
}

/* Magic, version and size, in that order, so that a message of another
 * version is reported as such even if its size changed. */
static int check_header(const uint8_t *p, size_t len, uint32_t magic, size_t size,
			uint16_t *version)
{
	if (len < 6)
		return -EMSGSIZE;
	if (get32(p) != magic)
		return -EBADMSG;
	uint16_t v = get16(p + 4);
	if (version)
		*version = v;
	if (v != VERBS_WIRE_VERSION)
		return -EPROTONOSUPPORT;
	if (len != size)
		return -EMSGSIZE;
	return 0;
}

static bool mtu_ok(unsigned mtu)
{
	return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096;
}

static bool qpn_ok(uint32_t qpn)
{
	return qpn >= VERBS_QPN_MIN && qpn <= VERBS_QPN_MAX;
}

int verbs_req_decode(const void *buf, size_t len, struct verbs_qp_req *r, uint16_t *version)
{
	const uint8_t *p = buf;
	int rc = check_header(p, len, VERBS_REQ_MAGIC, VERBS_REQ_BYTES, version);
	if (rc)
		return rc;
	r->from = get16(p + 6);
	r->worker = get16(p + 8);
	r->lid = get16(p + 10);
	memcpy(r->gid, p + 12, 16);
	r->qpn = get32(p + 28);
	r->psn = get32(p + 32);
	r->mtu = p[36];
	r->rd_atomic = p[37];
	if (r->from >= FAB_MAX_NODES || !qpn_ok(r->qpn) || r->psn > VERBS_PSN_MASK ||
	    !mtu_ok(r->mtu) || r->rd_atomic == 0)
		return -ERANGE;
	return 0;
}

int verbs_rep_decode(const void *buf, size_t len, struct verbs_qp_rep *r, uint16_t *version)
{
	const uint8_t *p = buf;
	int rc = check_header(p, len, VERBS_REP_MAGIC, VERBS_REP_BYTES, version);
	if (rc)
		return rc;
	r->status = get16(p + 6);
	r->lid = get16(p + 8);
	memcpy(r->gid, p + 12, 16);
	r->qpn = get32(p + 28);
	r->psn = get32(p + 32);
	r->mtu = p[36];
	r->rd_atomic = p[37];
	r->rkey = get32(p + 40);
	r->err = get32(p + 44);
	r->base = get64(p + 48);
	r->size = get64(p + 56);
	if (r->status >= VERBS_ST_COUNT)
		return -ERANGE;
	if (r->status != VERBS_ST_OK)
		return 0;
	if (!qpn_ok(r->qpn) || r->psn > VERBS_PSN_MASK || !mtu_ok(r->mtu) || r->rd_atomic == 0 ||
	    r->size == 0 || r->base + r->size < r->base)
		return -ERANGE;
	return 0;
}

const char *verbs_status_str(unsigned status)
{
	static const char *const names[VERBS_ST_COUNT] = {
		[VERBS_ST_OK] = "ok",
		[VERBS_ST_BADREQ] = "request rejected as malformed",
		[VERBS_ST_VERSION] = "bootstrap version not supported",
		[VERBS_ST_NOREGION] = "its region is not registered yet",
		[VERBS_ST_QP] = "it could not create or connect its queue pair",
		[VERBS_ST_LINK] = ("its port is on another link layer (InfiniBand vs RoCE) "
				   "or our address is missing"),
	};
	return status < VERBS_ST_COUNT ? names[status] : "unknown status";
}

/* ---- bounce ring ---- */

void verbs_ring_init(struct verbs_ring *r, uint64_t cap)
{
	r->cap = cap;
	r->head = 0;
	r->tail = 0;
}

int verbs_ring_alloc(struct verbs_ring *r, uint64_t bytes, uint64_t *off, uint64_t *consumed)
{
	if (bytes > r->cap)
		return -E2BIG;
	/* Empty: start again at offset 0, so that anything up to cap fits. */
	if (r->head == r->tail)
		r->head = r->tail = 0;
	uint64_t pos = r->head % r->cap;
	uint64_t skip = pos + bytes > r->cap ? r->cap - pos : 0;
	if (r->head - r->tail + skip + bytes > r->cap)
		return -ENOSPC;
	*off = skip ? 0 : pos;
	*consumed = skip + bytes;
	r->head += skip + bytes;
	return 0;
}

void verbs_ring_free(struct verbs_ring *r, uint64_t consumed)
{
	r->tail += consumed;
}

/* ---- bounce layout ---- */

uint64_t verbs_op_bounce(const struct fab_op *op)
{
	if (op->kind == FAB_READ || op->kind == FAB_WRITE)
		return ((uint64_t)op->len + 7) & ~(uint64_t)7;
	if (op->kind == FAB_RPC)
		return (VERBS_RPC_HDR + (uint64_t)op->len + 7) & ~(uint64_t)7;
	return 8;
}

uint64_t verbs_part_bounce(struct fab_op *const *ops, int n)
{
	uint64_t total = 0;
	for (int i = 0; i < n; i++)
		total += verbs_op_bounce(ops[i]);
	return total;
}

void verbs_bounce_fill(char *area, struct fab_op *const *ops, int n)
{
	for (int i = 0; i < n; i++) {
		const struct fab_op *op = ops[i];
		if (op->kind == FAB_WRITE)
			memcpy(area, op->buf, op->len);
		else if (op->kind == FAB_RPC && op->len)
			memcpy(area + VERBS_RPC_HDR, op->buf, op->len);
		area += verbs_op_bounce(op);
	}
}

void verbs_bounce_drain(const char *area, struct fab_op *const *ops, int n)
{
	for (int i = 0; i < n; i++) {
		struct fab_op *op = ops[i];
		if (op->kind == FAB_READ)
			memcpy(op->buf, area, op->len);
		else if ((op->kind == FAB_CAS || op->kind == FAB_FAA) && op->old)
			memcpy(op->old, area, 8);
		area += verbs_op_bounce(op);
	}
}

int verbs_plan_fences(struct fab_op *const *ops, int n, bool *fence)
{
	int count = 0;
	bool rpc_fenced = false;
	for (int i = 0; i < n; i++) {
		fence[i] = false;
		if (ops[i]->kind == FAB_READ)
			continue;
		if (ops[i]->kind == FAB_RPC) {
			for (int j = 0; j < i && !rpc_fenced; j++)
				if (ops[j]->kind != FAB_WRITE && ops[j]->kind != FAB_RPC) {
					fence[i] = rpc_fenced = true;
					count++;
				}
			rpc_fenced = true; /* later RPCs follow this one */
			continue;
		}
		uint64_t lo = ops[i]->off, hi = lo + ops[i]->len;
		for (int j = 0; j < i; j++) {
			if (ops[j]->kind == FAB_WRITE || ops[j]->kind == FAB_RPC)
				continue; /* a later op never overtakes a WRITE */
			uint64_t jlo = ops[j]->off, jhi = jlo + ops[j]->len;
			if (lo < jhi && jlo < hi) {
				fence[i] = true;
				count++;
				break;
			}
		}
	}
	return count;
}

/* ---- RPC messages ---- */

void verbs_call_encode(const struct verbs_call_hdr *h, uint8_t *out)
{
	memset(out, 0, VERBS_RPC_HDR);
	put32(out + 0, VERBS_CALL_MAGIC);
	put32(out + 4, h->tag);
	put16(out + 8, h->handler);
	put32(out + 12, h->cap);
}

void verbs_answer_encode(const struct verbs_answer_hdr *h, uint8_t *out)
{
	put32(out + 0, VERBS_ANSWER_MAGIC);
	put32(out + 4, h->tag);
	put32(out + 8, (uint32_t)h->status);
	put32(out + 12, h->len);
}

int verbs_call_decode(const void *buf, size_t len, struct verbs_call_hdr *h)
{
	const uint8_t *p = buf;
	if (len < VERBS_RPC_HDR || len - VERBS_RPC_HDR > FAB_RPC_MAX)
		return -EMSGSIZE;
	if (get32(p) != VERBS_CALL_MAGIC)
		return -EBADMSG;
	h->tag = get32(p + 4);
	h->handler = get16(p + 8);
	h->cap = get32(p + 12);
	h->len = (uint32_t)(len - VERBS_RPC_HDR);
	if (h->handler >= FAB_RPC_HANDLERS || h->cap > FAB_RPC_MAX)
		return -ERANGE;
	return 0;
}

int verbs_answer_decode(const void *buf, size_t len, struct verbs_answer_hdr *h)
{
	const uint8_t *p = buf;
	if (len < VERBS_RPC_HDR || len - VERBS_RPC_HDR > FAB_RPC_MAX)
		return -EMSGSIZE;
	if (get32(p) != VERBS_ANSWER_MAGIC)
		return -EBADMSG;
	h->tag = get32(p + 4);
	h->status = (int32_t)get32(p + 8);
	h->len = get32(p + 12);
	if (h->len != len - VERBS_RPC_HDR)
		return -EMSGSIZE;
	if (h->status < 0 && h->len)
		return -ERANGE;
	return 0;
}

/* ---- policies and parsers ---- */

static bool gid_zero(const union ibv_gid *g)
{
	static const uint8_t zero[16];
	return memcmp(g->raw, zero, 16) == 0;
}

static bool gid_ipv4_mapped(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	return memcmp(g->raw, prefix, 12) == 0;
}

int verbs_pick_gid(const struct ibv_gid_entry *e, int n)
{
	int v2 = -1, any = -1;
	for (int i = 0; i < n; i++) {
		if (gid_zero(&e[i].gid))
			continue;
		if (e[i].gid_type == IBV_GID_TYPE_ROCE_V2) {
			if (gid_ipv4_mapped(&e[i].gid))
				return i;
			if (v2 < 0)
				v2 = i;
		}
		if (any < 0)
			any = i;
	}
	return v2 >= 0 ? v2 : any;
}

int verbs_parse_index(const char *s, unsigned max, unsigned *out)
{
	if (!s || !*s)
		return -EINVAL;
	uint64_t v = 0;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > max)
			return -EINVAL;
	}
	*out = (unsigned)v;
	return 0;
}

int verbs_wc_errno(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_RETRY_EXC_ERR:     /* no ACK within timeout x retries: peer gone */
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return -EHOSTDOWN;
	default:
		return -EIO;
	}
}

unsigned verbs_mtu_bytes(unsigned mtu)
{
	return mtu_ok(mtu) ? 128u << mtu : 0; /* IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5 */
}
