/*
 * tatp.c: TATP (the Telecom Application Transaction Processing
 * benchmark, v1.0) as FORD runs it: --subscribers subscribers, chosen
 * uniformly, with the spec's seven transactions and mix.
 *
 * Rows, all of a subscriber under one hash tag, its 15-digit sub_nbr N
 * (s_id zero-padded), so a transaction stays on one node as TATP's
 * partitioning by s_id intends; fields are joined by '|':
 *   t:{N}:s             SUBSCRIBER: s_id | bit_1..bit_10 | hex_1..hex_10 |
 *                       byte2_1..byte2_10 | msc_location | vlr_location
 *                       (fields 1, 2-11, 12-21, 22-31, 32, 33)
 *   t:{N}:n             the sub_nbr -> s_id index: s_id
 *   t:{N}:ai:<type>     ACCESS_INFO (1-4 of types 1-4): data1|data2|data3|data4
 *   t:{N}:sf:<type>     SPECIAL_FACILITY (1-4 of types 1-4):
 *                       is_active|error_cntrl|data_a|data_b
 *   t:{N}:cf:<type>:<start>  CALL_FORWARDING (0-3 per facility, start 0, 8
 *                       or 16): end_time|numberx
 *
 * Transactions (percent) and replies; "found" outcomes follow the spec's
 * success rates (about 24% for GetNewDestination, 62.5% for
 * GetAccessData and UpdateSubscriberData, 31% for the call-forwarding
 * changes):
 *   GetSubscriberData      35  0
 *   GetNewDestination      10  0 (whether a forwarding matched or not)
 *   GetAccessData          35  0
 *   UpdateSubscriberData    2  0, or USERABORT without the facility
 *   UpdateLocation         14  0
 *   InsertCallForwarding    2  +1, or USERABORT (no facility, or the row
 *                              exists)
 *   DeleteCallForwarding    2  -1, or USERABORT (no such row)
 *
 * Consistency check: TATP defines none; its natural one here is that the
 * call-forwarding rows after the runs number those before plus the
 * committed inserts minus the committed deletes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/oltp.h"

enum { TA_GSD, TA_GND, TA_GAD, TA_USD, TA_UL, TA_ICF, TA_DCF, TA_NTYPES };

static const char *const ta_names[TA_NTYPES] = {
	"GetSubscriberData", "GetNewDestination", "GetAccessData", "UpdateSubscriberData",
	"UpdateLocation", "InsertCallForwarding", "DeleteCallForwarding",
};
static const int ta_mix[TA_NTYPES] = { 35, 10, 35, 2, 14, 2, 2 };
static const bool ta_delta[TA_NTYPES] = { false, false, false, false, false, true, true };

#define TA_SPLIT \
	"local function split(s)\n" \
	"  local t = {}\n" \
	"  for f in string.gmatch(s .. '|', '([^|]*)|') do t[#t + 1] = f end\n" \
	"  return t\n" \
	"end\n"

/* KEYS: subscriber. */
static const char ta_gsd[] =
	"local s = redis.call('GET', KEYS[1])\n"
	"if not s then return redis.error_reply('ERR tatp: no such subscriber') end\n"
	"return 0\n";

/* KEYS: facility, forwardings starting at 0, 8, 16. ARGV: start_time,
 * end_time. */
static const char ta_gnd[] =
	"local sf = redis.call('GET', KEYS[1])\n"
	"if not sf or string.sub(sf, 1, 2) ~= '1|' then return 0 end\n"
	"local st, et = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
	"local starts = {0, 8, 16}\n"
	"local found = 0\n"
	"for i = 1, 3 do\n"
	"  if starts[i] <= st then\n"
	"    local cf = redis.call('GET', KEYS[1 + i])\n"
	"    if cf and tonumber(string.match(cf, '^(%d+)|')) > et then found = found + 1 end\n"
	"  end\n"
	"end\n"
	"return 0\n";

/* KEYS: access info. */
static const char ta_gad[] =
	"redis.call('GET', KEYS[1])\n"
	"return 0\n";

/* KEYS: subscriber, facility. ARGV: bit_1, data_a. */
static const char ta_usd[] =
	TA_SPLIT
	"local sf = redis.call('GET', KEYS[2])\n"
	"if not sf then\n"
	"  return redis.error_reply('" BENCH_OLTP_USER_ABORT " tatp: no such special facility')\n"
	"end\n"
	"local s = redis.call('GET', KEYS[1])\n"
	"if not s then return redis.error_reply('ERR tatp: no such subscriber') end\n"
	"s = split(s)\n"
	"sf = split(sf)\n"
	"s[2] = ARGV[1]\n"
	"sf[3] = ARGV[2]\n"
	"redis.call('SET', KEYS[1], table.concat(s, '|'))\n"
	"redis.call('SET', KEYS[2], table.concat(sf, '|'))\n"
	"return 0\n";

/* KEYS: sub_nbr index, subscriber. ARGV: vlr_location. */
static const char ta_ul[] =
	TA_SPLIT
	"local id = redis.call('GET', KEYS[1])\n"
	"local s = redis.call('GET', KEYS[2])\n"
	"if not id or not s then return redis.error_reply('ERR tatp: no such subscriber') end\n"
	"s = split(s)\n"
	"s[33] = ARGV[1]\n"
	"redis.call('SET', KEYS[2], table.concat(s, '|'))\n"
	"return 0\n";

/* KEYS: sub_nbr index, facilities 1-4, the forwarding. ARGV: sf_type,
 * end_time, numberx. */
static const char ta_icf[] =
	"if not redis.call('GET', KEYS[1]) then\n"
	"  return redis.error_reply('ERR tatp: no such subscriber')\n"
	"end\n"
	"local types = {}\n"
	"for i = 1, 4 do types[i] = redis.call('GET', KEYS[1 + i]) end\n"
	"if not types[tonumber(ARGV[1])] then\n"
	"  return redis.error_reply('" BENCH_OLTP_USER_ABORT " tatp: no such special facility')\n"
	"end\n"
	"if redis.call('EXISTS', KEYS[6]) == 1 then\n"
	"  return redis.error_reply('" BENCH_OLTP_USER_ABORT " tatp: call forwarding exists')\n"
	"end\n"
	"redis.call('SET', KEYS[6], ARGV[2] .. '|' .. ARGV[3])\n"
	"return 1\n";

/* KEYS: sub_nbr index, the forwarding. */
static const char ta_dcf[] =
	"if not redis.call('GET', KEYS[1]) then\n"
	"  return redis.error_reply('ERR tatp: no such subscriber')\n"
	"end\n"
	"if redis.call('EXISTS', KEYS[2]) == 0 then\n"
	"  return redis.error_reply('" BENCH_OLTP_USER_ABORT " tatp: no such call forwarding')\n"
	"end\n"
	"redis.call('DEL', KEYS[2])\n"
	"return -1\n";

static const char *const ta_scripts[TA_NTYPES] = {
	ta_gsd, ta_gnd, ta_gad, ta_usd, ta_ul, ta_icf, ta_dcf,
};

struct ta_state {
	uint64_t subscribers;
};

static int ta_setup(void *stp, const struct bench_config *cfg, const struct rckv_map *map,
		    char *sig, size_t siglen, char *err, size_t errlen)
{
	struct ta_state *st = stp;
	(void)map;
	(void)err;
	(void)errlen;

	st->subscribers = cfg->subscribers;
	snprintf(sig, siglen, "tatp subscribers=%llu seed=%llu",
		 (unsigned long long)st->subscribers, (unsigned long long)cfg->seed);
	return 0;
}

/* A random choice of k of the four types, in *types (k is 1..4). */
static int four_types(struct bench_rng *r, int *types)
{
	int k = 1 + (int)bench_rng_below(r, 4), all[4] = { 1, 2, 3, 4 };

	for (int i = 0; i < k; i++) {
		int j = i + (int)bench_rng_below(r, (uint64_t)(4 - i));
		int x = all[i];
		all[i] = all[j];
		all[j] = x;
		types[i] = all[i];
	}
	return k;
}

static void rand_upper(struct bench_rng *r, char *buf, int n)
{
	for (int i = 0; i < n; i++)
		buf[i] = (char)('A' + bench_rng_below(r, 26));
	buf[n] = '\0';
}

static int ta_load_one(struct bench_oltp_loader *l, uint64_t seed, unsigned long long s)
{
	struct bench_rng r;
	char v[512], a[8], b[8];
	int types[4], n, at;

	bench_rng_seed(&r, seed, 0x7a7000000ull + s);
	at = snprintf(v, sizeof(v), "%llu", s);
	for (int i = 0; i < 10; i++)
		at += snprintf(v + at, sizeof(v) - (size_t)at, "|%d", (int)bench_rng_below(&r, 2));
	for (int i = 0; i < 10; i++)
		at += snprintf(v + at, sizeof(v) - (size_t)at, "|%d", (int)bench_rng_below(&r, 16));
	for (int i = 0; i < 10; i++)
		at += snprintf(v + at, sizeof(v) - (size_t)at, "|%d", (int)bench_rng_below(&r, 256));
	unsigned long long msc = bench_rng_next(&r) >> 32, vlr = bench_rng_next(&r) >> 32;
	snprintf(v + at, sizeof(v) - (size_t)at, "|%llu|%llu", msc, vlr);
	if (bench_oltp_putf(l, v, "t:{%015llu}:s", s))
		return -1;
	snprintf(v, sizeof(v), "%llu", s);
	if (bench_oltp_putf(l, v, "t:{%015llu}:n", s))
		return -1;
	n = four_types(&r, types);
	for (int i = 0; i < n; i++) {
		rand_upper(&r, a, 3);
		rand_upper(&r, b, 5);
		snprintf(v, sizeof(v), "%d|%d|%s|%s", (int)bench_rng_below(&r, 256),
			 (int)bench_rng_below(&r, 256), a, b);
		if (bench_oltp_putf(l, v, "t:{%015llu}:ai:%d", s, types[i]))
			return -1;
	}
	n = four_types(&r, types);
	for (int i = 0; i < n; i++) {
		rand_upper(&r, b, 5);
		snprintf(v, sizeof(v), "%d|%d|%d|%s", bench_rng_below(&r, 100) < 85 ? 1 : 0,
			 (int)bench_rng_below(&r, 256), (int)bench_rng_below(&r, 256), b);
		if (bench_oltp_putf(l, v, "t:{%015llu}:sf:%d", s, types[i]))
			return -1;
		/* 0-3 forwardings, at distinct starts among 0, 8, 16 */
		int nstart = (int)bench_rng_below(&r, 4), first = (int)bench_rng_below(&r, 3);
		for (int k = 0; k < nstart; k++) {
			int start = 8 * ((first + k) % 3);
			snprintf(v, sizeof(v), "%d|%015llu", start + 1 + (int)bench_rng_below(&r, 8),
				 (unsigned long long)bench_rng_below(&r, 1000000000000000ull));
			if (bench_oltp_putf(l, v, "t:{%015llu}:cf:%d:%d", s, types[i], start))
				return -1;
		}
	}
	return 0;
}

static int ta_load(void *stp, const struct bench_config *cfg, struct bench_oltp_loader *l,
		   char *err, size_t errlen)
{
	const struct ta_state *st = stp;
	(void)err;
	(void)errlen;

	for (unsigned long long s = 1; s <= st->subscribers; s++)
		if (ta_load_one(l, cfg->seed, s))
			return -1;
	return 0;
}

static void ta_next(const void *stp, const struct bench_config *cfg, struct bench_rng *rng,
		    long now, struct bench_oltp_call *call)
{
	const struct ta_state *st = stp;
	unsigned long long s = 1 + bench_rng_below(rng, st->subscribers);
	int type = 1 + (int)bench_rng_below(rng, 4), start = 8 * (int)bench_rng_below(rng, 3);
	(void)cfg;
	(void)now;

	switch (call->type) {
	case TA_GSD:
		bench_oltp_key(call, "t:{%015llu}:s", s);
		break;
	case TA_GND:
		bench_oltp_key(call, "t:{%015llu}:sf:%d", s, type);
		for (int k = 0; k < 3; k++)
			bench_oltp_key(call, "t:{%015llu}:cf:%d:%d", s, type, 8 * k);
		bench_oltp_arg(call, "%d", start);
		bench_oltp_arg(call, "%d", 1 + (int)bench_rng_below(rng, 24));
		break;
	case TA_GAD:
		bench_oltp_key(call, "t:{%015llu}:ai:%d", s, type);
		break;
	case TA_USD:
		bench_oltp_key(call, "t:{%015llu}:s", s);
		bench_oltp_key(call, "t:{%015llu}:sf:%d", s, type);
		bench_oltp_arg(call, "%d", (int)bench_rng_below(rng, 2));
		bench_oltp_arg(call, "%d", (int)bench_rng_below(rng, 256));
		break;
	case TA_UL:
		bench_oltp_key(call, "t:{%015llu}:n", s);
		bench_oltp_key(call, "t:{%015llu}:s", s);
		bench_oltp_arg(call, "%llu", (unsigned long long)(bench_rng_next(rng) >> 32));
		break;
	case TA_ICF:
		bench_oltp_key(call, "t:{%015llu}:n", s);
		for (int k = 1; k <= 4; k++)
			bench_oltp_key(call, "t:{%015llu}:sf:%d", s, k);
		bench_oltp_key(call, "t:{%015llu}:cf:%d:%d", s, type, start);
		bench_oltp_arg(call, "%d", type);
		bench_oltp_arg(call, "%d", start + 1 + (int)bench_rng_below(rng, 8));
		bench_oltp_arg(call, "%015llu",
			       (unsigned long long)bench_rng_below(rng, 1000000000000000ull));
		break;
	case TA_DCF:
		bench_oltp_key(call, "t:{%015llu}:n", s);
		bench_oltp_key(call, "t:{%015llu}:cf:%d:%d", s, type, start);
		break;
	}
}

/* Subscriber 1 + i / 12's call-forwarding row of type 1 + (i % 12) / 3
 * starting at 8 * (i % 3). */
static void ta_cf_key(const void *st, size_t i, char *buf, size_t cap)
{
	(void)st;
	snprintf(buf, cap, "t:{%015llu}:cf:%d:%d", (unsigned long long)(1 + i / 12),
		 1 + (int)(i % 12) / 3, 8 * (int)(i % 3));
}

/* The call-forwarding rows: every possible key, read with MGET. */
static int ta_count(const struct ta_state *st, redisContext *c, int64_t *count, char *err,
		    size_t errlen)
{
	struct bench_oltp_read rd;
	if (bench_oltp_read_named(c, (size_t)st->subscribers * 12, ta_cf_key, st, &rd, err,
				  errlen))
		return -1;
	*count = 0;
	for (size_t i = 0; i < rd.n; i++)
		*count += rd.vals[i] != NULL;
	bench_oltp_read_free(&rd);
	return 0;
}

static int ta_check_begin(void *stp, const struct bench_config *cfg, redisContext *c,
			  int64_t *base, char *err, size_t errlen)
{
	(void)cfg;
	return ta_count(stp, c, base, err, errlen);
}

static int ta_check_end(void *stp, const struct bench_config *cfg, redisContext *c,
			int64_t base, int64_t delta, FILE *out, char *err, size_t errlen)
{
	int64_t after;
	(void)cfg;

	if (ta_count(stp, c, &after, err, errlen))
		return -1;
	fprintf(out, "tatp: %lld call-forwarding rows before, %lld after; committed inserts "
		     "minus deletes: %lld%s\n",
		(long long)base, (long long)after, (long long)delta,
		after == base + delta ? "" : ": ROWS CREATED OR LOST");
	return after == base + delta ? 0 : 1;
}

const struct bench_oltp_ops bench_tatp = {
	.name = "tatp",
	.ntypes = TA_NTYPES,
	.type_names = ta_names,
	.mix = ta_mix,
	.scripts = ta_scripts,
	.delta_counts = ta_delta,
	.state_size = sizeof(struct ta_state),
	.setup = ta_setup,
	.load = ta_load,
	.next = ta_next,
	.check_desc = "the call-forwarding rows against the committed inserts and deletes",
	.check_begin = ta_check_begin,
	.check_end = ta_check_end,
};
