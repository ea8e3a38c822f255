/*
 * tpcc.c: TPC-C (v5.11) as RCC, FORD and RCBench run it: --warehouses W,
 * the five transactions with the standard mix (NewOrder 45, Payment 43,
 * OrderStatus 4, Delivery 4, StockLevel 4), scaled down by options:
 * --items items (TPC-C: 100,000) and --customers customers per district
 * (TPC-C: 3,000), with as many initial orders per district, the last 30%
 * of them undelivered (TPC-C: 900 of 3,000). Districts stay 10 per
 * warehouse. NURand's A constants shrink with the ranges they draw from
 * (8191 for 100,000 items becomes the largest 2^k - 1 within the same
 * proportion), so the skew keeps its shape.
 *
 * Placement: every row of warehouse w carries its hash tag T = {w<w>}
 * (or {w<w>.<k>} when needed: the first tag whose slot the slot map gives
 * to node (w - 1) mod nodes), so warehouses spread over the nodes and a
 * remote warehouse is a remote node, as TPC-C's remote accesses intend:
 * 1% of NewOrder's lines come from another warehouse's stock, 15% of
 * Payments pay a customer of another warehouse. ITEM is read-only and
 * replicated per warehouse (T:i:<i>), as distributed TPC-C
 * implementations do, so that only those remote accesses leave the node.
 *
 * Rows are Redis strings, fields joined by '|' in the order below (the
 * scripts index them from 1). Money is in cents and rates in 1/10000, as
 * integers, so the sums of the checks are exact:
 *   T:w            WAREHOUSE: name|street_1|street_2|city|state|zip|tax|ytd
 *   T:d:<d>        DISTRICT: name|street_1|street_2|city|state|zip|tax|ytd|next_o_id
 *   T:c:<d>:<c>    CUSTOMER: first|middle|last|street_1|street_2|city|state|zip|
 *                  phone|since|credit|credit_lim|discount|balance|ytd_payment|
 *                  payment_cnt|delivery_cnt|data                  (fields 1-18)
 *   T:cn:<d>:<last> customers with that last name, c_ids by c_first, joined by ','
 *   T:co:<d>:<c>   the customer's last order id (for OrderStatus)
 *   T:h:<id>       HISTORY: c_id|c_d_id|c_w_id|d_id|w_id|date|amount|data
 *                  (<id>: 0:<d>:<c> at load, a random 64-bit hex number later)
 *   T:o:<d>:<o>    ORDER: c_id|entry_d|carrier_id|ol_cnt|all_local (carrier 0: null)
 *   T:no:<d>:<o>   NEW-ORDER: "1"
 *   T:dn:<d>       the oldest undelivered order id of the district (Delivery's
 *                  cursor: strings have no order to ask for the minimum)
 *   T:ol:<d>:<o>:<n> ORDER-LINE: i_id|supply_w_id|delivery_d|quantity|amount|dist_info
 *   T:i:<i>        ITEM: im_id|name|price|data
 *   T:s:<i>        STOCK: quantity|dist_01..dist_10|ytd|order_cnt|remote_cnt|data
 *                  (fields 1, 2-11, 12, 13, 14, 15)
 * Dates are Unix seconds from the client.
 *
 * Transactions and their KEYS (what the client knows before it runs);
 * the rest is reached undeclared (rckv: another fetch round):
 *   NewOrder     warehouse, district, customer, each line's item and
 *                stock; writes the order, new-order, order lines and the
 *                customer's last order at the district's next_o_id.
 *                1% name an unused item last and roll back (USERABORT)
 *                before any write. Replies the total amount.
 *   Payment      warehouse, district, the customer (by id, 40%) or the
 *                last-name row (60%; the customer in the middle of the
 *                list is then undeclared), the new history row. Replies
 *                the amount paid.
 *   OrderStatus  the customer (or last-name row) and its last order id;
 *                reads the order and its lines. Replies 0.
 *   Delivery     the ten districts' cursors; delivers the oldest new order
 *                of each (one transaction for the ten, as most
 *                implementations run it). Replies the orders delivered.
 *   StockLevel   the district; reads the last 20 orders' lines and their
 *                stock. Replies the count under the threshold.
 *
 * Consistency check, TPC-C 3.3.2 conditions 1-5, for every warehouse and
 * district, over the database after the runs:
 *   1. W_YTD = sum of D_YTD;
 *   2. D_NEXT_O_ID - 1 = max O_ID = max NO_O_ID;
 *   3. max NO_O_ID - min NO_O_ID + 1 = the number of NEW-ORDER rows;
 *   4. sum of O_OL_CNT = the number of ORDER-LINE rows;
 *   5. O_CARRIER_ID is null iff the order has a NEW-ORDER row;
 * what the layout adds: the NEW-ORDER rows are exactly the orders from
 * Delivery's cursor to D_NEXT_O_ID - 1 (this catches a lost new-order row
 * after Delivery has emptied the initial ones, which 2 and 3 cannot);
 * and, from the replies, the sum of W_YTD grew by the committed Payments.
 * Orders are found by reading every id up to past D_NEXT_O_ID.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/oltp.h"

enum { TP_NEW_ORDER, TP_PAYMENT, TP_ORDER_STATUS, TP_DELIVERY, TP_STOCK_LEVEL, TP_NTYPES };

static const char *const tp_names[TP_NTYPES] = {
	"NewOrder", "Payment", "OrderStatus", "Delivery", "StockLevel",
};
static const int tp_mix[TP_NTYPES] = { 45, 43, 4, 4, 4 };
static const bool tp_delta[TP_NTYPES] = { false, true, false, false, false };

#define TP_DISTRICTS 10
#define TP_MAX_WAREHOUSES 1000
#define TP_MAX_LINES 15
#define TP_PROBE 64 /* order ids read past D_NEXT_O_ID by the check */

/* Lua: split a row into its fields. */
#define TP_SPLIT \
	"local function split(s)\n" \
	"  local t = {}\n" \
	"  for f in string.gmatch(s .. '|', '([^|]*)|') do t[#t + 1] = f end\n" \
	"  return t\n" \
	"end\n"

/* Lua: the customer in the middle of a last-name row (TPC-C 2.5.2.2:
 * position ceil(n / 2) of the list sorted by first name). */
#define TP_BY_NAME \
	"local function by_name(ids)\n" \
	"  local list = {}\n" \
	"  for id in string.gmatch(ids, '[^,]+') do list[#list + 1] = id end\n" \
	"  return list[math.floor((#list + 1) / 2)]\n" \
	"end\n"

/* KEYS: warehouse, district, customer, items 1..n, stocks 1..n.
 * ARGV: tag, w_id, d_id, c_id, ol_cnt, date, all_local, then per line
 * i_id, supply_w_id, quantity. */
static const char tp_new_order[] =
	TP_SPLIT
	"local tag, w_id, d_id, c_id = ARGV[1], ARGV[2], ARGV[3], ARGV[4]\n"
	"local n = tonumber(ARGV[5])\n"
	"local wv = redis.call('GET', KEYS[1])\n"
	"local dv = redis.call('GET', KEYS[2])\n"
	"local cv = redis.call('GET', KEYS[3])\n"
	"if not wv or not dv or not cv then\n"
	"  return redis.error_reply('ERR tpcc: no such warehouse, district or customer')\n"
	"end\n"
	"local items, stocks = {}, {}\n"
	"for i = 1, n do\n"
	"  local iv = redis.call('GET', KEYS[3 + i])\n"
	"  if not iv then\n"
	"    return redis.error_reply('" BENCH_OLTP_USER_ABORT " tpcc: item number is not valid')\n"
	"  end\n"
	"  items[i] = split(iv)\n"
	"end\n"
	"for i = 1, n do\n"
	"  local sv = redis.call('GET', KEYS[3 + n + i])\n"
	"  if not sv then return redis.error_reply('ERR tpcc: no such stock') end\n"
	"  stocks[i] = split(sv)\n"
	"end\n"
	"local w, d, c = split(wv), split(dv), split(cv)\n"
	"local o_id = tonumber(d[9])\n"
	"d[9] = o_id + 1\n"
	"local od = d_id .. ':' .. o_id\n"
	"-- every write in one MSET: the order's rows are not declared, and\n"
	"-- one command reaches them in one round\n"
	"local out = {KEYS[2], table.concat(d, '|'),\n"
	"  tag .. ':o:' .. od, table.concat({c_id, ARGV[6], 0, n, ARGV[7]}, '|'),\n"
	"  tag .. ':no:' .. od, 1,\n"
	"  tag .. ':co:' .. d_id .. ':' .. c_id, o_id}\n"
	"local total = 0\n"
	"for i = 1, n do\n"
	"  local a = 5 + 3 * i\n"
	"  local sw, qty = ARGV[a + 1], tonumber(ARGV[a + 2])\n"
	"  local s = stocks[i]\n"
	"  local q = tonumber(s[1])\n"
	"  if q >= qty + 10 then q = q - qty else q = q - qty + 91 end\n"
	"  s[1] = q\n"
	"  s[12] = s[12] + qty\n"
	"  s[13] = s[13] + 1\n"
	"  if sw ~= w_id then s[14] = s[14] + 1 end\n"
	"  local amount = qty * tonumber(items[i][3])\n"
	"  total = total + amount\n"
	"  out[#out + 1] = KEYS[3 + n + i]\n"
	"  out[#out + 1] = table.concat(s, '|')\n"
	"  out[#out + 1] = tag .. ':ol:' .. od .. ':' .. i\n"
	"  out[#out + 1] = table.concat({ARGV[a], sw, 0, qty, amount, s[1 + tonumber(d_id)]}, '|')\n"
	"end\n"
	"redis.call('MSET', unpack(out))\n"
	"return math.floor(total * (10000 - c[13]) * (10000 + w[7] + d[7]) / 100000000)\n";

/* KEYS: warehouse, district, customer or last-name row, history row.
 * ARGV: the customer's tag, w_id, d_id, c_w_id, c_d_id, by_name (1/0),
 * amount, date, c_id (by id). */
static const char tp_payment[] =
	TP_SPLIT
	TP_BY_NAME
	"local c_tag, w_id, d_id, c_w, c_d = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]\n"
	"local amount = tonumber(ARGV[7])\n"
	"local wv = redis.call('GET', KEYS[1])\n"
	"local dv = redis.call('GET', KEYS[2])\n"
	"local ckey, c_id = KEYS[3], ARGV[9]\n"
	"if ARGV[6] == '1' then\n"
	"  local ids = redis.call('GET', KEYS[3])\n"
	"  if not ids then return redis.error_reply('ERR tpcc: no customer of that name') end\n"
	"  c_id = by_name(ids)\n"
	"  ckey = c_tag .. ':c:' .. c_d .. ':' .. c_id\n"
	"end\n"
	"local cv = redis.call('GET', ckey)\n"
	"if not wv or not dv or not cv then\n"
	"  return redis.error_reply('ERR tpcc: no such warehouse, district or customer')\n"
	"end\n"
	"local w, d, c = split(wv), split(dv), split(cv)\n"
	"w[8] = w[8] + amount\n"
	"redis.call('SET', KEYS[1], table.concat(w, '|'))\n"
	"d[8] = d[8] + amount\n"
	"redis.call('SET', KEYS[2], table.concat(d, '|'))\n"
	"c[14] = c[14] - amount\n"
	"c[15] = c[15] + amount\n"
	"c[16] = c[16] + 1\n"
	"if c[11] == 'BC' then\n"
	"  local info = c_id .. ' ' .. c_d .. ' ' .. c_w .. ' ' .. d_id .. ' ' .. w_id .. ' ' .. amount\n"
	"  c[18] = string.sub(info .. ' ' .. c[18], 1, 500)\n"
	"end\n"
	"redis.call('SET', ckey, table.concat(c, '|'))\n"
	"redis.call('SET', KEYS[4],\n"
	"  table.concat({c_id, c_d, c_w, d_id, w_id, ARGV[8], amount, w[1] .. '    ' .. d[1]}, '|'))\n"
	"return amount\n";

/* KEYS: customer or last-name row, then (by id) its last order id.
 * ARGV: tag, d_id, by_name, c_id (by id). */
static const char tp_order_status[] =
	TP_SPLIT
	TP_BY_NAME
	"local tag, d_id = ARGV[1], ARGV[2]\n"
	"local ckey, c_id = KEYS[1], ARGV[4]\n"
	"if ARGV[3] == '1' then\n"
	"  local ids = redis.call('GET', KEYS[1])\n"
	"  if not ids then return redis.error_reply('ERR tpcc: no customer of that name') end\n"
	"  c_id = by_name(ids)\n"
	"  ckey = tag .. ':c:' .. d_id .. ':' .. c_id\n"
	"end\n"
	"if not redis.call('GET', ckey) then\n"
	"  return redis.error_reply('ERR tpcc: no such customer')\n"
	"end\n"
	"local o_id = redis.call('GET', tag .. ':co:' .. d_id .. ':' .. c_id)\n"
	"if not o_id then return 0 end\n"
	"local ov = redis.call('GET', tag .. ':o:' .. d_id .. ':' .. o_id)\n"
	"if not ov then return redis.error_reply('ERR tpcc: no such order') end\n"
	"local keys = {}\n"
	"for n = 1, tonumber(split(ov)[4]) do\n"
	"  keys[n] = tag .. ':ol:' .. d_id .. ':' .. o_id .. ':' .. n\n"
	"end\n"
	"redis.call('MGET', unpack(keys))\n"
	"return 0\n";

/* KEYS: the cursors of districts 1..10. ARGV: tag, carrier_id, date.
 * Every read comes before the first write, each kind of row in one MGET
 * (the rows are undeclared: one round each), the writes in one DEL and
 * one MSET. */
static const char tp_delivery[] =
	TP_SPLIT
	"local tag, carrier, now = ARGV[1], ARGV[2], ARGV[3]\n"
	"local cur, nok = {}, {}\n"
	"for d = 1, 10 do\n"
	"  cur[d] = tonumber(redis.call('GET', KEYS[d]))\n"
	"  if not cur[d] then return redis.error_reply('ERR tpcc: no delivery cursor') end\n"
	"  nok[d] = tag .. ':no:' .. d .. ':' .. cur[d]\n"
	"end\n"
	"local nos = redis.call('MGET', unpack(nok))\n"
	"local ds, okeys = {}, {}\n"
	"for d = 1, 10 do\n"
	"  if nos[d] then\n"
	"    ds[#ds + 1] = d\n"
	"    okeys[#okeys + 1] = tag .. ':o:' .. d .. ':' .. cur[d]\n"
	"  end\n"
	"end\n"
	"if #ds == 0 then return 0 end\n"
	"local orders = redis.call('MGET', unpack(okeys))\n"
	"local os, lkeys, ckeys = {}, {}, {}\n"
	"for k = 1, #ds do\n"
	"  if not orders[k] then return redis.error_reply('ERR tpcc: no such order') end\n"
	"  os[k] = split(orders[k])\n"
	"  for n = 1, tonumber(os[k][4]) do\n"
	"    lkeys[#lkeys + 1] = tag .. ':ol:' .. ds[k] .. ':' .. cur[ds[k]] .. ':' .. n\n"
	"  end\n"
	"  ckeys[k] = tag .. ':c:' .. ds[k] .. ':' .. os[k][1]\n"
	"end\n"
	"local lines = redis.call('MGET', unpack(lkeys))\n"
	"local custs = redis.call('MGET', unpack(ckeys))\n"
	"local out, dels, at = {}, {}, 1\n"
	"for k = 1, #ds do\n"
	"  local d, o = ds[k], os[k]\n"
	"  if not custs[k] then return redis.error_reply('ERR tpcc: no such customer') end\n"
	"  local sum = 0\n"
	"  for n = 1, tonumber(o[4]) do\n"
	"    if not lines[at] then return redis.error_reply('ERR tpcc: no such order line') end\n"
	"    local l = split(lines[at])\n"
	"    l[3] = now\n"
	"    sum = sum + l[5]\n"
	"    out[#out + 1] = lkeys[at]\n"
	"    out[#out + 1] = table.concat(l, '|')\n"
	"    at = at + 1\n"
	"  end\n"
	"  o[3] = carrier\n"
	"  local c = split(custs[k])\n"
	"  c[14] = c[14] + sum\n"
	"  c[17] = c[17] + 1\n"
	"  out[#out + 1] = KEYS[d]\n"
	"  out[#out + 1] = cur[d] + 1\n"
	"  out[#out + 1] = okeys[k]\n"
	"  out[#out + 1] = table.concat(o, '|')\n"
	"  out[#out + 1] = ckeys[k]\n"
	"  out[#out + 1] = table.concat(c, '|')\n"
	"  dels[#dels + 1] = nok[d]\n"
	"end\n"
	"redis.call('DEL', unpack(dels))\n"
	"redis.call('MSET', unpack(out))\n"
	"return #ds\n";

/* KEYS: the district. ARGV: tag, d_id, threshold. */
static const char tp_stock_level[] =
	TP_SPLIT
	"local tag, d_id, threshold = ARGV[1], ARGV[2], tonumber(ARGV[3])\n"
	"local dv = redis.call('GET', KEYS[1])\n"
	"if not dv then return redis.error_reply('ERR tpcc: no such district') end\n"
	"local next_o = tonumber(split(dv)[9])\n"
	"local lo = math.max(1, next_o - 20)\n"
	"if lo >= next_o then return 0 end\n"
	"local okeys = {}\n"
	"for o = lo, next_o - 1 do okeys[#okeys + 1] = tag .. ':o:' .. d_id .. ':' .. o end\n"
	"local orders = redis.call('MGET', unpack(okeys))\n"
	"local lkeys = {}\n"
	"for k = 1, #okeys do\n"
	"  if orders[k] then\n"
	"    for n = 1, tonumber(split(orders[k])[4]) do\n"
	"      lkeys[#lkeys + 1] = tag .. ':ol:' .. d_id .. ':' .. (lo + k - 1) .. ':' .. n\n"
	"    end\n"
	"  end\n"
	"end\n"
	"if #lkeys == 0 then return 0 end\n"
	"local lines = redis.call('MGET', unpack(lkeys))\n"
	"local seen, skeys = {}, {}\n"
	"for k = 1, #lines do\n"
	"  if lines[k] then\n"
	"    local i_id = string.match(lines[k], '^([^|]*)')\n"
	"    if not seen[i_id] then\n"
	"      seen[i_id] = true\n"
	"      skeys[#skeys + 1] = tag .. ':s:' .. i_id\n"
	"    end\n"
	"  end\n"
	"end\n"
	"if #skeys == 0 then return 0 end\n"
	"local stocks = redis.call('MGET', unpack(skeys))\n"
	"local low = 0\n"
	"for k = 1, #stocks do\n"
	"  if stocks[k] and tonumber(string.match(stocks[k], '^([^|]*)')) < threshold then\n"
	"    low = low + 1\n"
	"  end\n"
	"end\n"
	"return low\n";

static const char *const tp_scripts[TP_NTYPES] = {
	tp_new_order, tp_payment, tp_order_status, tp_delivery, tp_stock_level,
};

/* NURand's run-time C constants (TPC-C 2.1.6); any value in range does. */
#define TP_C_LAST 223
#define TP_C_ID 259
#define TP_C_ITEM 7911
#define TP_C_LAST_LOAD 157

struct tp_state {
	int warehouses, items, customers;
	int names;              /* distinct last names in use: min(1000, customers) */
	int a_item, a_id, a_name; /* NURand's A, scaled */
	char tags[TP_MAX_WAREHOUSES + 1][32]; /* tags[w], w from 1: "{w3}" */
};

/* The A of NURand for a range of n where TPC-C has A_std over n_std: the
 * largest 2^k - 1 not above A_std * n / n_std (0: uniform). */
static int scaled_a(int a_std, int n_std, int n)
{
	if (n >= n_std)
		return a_std;
	long lim = (long)a_std * n / n_std, a = 0;
	while (a * 2 + 1 <= lim)
		a = a * 2 + 1;
	return (int)a;
}

static int tp_setup(void *stp, const struct bench_config *cfg, const struct rckv_map *map,
		    char *sig, size_t siglen, char *err, size_t errlen)
{
	struct tp_state *st = stp;
	int at;

	if (cfg->warehouses > TP_MAX_WAREHOUSES) {
		snprintf(err, errlen, "tpcc: at most %d warehouses", TP_MAX_WAREHOUSES);
		return -1;
	}
	st->warehouses = cfg->warehouses;
	st->items = cfg->items;
	st->customers = cfg->customers;
	st->names = cfg->customers < 1000 ? cfg->customers : 1000;
	st->a_item = scaled_a(8191, 100000, st->items);
	st->a_id = scaled_a(1023, 3000, st->customers);
	st->a_name = scaled_a(255, 1000, st->names);
	/* warehouse w on node (w - 1) mod nodes: the first tag that lands there */
	for (int w = 1; w <= st->warehouses; w++) {
		int want = (w - 1) % map->nnodes;
		for (int k = 0;; k++) {
			char t[24];
			if (k)
				snprintf(t, sizeof(t), "w%d.%d", w, k);
			else
				snprintf(t, sizeof(t), "w%d", w);
			if (map->owner[rckv_keyslot(t, strlen(t))] == want || k == 100000) {
				snprintf(st->tags[w], sizeof(st->tags[w]), "{%s}", t);
				break;
			}
		}
	}
	at = snprintf(sig, siglen, "tpcc items=%d customers=%d seed=%llu warehouses=", st->items,
		      st->customers, (unsigned long long)cfg->seed);
	for (int w = 1; w <= st->warehouses && at < (int)siglen - 20; w++)
		at += snprintf(sig + at, siglen - (size_t)at, "%s%s", w > 1 ? "," : "", st->tags[w]);
	return 0;
}

static int rnd(struct bench_rng *r, int lo, int hi)
{
	return lo + (int)bench_rng_below(r, (uint64_t)(hi - lo + 1));
}

static int nurand(struct bench_rng *r, int a, int c, int lo, int hi)
{
	return (((rnd(r, 0, a) | rnd(r, lo, hi)) + c) % (hi - lo + 1)) + lo;
}

/* A random alphanumeric string of lo..hi characters, appended at *at. */
static void astr(struct bench_rng *r, char *buf, size_t cap, int *at, int lo, int hi)
{
	static const char cs[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	int n = rnd(r, lo, hi);

	for (int i = 0; i < n && (size_t)*at + 1 < cap; i++)
		buf[(*at)++] = cs[bench_rng_below(r, sizeof(cs) - 1)];
	buf[*at] = '\0';
}

static void addf(char *buf, size_t cap, int *at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void addf(char *buf, size_t cap, int *at, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	int k = vsnprintf(buf + *at, cap - (size_t)*at, fmt, ap);
	va_end(ap);
	if (k > 0)
		*at = (size_t)(*at + k) < cap ? *at + k : (int)cap - 1;
}

static void last_name(int num, char *out, size_t cap)
{
	static const char *const syl[10] = { "BAR", "OUGHT", "ABLE", "PRI", "PRES",
					     "ESE", "ANTI", "CALLY", "ATION", "EING" };
	snprintf(out, cap, "%s%s%s", syl[num / 100], syl[num / 10 % 10], syl[num % 10]);
}

/* name|street_1|street_2|city|state|zip| (an address) */
static void address(struct bench_rng *r, char *v, size_t cap, int *at, bool name)
{
	if (name) {
		astr(r, v, cap, at, 6, 10);
		addf(v, cap, at, "|");
	}
	for (int i = 0; i < 3; i++) {
		astr(r, v, cap, at, 10, 20);
		addf(v, cap, at, "|");
	}
	addf(v, cap, at, "%c%c|%04d11111|", 'A' + rnd(r, 0, 25), 'A' + rnd(r, 0, 25),
	     rnd(r, 0, 9999));
}

static int load_items_stock(const struct tp_state *st, struct bench_rng *r,
			    struct bench_oltp_loader *l, const char *T)
{
	char v[1024];

	for (int i = 1; i <= st->items; i++) {
		int at = 0;
		addf(v, sizeof(v), &at, "%d|", rnd(r, 1, 10000));
		astr(r, v, sizeof(v), &at, 14, 24);
		addf(v, sizeof(v), &at, "|%d|", rnd(r, 100, 10000));
		astr(r, v, sizeof(v), &at, 26, 42);
		if (rnd(r, 1, 10) == 1)
			addf(v, sizeof(v), &at, "ORIGINAL");
		if (bench_oltp_putf(l, v, "%s:i:%d", T, i))
			return -1;
		at = 0;
		addf(v, sizeof(v), &at, "%d", rnd(r, 10, 100));
		for (int d = 0; d < TP_DISTRICTS; d++) {
			addf(v, sizeof(v), &at, "|");
			astr(r, v, sizeof(v), &at, 24, 24);
		}
		addf(v, sizeof(v), &at, "|0|0|0|");
		astr(r, v, sizeof(v), &at, 26, 50);
		if (bench_oltp_putf(l, v, "%s:s:%d", T, i))
			return -1;
	}
	return 0;
}

struct tp_cust {
	int num, id;
	char first[20];
};

static int cust_cmp(const void *a, const void *b)
{
	const struct tp_cust *x = a, *y = b;
	if (x->num != y->num)
		return x->num < y->num ? -1 : 1;
	int c = strcmp(x->first, y->first);
	return c ? c : (x->id < y->id ? -1 : x->id > y->id);
}

/* A district's customers, their history rows and the last-name rows. */
static int load_customers(const struct tp_state *st, struct bench_rng *r,
			  struct bench_oltp_loader *l, const char *T, int w, int d, long now)
{
	struct tp_cust *cs = calloc((size_t)st->customers, sizeof(*cs));
	char v[1024], last[32];
	char *ids = NULL;
	int rc = -1;

	if (!cs)
		return -1;
	for (int c = 1; c <= st->customers; c++) {
		struct tp_cust *x = &cs[c - 1];
		int at = 0;
		x->id = c;
		x->num = c <= st->names ? c - 1 : nurand(r, 255, TP_C_LAST_LOAD, 0, st->names - 1);
		astr(r, x->first, sizeof(x->first), &at, 8, 16);
		last_name(x->num, last, sizeof(last));
		at = 0;
		addf(v, sizeof(v), &at, "%s|OE|%s|", x->first, last);
		address(r, v, sizeof(v), &at, false);
		addf(v, sizeof(v), &at, "%016llu|%ld|%s|5000000|%d|-1000|1000|1|0|",
		     (unsigned long long)bench_rng_below(r, 10000000000000000ull), now,
		     rnd(r, 1, 10) == 1 ? "BC" : "GC", rnd(r, 0, 5000));
		astr(r, v, sizeof(v), &at, 300, 500);
		if (bench_oltp_putf(l, v, "%s:c:%d:%d", T, d, c))
			goto out;
		at = 0;
		addf(v, sizeof(v), &at, "%d|%d|%d|%d|%d|%ld|1000|", c, d, w, d, w, now);
		astr(r, v, sizeof(v), &at, 12, 24);
		if (bench_oltp_putf(l, v, "%s:h:0:%d:%d", T, d, c))
			goto out;
	}
	qsort(cs, (size_t)st->customers, sizeof(*cs), cust_cmp);
	ids = malloc((size_t)st->customers * 8 + 1);
	if (!ids)
		goto out;
	for (int i = 0; i < st->customers;) {
		int at = 0, j = i;
		for (; j < st->customers && cs[j].num == cs[i].num; j++)
			at += sprintf(ids + at, "%s%d", j > i ? "," : "", cs[j].id);
		last_name(cs[i].num, last, sizeof(last));
		if (bench_oltp_putf(l, ids, "%s:cn:%d:%s", T, d, last))
			goto out;
		i = j;
	}
	rc = 0;
out:
	free(ids);
	free(cs);
	return rc;
}

/* A district's initial orders: one per customer in a random order, the
 * last 30% undelivered (new orders). */
static int load_orders(const struct tp_state *st, struct bench_rng *r,
		       struct bench_oltp_loader *l, const char *T, int w, int d, long now)
{
	int *perm = malloc(sizeof(int) * (size_t)st->customers);
	int fresh = st->customers * 3 / 10, first_new = st->customers - fresh + 1;
	char v[256];

	if (!perm)
		return -1;
	for (int i = 0; i < st->customers; i++)
		perm[i] = i + 1;
	for (int i = st->customers - 1; i > 0; i--) {
		int j = (int)bench_rng_below(r, (uint64_t)i + 1), x = perm[i];
		perm[i] = perm[j];
		perm[j] = x;
	}
	for (int o = 1; o <= st->customers; o++) {
		bool delivered = o < first_new;
		int ol_cnt = rnd(r, 5, 15), c = perm[o - 1];
		snprintf(v, sizeof(v), "%d|%ld|%d|%d|1", c, now, delivered ? rnd(r, 1, 10) : 0, ol_cnt);
		if (bench_oltp_putf(l, v, "%s:o:%d:%d", T, d, o))
			goto fail;
		snprintf(v, sizeof(v), "%d", o);
		if (bench_oltp_putf(l, v, "%s:co:%d:%d", T, d, c))
			goto fail;
		if (!delivered && bench_oltp_putf(l, "1", "%s:no:%d:%d", T, d, o))
			goto fail;
		for (int n = 1; n <= ol_cnt; n++) {
			int at = 0;
			addf(v, sizeof(v), &at, "%d|%d|%ld|5|%d|", rnd(r, 1, st->items), w,
			     delivered ? now : 0L, delivered ? 0 : rnd(r, 1, 999999));
			astr(r, v, sizeof(v), &at, 24, 24);
			if (bench_oltp_putf(l, v, "%s:ol:%d:%d:%d", T, d, o, n))
				goto fail;
		}
	}
	snprintf(v, sizeof(v), "%d", first_new);
	free(perm);
	return bench_oltp_putf(l, v, "%s:dn:%d", T, d);
fail:
	free(perm);
	return -1;
}

static int tp_load(void *stp, const struct bench_config *cfg, struct bench_oltp_loader *l,
		   char *err, size_t errlen)
{
	const struct tp_state *st = stp;
	long now = (long)time(NULL);
	char v[1024];
	(void)err;
	(void)errlen;

	for (int w = 1; w <= st->warehouses; w++) {
		const char *T = st->tags[w];
		struct bench_rng r;
		int at = 0;

		bench_rng_seed(&r, cfg->seed, 0x7cc000000ull + (uint64_t)w);
		if (load_items_stock(st, &r, l, T))
			return -1;
		address(&r, v, sizeof(v), &at, true);
		/* W_YTD 300,000.00 = the ten districts' 30,000.00 */
		addf(v, sizeof(v), &at, "%d|30000000", rnd(&r, 0, 2000));
		if (bench_oltp_putf(l, v, "%s:w", T))
			return -1;
		for (int d = 1; d <= TP_DISTRICTS; d++) {
			at = 0;
			address(&r, v, sizeof(v), &at, true);
			addf(v, sizeof(v), &at, "%d|3000000|%d", rnd(&r, 0, 2000), st->customers + 1);
			if (bench_oltp_putf(l, v, "%s:d:%d", T, d) ||
			    load_customers(st, &r, l, T, w, d, now) ||
			    load_orders(st, &r, l, T, w, d, now))
				return -1;
		}
	}
	return 0;
}

/* Another warehouse than w, uniformly (W >= 2). */
static int other_warehouse(const struct tp_state *st, struct bench_rng *r, int w)
{
	int x = rnd(r, 1, st->warehouses - 1);
	return x >= w ? x + 1 : x;
}

static void next_new_order(const struct tp_state *st, struct bench_rng *r, long now,
			   struct bench_oltp_call *call)
{
	int w = rnd(r, 1, st->warehouses), d = rnd(r, 1, TP_DISTRICTS);
	int c = nurand(r, st->a_id, TP_C_ID, 1, st->customers), n = rnd(r, 5, TP_MAX_LINES);
	bool rollback = rnd(r, 1, 100) == 1, all_local = true;
	int item[TP_MAX_LINES], supply[TP_MAX_LINES];
	const char *T = st->tags[w];

	for (int i = 0; i < n; i++) {
		bool again;
		do { /* distinct items within an order */
			item[i] = nurand(r, st->a_item, TP_C_ITEM, 1, st->items);
			again = false;
			for (int k = 0; k < i; k++)
				again |= item[k] == item[i];
		} while (again);
		supply[i] = w;
		if (st->warehouses > 1 && rnd(r, 1, 100) == 1) {
			supply[i] = other_warehouse(st, r, w);
			all_local = false;
		}
	}
	if (rollback)
		item[n - 1] = st->items + 1; /* unused: TPC-C 2.4.1.5 */
	bench_oltp_key(call, "%s:w", T);
	bench_oltp_key(call, "%s:d:%d", T, d);
	bench_oltp_key(call, "%s:c:%d:%d", T, d, c);
	for (int i = 0; i < n; i++)
		bench_oltp_key(call, "%s:i:%d", T, item[i]);
	for (int i = 0; i < n; i++)
		bench_oltp_key(call, "%s:s:%d", st->tags[supply[i]], item[i]);
	bench_oltp_arg(call, "%s", T);
	bench_oltp_arg(call, "%d", w);
	bench_oltp_arg(call, "%d", d);
	bench_oltp_arg(call, "%d", c);
	bench_oltp_arg(call, "%d", n);
	bench_oltp_arg(call, "%ld", now);
	bench_oltp_arg(call, "%d", all_local ? 1 : 0);
	for (int i = 0; i < n; i++) {
		bench_oltp_arg(call, "%d", item[i]);
		bench_oltp_arg(call, "%d", supply[i]);
		bench_oltp_arg(call, "%d", rnd(r, 1, 10));
	}
}

/* The customer of a Payment or OrderStatus: its key, or (by name) its
 * last-name row's; *c_id gets the id (0 by name). */
static void customer_key(const struct tp_state *st, struct bench_rng *r, const char *T, int d,
			 struct bench_oltp_call *call, bool *by_name, int *c_id)
{
	*by_name = rnd(r, 1, 100) <= 60;
	*c_id = 0;
	if (*by_name) {
		char last[32];
		last_name(nurand(r, st->a_name, TP_C_LAST, 0, st->names - 1), last, sizeof(last));
		bench_oltp_key(call, "%s:cn:%d:%s", T, d, last);
	} else {
		*c_id = nurand(r, st->a_id, TP_C_ID, 1, st->customers);
		bench_oltp_key(call, "%s:c:%d:%d", T, d, *c_id);
	}
}

static void next_payment(const struct tp_state *st, struct bench_rng *r, long now,
			 struct bench_oltp_call *call)
{
	int w = rnd(r, 1, st->warehouses), d = rnd(r, 1, TP_DISTRICTS), cw = w, cd = d, c_id;
	bool by_name;

	if (st->warehouses > 1 && rnd(r, 1, 100) <= 15) {
		cw = other_warehouse(st, r, w);
		cd = rnd(r, 1, TP_DISTRICTS);
	}
	bench_oltp_key(call, "%s:w", st->tags[w]);
	bench_oltp_key(call, "%s:d:%d", st->tags[w], d);
	customer_key(st, r, st->tags[cw], cd, call, &by_name, &c_id);
	bench_oltp_key(call, "%s:h:%016llx", st->tags[w], (unsigned long long)bench_rng_next(r));
	bench_oltp_arg(call, "%s", st->tags[cw]);
	bench_oltp_arg(call, "%d", w);
	bench_oltp_arg(call, "%d", d);
	bench_oltp_arg(call, "%d", cw);
	bench_oltp_arg(call, "%d", cd);
	bench_oltp_arg(call, "%d", by_name ? 1 : 0);
	bench_oltp_arg(call, "%d", rnd(r, 100, 500000));
	bench_oltp_arg(call, "%ld", now);
	bench_oltp_arg(call, "%d", c_id);
}

static void tp_next(const void *stp, const struct bench_config *cfg, struct bench_rng *r,
		    long now, struct bench_oltp_call *call)
{
	const struct tp_state *st = stp;
	int w, d, c_id;
	bool by_name;
	(void)cfg;

	switch (call->type) {
	case TP_NEW_ORDER:
		next_new_order(st, r, now, call);
		break;
	case TP_PAYMENT:
		next_payment(st, r, now, call);
		break;
	case TP_ORDER_STATUS:
		w = rnd(r, 1, st->warehouses);
		d = rnd(r, 1, TP_DISTRICTS);
		customer_key(st, r, st->tags[w], d, call, &by_name, &c_id);
		if (!by_name)
			bench_oltp_key(call, "%s:co:%d:%d", st->tags[w], d, c_id);
		bench_oltp_arg(call, "%s", st->tags[w]);
		bench_oltp_arg(call, "%d", d);
		bench_oltp_arg(call, "%d", by_name ? 1 : 0);
		bench_oltp_arg(call, "%d", c_id);
		break;
	case TP_DELIVERY:
		w = rnd(r, 1, st->warehouses);
		for (d = 1; d <= TP_DISTRICTS; d++)
			bench_oltp_key(call, "%s:dn:%d", st->tags[w], d);
		bench_oltp_arg(call, "%s", st->tags[w]);
		bench_oltp_arg(call, "%d", rnd(r, 1, 10));
		bench_oltp_arg(call, "%ld", now);
		break;
	case TP_STOCK_LEVEL:
		w = rnd(r, 1, st->warehouses);
		d = rnd(r, 1, TP_DISTRICTS);
		bench_oltp_key(call, "%s:d:%d", st->tags[w], d);
		bench_oltp_arg(call, "%s", st->tags[w]);
		bench_oltp_arg(call, "%d", d);
		bench_oltp_arg(call, "%d", rnd(r, 10, 20));
		break;
	}
}

/* --- the check ---------------------------------------------------------- */

/* Field k (from 1) of a row, as a number; 0 if the row is shorter. */
static long long field(const char *row, int k)
{
	for (int i = 1; i < k && row; i++) {
		row = strchr(row, '|');
		if (row)
			row++;
	}
	return row ? strtoll(row, NULL, 10) : 0;
}

/* Read n keys named by fmt-style generation into vals. */
struct keyset {
	char **keys;
	size_t n, cap;
};

static int ks_add(struct keyset *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int ks_add(struct keyset *k, const char *fmt, ...)
{
	char buf[96];
	va_list ap;

	if (k->n == k->cap) {
		size_t cap = k->cap ? 2 * k->cap : 256;
		char **nk = realloc(k->keys, cap * sizeof(*nk));
		if (!nk)
			return -1;
		k->keys = nk;
		k->cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (!(k->keys[k->n] = strdup(buf)))
		return -1;
	k->n++;
	return 0;
}

static void ks_free(struct keyset *k)
{
	for (size_t i = 0; i < k->n; i++)
		free(k->keys[i]);
	free(k->keys);
	memset(k, 0, sizeof(*k));
}

/* Read the keys of k; vals (k->n entries) get the values. */
static char **ks_read(redisContext *c, struct keyset *k, char *err, size_t errlen)
{
	char **vals = calloc(k->n ? k->n : 1, sizeof(*vals));

	if (!vals) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (k->n && bench_oltp_mget(c, k->keys, k->n, vals, err, errlen)) {
		free(vals);
		return NULL;
	}
	return vals;
}

static void vals_free(char **vals, size_t n)
{
	if (vals)
		bench_oltp_free_vals(vals, n);
	free(vals);
}

/* The sum of W_YTD over the warehouses. */
static int ytd_sum(const struct tp_state *st, redisContext *c, int64_t *sum, char *err,
		   size_t errlen)
{
	struct keyset k = { 0 };
	char **v = NULL;
	int rc = -1;

	for (int w = 1; w <= st->warehouses; w++)
		if (ks_add(&k, "%s:w", st->tags[w]))
			goto oom;
	if (!(v = ks_read(c, &k, err, errlen)))
		goto out;
	*sum = 0;
	for (size_t i = 0; i < k.n; i++) {
		if (!v[i]) {
			snprintf(err, errlen, "%s is missing (load again with --load always)", k.keys[i]);
			goto out;
		}
		*sum += field(v[i], 8);
	}
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "out of memory");
out:
	vals_free(v, k.n);
	ks_free(&k);
	return rc;
}

static int tp_check_begin(void *stp, const struct bench_config *cfg, redisContext *c,
			  int64_t *base, char *err, size_t errlen)
{
	(void)cfg;
	return ytd_sum(stp, c, base, err, errlen);
}

/* Conditions 2-4 for district d of warehouse w; *bad counts failures,
 * printed to out. */
static int check_district(const struct tp_state *st, redisContext *c, int w, int d,
			  long long next_o, long long cursor, FILE *out, int *bad, char *err,
			  size_t errlen)
{
	const char *T = st->tags[w];
	long long top = next_o - 1 + TP_PROBE, max_o = 0, max_no = 0, min_no = 0, count_no = 0;
	long long ol_sum = 0, ol_rows = 0, carrier_bad = 0, cursor_bad = 0;
	struct keyset ko = { 0 }, kl = { 0 };
	char **vo = NULL, **vl = NULL;
	int rc = -1;

	for (long long o = 1; o <= top; o++)
		if (ks_add(&ko, "%s:o:%d:%lld", T, d, o) || ks_add(&ko, "%s:no:%d:%lld", T, d, o))
			goto oom;
	if (!(vo = ks_read(c, &ko, err, errlen)))
		goto out;
	for (long long o = 1; o <= top; o++) {
		const char *ord = vo[2 * (o - 1)], *no = vo[2 * (o - 1) + 1];
		if (ord) {
			max_o = o;
			long long cnt = field(ord, 4);
			ol_sum += cnt;
			for (long long n = 1; n <= TP_MAX_LINES; n++)
				if (ks_add(&kl, "%s:ol:%d:%lld:%lld", T, d, o, n))
					goto oom;
		}
		if (no) {
			if (!count_no++)
				min_no = o;
			max_no = o;
		}
		/* 5: O_CARRIER_ID is null (0) iff a NEW-ORDER row exists */
		if (ord && (field(ord, 3) == 0) != (no != NULL))
			carrier_bad++;
		/* the cursor: new orders are exactly [cursor, D_NEXT_O_ID) */
		if ((no != NULL) != (o >= cursor && o < next_o))
			cursor_bad++;
	}
	if (!(vl = ks_read(c, &kl, err, errlen)))
		goto out;
	for (size_t i = 0; i < kl.n; i++)
		ol_rows += vl[i] != NULL;
	if (next_o - 1 != max_o || (count_no && max_no != max_o)) {
		fprintf(out, "tpcc: condition 2 FAILED at %s district %d: D_NEXT_O_ID - 1 = %lld, "
			     "max(O_ID) = %lld, max(NO_O_ID) = %lld\n",
			T, d, next_o - 1, max_o, max_no);
		(*bad)++;
	}
	if (count_no && max_no - min_no + 1 != count_no) {
		fprintf(out, "tpcc: condition 3 FAILED at %s district %d: max(NO_O_ID) - "
			     "min(NO_O_ID) + 1 = %lld, new-order rows = %lld\n",
			T, d, max_no - min_no + 1, count_no);
		(*bad)++;
	}
	if (carrier_bad) {
		fprintf(out, "tpcc: condition 5 FAILED at %s district %d: %lld orders whose "
			     "O_CARRIER_ID is null without a new-order row or set with one\n",
			T, d, carrier_bad);
		(*bad)++;
	}
	if (cursor_bad) {
		fprintf(out, "tpcc: the new-order rows of %s district %d are not exactly the "
			     "orders %lld to %lld (Delivery's cursor to D_NEXT_O_ID - 1): %lld differ\n",
			T, d, cursor, next_o - 1, cursor_bad);
		(*bad)++;
	}
	if (ol_sum != ol_rows) {
		fprintf(out, "tpcc: condition 4 FAILED at %s district %d: sum(O_OL_CNT) = %lld, "
			     "order-line rows = %lld\n",
			T, d, ol_sum, ol_rows);
		(*bad)++;
	}
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "out of memory");
out:
	vals_free(vo, ko.n);
	vals_free(vl, kl.n);
	ks_free(&ko);
	ks_free(&kl);
	return rc;
}

static int tp_check_end(void *stp, const struct bench_config *cfg, redisContext *c,
			int64_t base, int64_t delta, FILE *out, char *err, size_t errlen)
{
	const struct tp_state *st = stp;
	int bad = 0, districts = 0;
	int64_t after;
	(void)cfg;

	for (int w = 1; w <= st->warehouses; w++) {
		struct keyset k = { 0 };
		char **v = NULL;
		if (ks_add(&k, "%s:w", st->tags[w])) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		for (int d = 1; d <= 2 * TP_DISTRICTS; d++)
			if (ks_add(&k, d <= TP_DISTRICTS ? "%s:d:%d" : "%s:dn:%d", st->tags[w],
				   d <= TP_DISTRICTS ? d : d - TP_DISTRICTS)) {
				ks_free(&k);
				snprintf(err, errlen, "out of memory");
				return -1;
			}
		if (!(v = ks_read(c, &k, err, errlen))) {
			ks_free(&k);
			return -1;
		}
		long long d_ytd = 0;
		int rc = 0;
		for (size_t i = 0; i < k.n && !rc; i++)
			if (!v[i]) {
				snprintf(err, errlen, "%s is missing (load again with --load always)",
					 k.keys[i]);
				rc = -1;
			}
		for (int d = 1; d <= TP_DISTRICTS && !rc; d++) {
			d_ytd += field(v[d], 8);
			rc = check_district(st, c, w, d, field(v[d], 9),
					    strtoll(v[TP_DISTRICTS + d], NULL, 10), out, &bad, err,
					    errlen);
			districts++;
		}
		if (!rc && field(v[0], 8) != d_ytd) {
			fprintf(out, "tpcc: condition 1 FAILED at %s: W_YTD = %lld, sum(D_YTD) = %lld\n",
				st->tags[w], field(v[0], 8), d_ytd);
			bad++;
		}
		vals_free(v, k.n);
		ks_free(&k);
		if (rc)
			return -1;
	}
	if (ytd_sum(st, c, &after, err, errlen))
		return -1;
	fprintf(out, "tpcc: conditions 1-5 over %d warehouse%s and %d districts: %d failure%s\n",
		st->warehouses, st->warehouses == 1 ? "" : "s", districts, bad, bad == 1 ? "" : "s");
	fprintf(out, "tpcc: W_YTD summed %lld before and %lld after; the committed Payments paid "
		     "%lld%s\n",
		(long long)base, (long long)after, (long long)delta,
		after == base + delta ? "" : ": PAYMENTS LOST OR MADE UP");
	if (after != base + delta)
		bad++;
	return bad ? 1 : 0;
}

const struct bench_oltp_ops bench_tpcc = {
	.name = "tpcc",
	.ntypes = TP_NTYPES,
	.type_names = tp_names,
	.mix = tp_mix,
	.scripts = tp_scripts,
	.delta_counts = tp_delta,
	.state_size = sizeof(struct tp_state),
	.setup = tp_setup,
	.load = tp_load,
	.next = tp_next,
	.check_desc = "TPC-C consistency conditions 1-5, Delivery's cursor, and the Payments "
		      "against W_YTD",
	.check_begin = tp_check_begin,
	.check_end = tp_check_end,
};
