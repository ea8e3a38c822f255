/*
 * smallbank.c: SmallBank (Alomari et al., ICDE 2008) as RCC and FORD run
 * it: --accounts customers, each with a savings and a checking balance;
 * with probability --hot-pct percent a transaction's accounts come from
 * the first --hot-accounts (the papers: 90% on 4% of the accounts), else
 * from all, uniformly; two accounts of one transaction are distinct.
 *
 * Rows (integers, whole units):
 *   {a<id>}:s   savings balance
 *   {a<id>}:c   checking balance
 * The hash tag keeps a customer's two rows on one node; customers spread
 * over the nodes by CRC16, so a two-customer transaction is usually
 * cross-node. Balances load as 10000..49999 (FaSST's range), drawn from
 * --seed and the account id.
 *
 * Transactions, mix of FORD and RCC (percent), and their replies:
 *   Amalgamate        15  both of a's balances move to b's checking; 0
 *   Balance           15  reads a's two balances; 0
 *   DepositChecking   15  a's checking += amount; +amount
 *   SendPayment       25  a's checking -= amount, b's += amount; 0, or
 *                         USERABORT when a's checking is short
 *   TransactSavings   15  a's savings += amount; +amount
 *   WriteCheck        15  a's checking -= amount, and 1 more when the two
 *                         balances together are short; -(what it took)
 * Amounts are 1..100. Every check that can abort runs before the first
 * write (oltp.h).
 *
 * Consistency check: the sum of all balances after the runs equals the
 * sum before plus the replies of the committed transactions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/oltp.h"

#define SB_MIN_BALANCE 10000
#define SB_MAX_BALANCE 50000
#define SB_MAX_AMOUNT 100

enum { SB_AMALGAMATE, SB_BALANCE, SB_DEPOSIT, SB_SEND, SB_TRANSACT, SB_WRITE_CHECK, SB_NTYPES };

static const char *const sb_names[SB_NTYPES] = {
	"Amalgamate", "Balance", "DepositChecking", "SendPayment", "TransactSavings", "WriteCheck",
};
static const int sb_mix[SB_NTYPES] = { 15, 15, 15, 25, 15, 15 };
static const bool sb_delta[SB_NTYPES] = { true, true, true, true, true, true };

/* KEYS: a's savings, a's checking, b's checking. */
static const char sb_amalgamate[] =
	"local s0 = tonumber(redis.call('GET', KEYS[1]))\n"
	"local c0 = tonumber(redis.call('GET', KEYS[2]))\n"
	"local c1 = tonumber(redis.call('GET', KEYS[3]))\n"
	"if not s0 or not c0 or not c1 then\n"
	"  return redis.error_reply('ERR smallbank: no such account')\n"
	"end\n"
	"redis.call('SET', KEYS[1], 0)\n"
	"redis.call('SET', KEYS[2], 0)\n"
	"redis.call('INCRBY', KEYS[3], s0 + c0)\n"
	"return 0\n";

/* KEYS: a's savings, a's checking. */
static const char sb_balance[] =
	"local s = tonumber(redis.call('GET', KEYS[1]))\n"
	"local c = tonumber(redis.call('GET', KEYS[2]))\n"
	"if not s or not c then\n"
	"  return redis.error_reply('ERR smallbank: no such account')\n"
	"end\n"
	"return 0\n";

/* KEYS: a's checking. ARGV: amount. */
static const char sb_deposit[] =
	"local amount = tonumber(ARGV[1])\n"
	"if not tonumber(redis.call('GET', KEYS[1])) then\n"
	"  return redis.error_reply('ERR smallbank: no such account')\n"
	"end\n"
	"redis.call('INCRBY', KEYS[1], amount)\n"
	"return amount\n";

/* KEYS: a's checking, b's checking. ARGV: amount. */
static const char sb_send[] =
	"local amount = tonumber(ARGV[1])\n"
	"local c0 = tonumber(redis.call('GET', KEYS[1]))\n"
	"local c1 = tonumber(redis.call('GET', KEYS[2]))\n"
	"if not c0 or not c1 then\n"
	"  return redis.error_reply('ERR smallbank: no such account')\n"
	"end\n"
	"if c0 < amount then\n"
	"  return redis.error_reply('" BENCH_OLTP_USER_ABORT " smallbank: insufficient funds')\n"
	"end\n"
	"redis.call('DECRBY', KEYS[1], amount)\n"
	"redis.call('INCRBY', KEYS[2], amount)\n"
	"return 0\n";

/* KEYS: a's savings. ARGV: amount. */
static const char sb_transact[] =
	"local amount = tonumber(ARGV[1])\n"
	"if not tonumber(redis.call('GET', KEYS[1])) then\n"
	"  return redis.error_reply('ERR smallbank: no such account')\n"
	"end\n"
	"redis.call('INCRBY', KEYS[1], amount)\n"
	"return amount\n";

/* KEYS: a's savings, a's checking. ARGV: amount. */
static const char sb_write_check[] =
	"local amount = tonumber(ARGV[1])\n"
	"local s = tonumber(redis.call('GET', KEYS[1]))\n"
	"local c = tonumber(redis.call('GET', KEYS[2]))\n"
	"if not s or not c then\n"
	"  return redis.error_reply('ERR smallbank: no such account')\n"
	"end\n"
	"if s + c < amount then\n"
	"  amount = amount + 1\n"
	"end\n"
	"redis.call('DECRBY', KEYS[2], amount)\n"
	"return -amount\n";

static const char *const sb_scripts[SB_NTYPES] = {
	sb_amalgamate, sb_balance, sb_deposit, sb_send, sb_transact, sb_write_check,
};

struct sb_state {
	uint64_t accounts, hot;
	double hot_share;
};

static int sb_setup(void *stp, const struct bench_config *cfg, const struct rckv_map *map,
		    char *sig, size_t siglen, char *err, size_t errlen)
{
	struct sb_state *st = stp;
	(void)map;

	st->accounts = cfg->accounts;
	st->hot = cfg->hot_accounts ? cfg->hot_accounts : (cfg->accounts * 4 + 99) / 100;
	if (st->hot > st->accounts)
		st->hot = st->accounts;
	st->hot_share = cfg->hot_pct / 100.0;
	if (st->accounts < 2) {
		snprintf(err, errlen, "smallbank needs 2 accounts or more");
		return -1;
	}
	snprintf(sig, siglen, "smallbank accounts=%llu seed=%llu",
		 (unsigned long long)st->accounts, (unsigned long long)cfg->seed);
	return 0;
}

static uint64_t sb_balance_of(uint64_t seed, uint64_t id, int which)
{
	uint64_t x = bench_mix64(seed ^ bench_mix64(id * 2 + (uint64_t)which + 0x5b));
	return SB_MIN_BALANCE + x % (SB_MAX_BALANCE - SB_MIN_BALANCE);
}

static int sb_load(void *stp, const struct bench_config *cfg, struct bench_oltp_loader *l,
		   char *err, size_t errlen)
{
	const struct sb_state *st = stp;
	char v[24];
	(void)err;
	(void)errlen;

	for (uint64_t id = 0; id < st->accounts; id++) {
		snprintf(v, sizeof(v), "%llu", (unsigned long long)sb_balance_of(cfg->seed, id, 0));
		if (bench_oltp_putf(l, v, "{a%llu}:s", (unsigned long long)id))
			return -1;
		snprintf(v, sizeof(v), "%llu", (unsigned long long)sb_balance_of(cfg->seed, id, 1));
		if (bench_oltp_putf(l, v, "{a%llu}:c", (unsigned long long)id))
			return -1;
	}
	return 0;
}

static uint64_t sb_account(const struct sb_state *st, struct bench_rng *rng)
{
	if (st->hot && bench_rng_double(rng) < st->hot_share)
		return bench_rng_below(rng, st->hot);
	return bench_rng_below(rng, st->accounts);
}

static void sb_next(const void *stp, const struct bench_config *cfg, struct bench_rng *rng,
		    long now, struct bench_oltp_call *call)
{
	const struct sb_state *st = stp;
	unsigned long long a = sb_account(st, rng), b = a;
	int amount = 1 + (int)bench_rng_below(rng, SB_MAX_AMOUNT);
	(void)cfg;
	(void)now;

	if (call->type == SB_AMALGAMATE || call->type == SB_SEND) {
		/* a hot set of one account cannot give two: draw from all */
		while (b == a)
			b = st->hot >= 2 ? sb_account(st, rng) : bench_rng_below(rng, st->accounts);
	}
	switch (call->type) {
	case SB_AMALGAMATE:
		bench_oltp_key(call, "{a%llu}:s", a);
		bench_oltp_key(call, "{a%llu}:c", a);
		bench_oltp_key(call, "{a%llu}:c", b);
		break;
	case SB_BALANCE:
		bench_oltp_key(call, "{a%llu}:s", a);
		bench_oltp_key(call, "{a%llu}:c", a);
		break;
	case SB_DEPOSIT:
		bench_oltp_key(call, "{a%llu}:c", a);
		bench_oltp_arg(call, "%d", amount);
		break;
	case SB_SEND:
		bench_oltp_key(call, "{a%llu}:c", a);
		bench_oltp_key(call, "{a%llu}:c", b);
		bench_oltp_arg(call, "%d", amount);
		break;
	case SB_TRANSACT:
		bench_oltp_key(call, "{a%llu}:s", a);
		bench_oltp_arg(call, "%d", amount);
		break;
	case SB_WRITE_CHECK:
		bench_oltp_key(call, "{a%llu}:s", a);
		bench_oltp_key(call, "{a%llu}:c", a);
		bench_oltp_arg(call, "%d", amount);
		break;
	}
}

/* Account i / 2's savings (even i) or checking (odd i) key. */
static void sb_balance_key(const void *st, size_t i, char *buf, size_t cap)
{
	(void)st;
	snprintf(buf, cap, "{a%llu}:%c", (unsigned long long)(i / 2), i % 2 ? 'c' : 's');
}

/* The sum of every balance. */
static int sb_total(const struct sb_state *st, redisContext *c, int64_t *total, char *err,
		    size_t errlen)
{
	struct bench_oltp_read rd;
	if (bench_oltp_read_named(c, (size_t)st->accounts * 2, sb_balance_key, st, &rd, err,
				  errlen))
		return -1;
	int rc = 0;
	*total = 0;
	for (size_t i = 0; i < rd.n && rc == 0; i++) {
		char *end;
		if (!rd.vals[i]) {
			snprintf(err, errlen, "%s is missing (load again with --load always)",
				 rd.keys[i]);
			rc = -1;
			break;
		}
		long long v = strtoll(rd.vals[i], &end, 10);
		if (*end || end == rd.vals[i]) {
			snprintf(err, errlen, "%s holds '%s', not a balance", rd.keys[i], rd.vals[i]);
			rc = -1;
		}
		*total += v;
	}
	bench_oltp_read_free(&rd);
	return rc;
}

static int sb_check_begin(void *stp, const struct bench_config *cfg, redisContext *c,
			  int64_t *base, char *err, size_t errlen)
{
	(void)cfg;
	return sb_total(stp, c, base, err, errlen);
}

static int sb_check_end(void *stp, const struct bench_config *cfg, redisContext *c,
			int64_t base, int64_t delta, FILE *out, char *err, size_t errlen)
{
	int64_t after;
	(void)cfg;

	if (sb_total(stp, c, &after, err, errlen))
		return -1;
	fprintf(out, "smallbank: the balances held %lld before and %lld after; the committed "
		     "transactions added %lld%s\n",
		(long long)base, (long long)after, (long long)delta,
		after == base + delta ? "" : ": MONEY CREATED OR LOST");
	return after == base + delta ? 0 : 1;
}

const struct bench_oltp_ops bench_smallbank = {
	.name = "smallbank",
	.ntypes = SB_NTYPES,
	.type_names = sb_names,
	.mix = sb_mix,
	.scripts = sb_scripts,
	.delta_counts = sb_delta,
	.state_size = sizeof(struct sb_state),
	.setup = sb_setup,
	.load = sb_load,
	.next = sb_next,
	.check_desc = "the sum of all balances against the committed deltas",
	.check_begin = sb_check_begin,
	.check_end = sb_check_end,
};
