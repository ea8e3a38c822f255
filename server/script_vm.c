/*
 * script_vm.c: a Lua 5.1 state with Redis 7's sandbox, its `redis`
 * library, and the conversions between Lua values and RESP replies
 * (script_vm.h says what the sandbox holds).
 *
 * Layout of a VM's state:
 *  - the real globals table G holds the libraries (behind read-only
 *    proxies), KEYS and ARGV; the state's globals (LUA_GLOBALSINDEX) are a
 *    proxy of G, so every chunk, loadstring's included, reads G through
 *    it and can write nothing;
 *  - the registry holds G (REG_GLOBALS), the compiled scripts by SHA-1
 *    (REG_FUNCS) and the VM itself (REG_VM), for the C functions.
 *
 * Errors follow Redis 7: a Redis error is a table {err = "CODE message"};
 * a Lua error (a string) becomes {err = "ERR " .. message}; the message
 * handler adds where it happened, and the final reply reads
 * "<err> script: <sha>, on @user_script:<line>.".
 *
 * Stopping a script (a CC abort in redis.call, SCRIPT KILL, the time
 * limit) raises an error from redis.call or from the count hook. A script
 * may catch it with pcall, but every later redis.call and hook raises it
 * again, and svm_run reports SVM_STOPPED whatever the script returns.
 */
#include "server/script_vm.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <lua-cjson.h> /* after lua.h: it names lua_State */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/command.h"
#include "server/sha1.h"

#define REG_GLOBALS "rckv.globals"
#define REG_FUNCS "rckv.funcs"
#define REG_VM "rckv.vm"
#define REG_READONLY "rckv.readonly" /* the read-only proxies, as weak keys */

/* Nesting of a reply or of a returned table past which it is cut. */
#define SVM_MAX_DEPTH 512

struct script_vm {
	lua_State *L;
	size_t used;          /* bytes held by the heap (vm_alloc) */
	size_t cap;           /* SIZE_MAX, or the heap's bound while a script runs */
	uint64_t gen;
	/* The run in progress (svm_run), for the C functions: */
	const struct script_host *host;
	bool stopped;         /* host->call or ->tick said SCRIPT_STOP */
	size_t mem_limit;     /* the run's script-memory-limit */
	struct resp_w reply;  /* a command's reply, before it is converted */
};

static void *vm_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
	struct script_vm *vm = ud;
	if (nsize == 0) {
		free(ptr);
		vm->used -= osize;
		return NULL;
	}
	if (nsize > osize && vm->used + (nsize - osize) > vm->cap)
		return NULL; /* Lua raises "not enough memory" */
	void *p = realloc(ptr, nsize);
	if (p)
		vm->used = vm->used - osize + nsize;
	return p;
}

static struct script_vm *vm_of(lua_State *L)
{
	lua_getfield(L, LUA_REGISTRYINDEX, REG_VM);
	struct script_vm *vm = lua_touserdata(L, -1);
	lua_pop(L, 1);
	return vm;
}

/* ---- errors ---- */

/* Push t[name] of the table at idx without metamethods: a script's
 * table may carry an __index that raises or loops, and this runs outside
 * the script's pcall and hook. */
static void raw_field(lua_State *L, int idx, const char *name)
{
	if (idx < 0 && idx > LUA_REGISTRYINDEX)
		idx = lua_gettop(L) + idx + 1;
	lua_pushstring(L, name);
	lua_rawget(L, idx);
}

/* Push {err = msg}. */
static void push_error_table(lua_State *L, const char *msg, size_t len)
{
	lua_newtable(L);
	lua_pushlstring(L, msg, len);
	lua_setfield(L, -2, "err");
}

/* Raise a Redis error: msg is "CODE message" or, without a leading code
 * word in capitals, gets "ERR ". */
static int raise_error(lua_State *L, const char *msg)
{
	char buf[512];
	snprintf(buf, sizeof(buf), "ERR %s", msg);
	push_error_table(L, buf, strlen(buf));
	return lua_error(L);
}

/* An argument error of redis.error_reply or status_reply: Redis 7.0
 * reports it without the script's location. */
static char unplaced_key; /* its address: a table key no script can name */

static int raise_error_unplaced(lua_State *L, const char *msg)
{
	push_error_table(L, msg, strlen(msg));
	lua_pushlightuserdata(L, &unplaced_key);
	lua_pushboolean(L, 1);
	lua_rawset(L, -3);
	return lua_error(L);
}

static int raise_stop(lua_State *L)
{
	return raise_error(L, "script stopped (transaction aborted, killed, or over its time "
			      "limit)");
}

/*
 * The message handler of svm_run's lua_pcall: turn the error into a table
 * {err, source, line}. Level 1 is the function that raised it; when that
 * is a C function (error, redis.call), the line is its caller's.
 */
static int err_handler(lua_State *L)
{
	lua_Debug ar;
	bool where = false;
	for (int level = 1; level < 8; level++) { /* the first Lua function up */
		if (!lua_getstack(L, level, &ar) || !lua_getinfo(L, "Sl", &ar))
			break;
		if (strcmp(ar.what, "C") != 0) {
			where = true;
			break;
		}
	}

	if (lua_istable(L, 1)) {
		raw_field(L, 1, "err");
		bool has_err = lua_isstring(L, -1);
		if (lua_type(L, -1) == LUA_TNUMBER) { /* error({err = 5}): "5" */
			lua_pushliteral(L, "err");
			lua_pushvalue(L, -2);
			lua_tostring(L, -1);
			lua_rawset(L, 1);
		}
		lua_pop(L, 1);
		lua_pushlightuserdata(L, &unplaced_key);
		lua_rawget(L, 1);
		if (lua_toboolean(L, -1))
			where = false;
		lua_pop(L, 1);
		if (!has_err)
			push_error_table(L, "ERR unknown error", 17);
		else
			lua_pushvalue(L, 1);
	} else {
		size_t len;
		const char *s = lua_tolstring(L, 1, &len);
		lua_newtable(L);
		lua_pushliteral(L, "ERR ");
		if (s)
			lua_pushlstring(L, s, len);
		else if (lua_isboolean(L, 1)) /* as tostring() would say */
			lua_pushstring(L, lua_toboolean(L, 1) ? "true" : "false");
		else
			lua_pushstring(L, luaL_typename(L, 1));
		lua_concat(L, 2);
		lua_setfield(L, -2, "err");
	}
	if (where && ar.currentline > 0) {
		lua_pushstring(L, ar.source);
		lua_setfield(L, -2, "source");
		lua_pushinteger(L, ar.currentline);
		lua_setfield(L, -2, "line");
	}
	return 1;
}

/* ---- RESP to Lua (a command's reply inside the script) ---- */

static const char *line_end(const char *p, const char *end)
{
	const char *q = memchr(p, '\r', (size_t)(end - p));
	return q ? q : end;
}

/*
 * Push the RESP2 value at *pp as Redis 7 does for a script: integer ->
 * number, bulk -> string, null -> false, array -> table, status -> {ok=},
 * error -> {err=}. The reply was written by our own handlers, so it is
 * well formed; a truncated one pushes what it has.
 */
static void push_resp(lua_State *L, const char **pp, const char *end, int depth)
{
	const char *p = *pp;
	if (p >= end || !lua_checkstack(L, 4)) {
		lua_pushboolean(L, 0);
		*pp = end;
		return;
	}
	const char *le = line_end(p + 1, end);
	const char *next = le + 2 <= end ? le + 2 : end;
	switch (*p) {
	case '+':
	case '-':
		lua_newtable(L);
		lua_pushlstring(L, p + 1, (size_t)(le - p - 1));
		lua_setfield(L, -2, *p == '+' ? "ok" : "err");
		*pp = next;
		return;
	case ':':
		lua_pushnumber(L, (lua_Number)strtoll(p + 1, NULL, 10));
		*pp = next;
		return;
	case '$': {
		long long n = strtoll(p + 1, NULL, 10);
		if (n < 0) {
			lua_pushboolean(L, 0);
			*pp = next;
		} else {
			if (n > end - next)
				n = end - next;
			lua_pushlstring(L, next, (size_t)n);
			*pp = next + n + 2 <= end ? next + n + 2 : end;
		}
		return;
	}
	case '*': {
		long long n = strtoll(p + 1, NULL, 10);
		*pp = next;
		if (n < 0) {
			lua_pushboolean(L, 0);
			return;
		}
		lua_createtable(L, n < 1024 ? (int)n : 1024, 0);
		for (long long i = 1; i <= n; i++) {
			if (depth >= SVM_MAX_DEPTH)
				lua_pushboolean(L, 0);
			else
				push_resp(L, pp, end, depth + 1);
			lua_rawseti(L, -2, (int)i);
		}
		return;
	}
	default:
		lua_pushboolean(L, 0);
		*pp = end;
		return;
	}
}

/* ---- Lua to RESP (the script's return value) ---- */

/* Redis's (long long) cast of a Lua number, with what x86 gives for the
 * numbers that do not fit (NaN, huge): LLONG_MIN. */
static long long number_to_ll(lua_Number d)
{
	if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0))
		return INT64_MIN;
	return (long long)d;
}

/* An error or status line, its text as the script gave it (a leading
 * dash included): CR and LF become spaces, as Redis writes them. */
static void reply_line(struct resp_w *out, char kind, const char *s, size_t len)
{
	resp_w_raw(out, &kind, 1);
	for (size_t i = 0; i < len;) {
		size_t run = 0;
		while (i + run < len && s[i + run] != '\r' && s[i + run] != '\n')
			run++;
		resp_w_raw(out, s + i, run);
		i += run;
		if (i < len) {
			resp_w_raw(out, " ", 1);
			i++;
		}
	}
	resp_w_raw(out, "\r\n", 2);
}

/* The string field `name` of the table at idx (read raw), or NULL (left
 * popped). */
static const char *table_string(lua_State *L, int idx, const char *name, size_t *len)
{
	raw_field(L, idx, name);
	const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, len) : NULL;
	lua_pop(L, 1); /* s stays valid: the table still holds it */
	return s;
}

static void to_resp(lua_State *L, int idx, struct resp_w *out, int depth);

/*
 * The RESP3-shaped tables of Redis 7: {double = n}, {big_number = "..."},
 * {map = {k = v}}, {set = {k = true}}, written in the client's protocol
 * (RESP2: a bulk string, a flat array of keys and values, an array of
 * keys). False when the table is none of these.
 */
static bool resp3_shaped(lua_State *L, int idx, struct resp_w *out, int depth)
{
	raw_field(L, idx, "double");
	if (lua_type(L, -1) == LUA_TNUMBER) {
		resp_double(out, (double)lua_tonumber(L, -1));
		lua_pop(L, 1);
		return true;
	}
	lua_pop(L, 1);
	size_t len;
	const char *s = table_string(L, idx, "big_number", &len);
	if (s) {
		resp_bulk(out, s, len); /* RESP3's ( is not written: clients read it as a bulk */
		return true;
	}
	bool is_map = false;
	raw_field(L, idx, "map");
	if (lua_istable(L, -1)) {
		is_map = true;
	} else {
		lua_pop(L, 1);
		raw_field(L, idx, "set");
		if (!lua_istable(L, -1)) {
			lua_pop(L, 1);
			return false;
		}
	}
	int t = lua_gettop(L);
	long n = 0;
	lua_pushnil(L);
	while (lua_next(L, t)) {
		n++;
		lua_pop(L, 1);
	}
	if (is_map)
		resp_map(out, n);
	else
		resp_set(out, n);
	lua_pushnil(L);
	while (lua_next(L, t)) {
		to_resp(L, -2, out, depth + 1);
		if (is_map)
			to_resp(L, -1, out, depth + 1);
		lua_pop(L, 1);
	}
	lua_pop(L, 1);
	return true;
}

static void to_resp(lua_State *L, int idx, struct resp_w *out, int depth)
{
	size_t len;
	switch (lua_type(L, idx)) {
	case LUA_TSTRING: {
		const char *s = lua_tolstring(L, idx, &len);
		resp_bulk(out, s, len);
		return;
	}
	case LUA_TBOOLEAN:
		if (lua_toboolean(L, idx))
			resp_int(out, 1);
		else
			resp_null(out);
		return;
	case LUA_TNUMBER:
		resp_int(out, number_to_ll(lua_tonumber(L, idx)));
		return;
	case LUA_TTABLE: {
		if (idx < 0)
			idx = lua_gettop(L) + idx + 1;
		const char *s = table_string(L, idx, "err", &len);
		if (s) {
			reply_line(out, '-', s, len);
			return;
		}
		s = table_string(L, idx, "ok", &len);
		if (s) {
			reply_line(out, '+', s, len);
			return;
		}
		if (depth >= SVM_MAX_DEPTH || !lua_checkstack(L, 4)) {
			resp_error(out, "ERR reached lua stack limit");
			return;
		}
		if (resp3_shaped(L, idx, out, depth))
			return;
		/* An array up to its first nil, as Redis converts it. */
		int n = 0;
		for (;; n++) {
			lua_rawgeti(L, idx, n + 1);
			bool nil = lua_isnil(L, -1);
			lua_pop(L, 1);
			if (nil)
				break;
		}
		resp_array(out, n);
		for (int i = 1; i <= n; i++) {
			lua_rawgeti(L, idx, i);
			to_resp(L, -1, out, depth + 1);
			lua_pop(L, 1);
		}
		return;
	}
	default: /* nil, functions, userdata */
		resp_null(out);
		return;
	}
}

/* ---- the redis library ---- */

static int redis_command(lua_State *L, bool raise)
{
	struct script_vm *vm = vm_of(L);
	if (vm->stopped)
		return raise_stop(L);
	int argc = lua_gettop(L);
	if (argc == 0)
		return raise_error(L, "Please specify at least one argument for this redis lib "
				      "call");
	struct resp_arg stack[16];
	struct resp_arg *argv = argc <= 16 ? stack : lua_newuserdata(L, (size_t)argc * sizeof(*argv));
	for (int i = 0; i < argc; i++) {
		int t = lua_type(L, i + 1);
		if (t != LUA_TSTRING && t != LUA_TNUMBER)
			return raise_error(L, "Lua redis lib command arguments must be strings or "
					      "integers");
		if (t == LUA_TNUMBER) {
			/* "%.17g", as Redis 7.0 prints a number argument (Lua's
			 * own "%.14g" would store 123456789012345 as 1.2345678901234e+14). */
			char num[64];
			snprintf(num, sizeof(num), "%.17g", (double)lua_tonumber(L, i + 1));
			lua_pushstring(L, num);
			lua_replace(L, i + 1); /* anchored in the argument's slot */
		}
		size_t len;
		argv[i].p = (char *)lua_tolstring(L, i + 1, &len); /* handlers only read it */
		argv[i].len = len;
	}
	resp_w_reset(&vm->reply);
	if (vm->host->call(vm->host->arg, argc, argv, &vm->reply) == SCRIPT_STOP) {
		vm->stopped = true;
		return raise_stop(L);
	}
	const char *p = vm->reply.p;
	const char *end = p + vm->reply.len;
	if (raise && p < end && *p == '-') {
		const char *le = line_end(p + 1, end);
		push_error_table(L, p + 1, (size_t)(le - p - 1));
		return lua_error(L);
	}
	push_resp(L, &p, end, 0);
	return 1;
}

static int redis_call(lua_State *L)
{
	return redis_command(L, true);
}

static int redis_pcall(lua_State *L)
{
	return redis_command(L, false);
}

/* redis.error_reply / status_reply: {err=} or {ok=}. As Redis 7.0 reads
 * the text: a leading dash is dropped; then a text with a space has its
 * code (its first word, even an empty one), one without gets "ERR ". */
static int redis_error_reply(lua_State *L)
{
	if (lua_gettop(L) != 1 || lua_type(L, 1) != LUA_TSTRING)
		return raise_error_unplaced(L, "ERR wrong number or type of arguments");
	size_t len;
	const char *s = lua_tolstring(L, 1, &len);
	if (len && s[0] == '-') {
		s++;
		len--;
	}
	while (len && (s[len - 1] == '\r' || s[len - 1] == '\n'))
		len--; /* as Redis trims its ready-made error texts */
	if (memchr(s, ' ', len)) {
		push_error_table(L, s, len);
		return 1;
	}
	lua_newtable(L);
	lua_pushliteral(L, "ERR ");
	lua_pushlstring(L, s, len);
	lua_concat(L, 2);
	lua_setfield(L, -2, "err");
	return 1;
}

static int redis_status_reply(lua_State *L)
{
	if (lua_gettop(L) != 1 || lua_type(L, 1) != LUA_TSTRING)
		return raise_error_unplaced(L, "ERR wrong number or type of arguments");
	lua_newtable(L);
	lua_pushvalue(L, 1);
	lua_setfield(L, -2, "ok");
	return 1;
}

static int redis_sha1hex(lua_State *L)
{
	if (lua_gettop(L) != 1)
		return raise_error(L, "wrong number of arguments");
	size_t len;
	const char *s = lua_tolstring(L, 1, &len);
	char hex[41];
	sha1_hex(s ? s : "", s ? len : 0, hex);
	lua_pushstring(L, hex);
	return 1;
}

static int redis_log(lua_State *L)
{
	int argc = lua_gettop(L);
	if (argc < 2)
		return raise_error(L, "redis.log() requires two arguments or more.");
	if (!lua_isnumber(L, 1))
		return raise_error(L, "First argument must be a number (log level).");
	int level = (int)lua_tonumber(L, 1);
	if (level < 0 || level > 3)
		return raise_error(L, "Invalid debug level.");
	/* The arguments joined by spaces, as Redis logs them. */
	luaL_Buffer b;
	luaL_buffinit(L, &b);
	for (int i = 2; i <= argc; i++) {
		size_t len;
		const char *s = lua_tolstring(L, i, &len);
		if (!s)
			continue;
		if (i > 2)
			luaL_addchar(&b, ' ');
		luaL_addlstring(&b, s, len);
	}
	luaL_pushresult(&b);
	size_t len;
	const char *msg = lua_tolstring(L, -1, &len);
	struct script_vm *vm = vm_of(L);
	vm->host->log(vm->host->arg, level, msg, len);
	return 0;
}

static int redis_setresp(lua_State *L)
{
	if (lua_gettop(L) != 1)
		return raise_error(L, "redis.setresp() requires one argument.");
	int v = (int)lua_tonumber(L, 1);
	if (v != 2 && v != 3)
		return raise_error(L, "RESP version must be 2 or 3.");
	if (v == 3)
		return raise_error(L, "RESP3 replies inside scripts are not supported by rckv; "
				      "scripts see RESP2 replies");
	return 0;
}

/* set_repl, debug, breakpoint: rckv replicates the transaction's effects
 * whatever a script asks, and has no script debugger. */
static int redis_nothing(lua_State *L)
{
	(void)L;
	return 0;
}

static int redis_false(lua_State *L)
{
	lua_pushboolean(L, 0);
	return 1;
}

static int redis_true(lua_State *L)
{
	lua_pushboolean(L, 1);
	return 1;
}

static const luaL_Reg redis_lib[] = {
	{ "call", redis_call },
	{ "pcall", redis_pcall },
	{ "error_reply", redis_error_reply },
	{ "status_reply", redis_status_reply },
	{ "sha1hex", redis_sha1hex },
	{ "log", redis_log },
	{ "setresp", redis_setresp },
	{ "set_repl", redis_nothing },
	{ "replicate_commands", redis_true },
	{ "breakpoint", redis_false },
	{ "debug", redis_nothing },
	{ NULL, NULL },
};

static void set_int(lua_State *L, const char *name, int v)
{
	lua_pushinteger(L, v);
	lua_setfield(L, -2, name);
}

static void open_redis(lua_State *L)
{
	lua_newtable(L);
	luaL_register(L, NULL, redis_lib);
	set_int(L, "LOG_DEBUG", 0);
	set_int(L, "LOG_VERBOSE", 1);
	set_int(L, "LOG_NOTICE", 2);
	set_int(L, "LOG_WARNING", 3);
	set_int(L, "REPL_NONE", 0);
	set_int(L, "REPL_AOF", 1);
	set_int(L, "REPL_SLAVE", 2);
	set_int(L, "REPL_REPLICA", 2);
	set_int(L, "REPL_ALL", 3);
	lua_pushstring(L, SRV_REDIS_VERSION);
	lua_setfield(L, -2, "REDIS_VERSION");
	int maj = 0, min = 0, pat = 0;
	sscanf(SRV_REDIS_VERSION, "%d.%d.%d", &maj, &min, &pat);
	set_int(L, "REDIS_VERSION_NUM", maj << 16 | min << 8 | pat);
}

/* ---- the bit library (LuaBitOp's functions, as Redis embeds them) ---- */

static uint32_t bit_arg(lua_State *L, int i)
{
	/* Numbers wrap modulo 2^32, as LuaBitOp normalizes them. */
	lua_Number n = luaL_checknumber(L, i);
	return (uint32_t)(int64_t)fmod(n, 4294967296.0);
}

static int bit_ret(lua_State *L, uint32_t v)
{
	lua_pushnumber(L, (lua_Number)(int32_t)v);
	return 1;
}

static int bit_tobit(lua_State *L) { return bit_ret(L, bit_arg(L, 1)); }
static int bit_bnot(lua_State *L) { return bit_ret(L, ~bit_arg(L, 1)); }

static int bit_fold(lua_State *L, int op)
{
	uint32_t v = bit_arg(L, 1);
	for (int i = 2, n = lua_gettop(L); i <= n; i++) {
		uint32_t x = bit_arg(L, i);
		v = op == 0 ? v & x : op == 1 ? v | x : v ^ x;
	}
	return bit_ret(L, v);
}

static int bit_band(lua_State *L) { return bit_fold(L, 0); }
static int bit_bor(lua_State *L) { return bit_fold(L, 1); }
static int bit_bxor(lua_State *L) { return bit_fold(L, 2); }

static int bit_shift(lua_State *L, int op)
{
	uint32_t v = bit_arg(L, 1);
	unsigned n = bit_arg(L, 2) & 31;
	switch (op) {
	case 0: v = v << n; break;
	case 1: v = v >> n; break;
	case 2: v = (uint32_t)((int32_t)v >> n); break;
	case 3: v = n ? (v << n) | (v >> (32 - n)) : v; break;
	default: v = n ? (v >> n) | (v << (32 - n)) : v; break;
	}
	return bit_ret(L, v);
}

static int bit_lshift(lua_State *L) { return bit_shift(L, 0); }
static int bit_rshift(lua_State *L) { return bit_shift(L, 1); }
static int bit_arshift(lua_State *L) { return bit_shift(L, 2); }
static int bit_rol(lua_State *L) { return bit_shift(L, 3); }
static int bit_ror(lua_State *L) { return bit_shift(L, 4); }

static int bit_bswap(lua_State *L)
{
	uint32_t v = bit_arg(L, 1);
	return bit_ret(L, (v >> 24) | ((v >> 8) & 0xff00) | ((v & 0xff00) << 8) | (v << 24));
}

static int bit_tohex(lua_State *L)
{
	uint32_t v = bit_arg(L, 1);
	long long n = lua_isnone(L, 2) ? 8 : (int32_t)bit_arg(L, 2);
	const char *digits = "0123456789abcdef";
	if (n < 0) {
		n = -n;
		digits = "0123456789ABCDEF";
	}
	if (n > 8)
		n = 8;
	char buf[8];
	for (int i = (int)n - 1; i >= 0; i--, v >>= 4)
		buf[i] = digits[v & 15];
	lua_pushlstring(L, buf, (size_t)n);
	return 1;
}

static const luaL_Reg bit_lib[] = {
	{ "tobit", bit_tobit }, { "bnot", bit_bnot },   { "band", bit_band },
	{ "bor", bit_bor },     { "bxor", bit_bxor },   { "lshift", bit_lshift },
	{ "rshift", bit_rshift }, { "arshift", bit_arshift }, { "rol", bit_rol },
	{ "ror", bit_ror },     { "bswap", bit_bswap }, { "tohex", bit_tohex },
	{ NULL, NULL },
};

/* ---- cjson ---- */

/* Nodes a size estimate visits before it gives up (a table that holds
 * itself would otherwise be walked without end). */
#define JSON_WALK_MAX 4000000
/* The longest string encode takes: with the text bounded by 1 GB, its
 * 6 * 128 MB reservation keeps cjson's int sizes below 2 GB. */
#define JSON_STRING_MAX (128u << 20)

/* Add to *bytes an upper bound of the JSON text of the value at idx; -1
 * once it passes limit or the walk is too long. Raw access only. */
static int json_bound(lua_State *L, int idx, int depth, size_t *bytes, size_t *nodes, size_t limit)
{
	if (++*nodes > JSON_WALK_MAX)
		return -1;
	if (lua_type(L, idx) == LUA_TSTRING) {
		/* cjson escapes control bytes as \u00XX, quotes, backslashes
		 * and slashes with a backslash */
		size_t len;
		const unsigned char *s = (const unsigned char *)lua_tolstring(L, idx, &len);
		if (len > JSON_STRING_MAX)
			return -1; /* cjson reserves len * 6 + 2 bytes, in an int */
		*bytes += len + 2;
		for (size_t i = 0; i < len; i++)
			*bytes += s[i] < 0x20 ? 5 : s[i] == '"' || s[i] == '\\' || s[i] == '/';
	} else if (lua_type(L, idx) == LUA_TTABLE && depth < 1000 && lua_checkstack(L, 3)) {
		if (idx < 0)
			idx = lua_gettop(L) + idx + 1;
		*bytes += 2;
		lua_pushnil(L);
		while (lua_next(L, idx)) {
			if (json_bound(L, -2, depth + 1, bytes, nodes, limit) != 0 ||
			    json_bound(L, -1, depth + 1, bytes, nodes, limit) != 0) {
				lua_pop(L, 2);
				return -1;
			}
			lua_pop(L, 1);
		}
	} else {
		*bytes += 32;
	}
	return *bytes > limit ? -1 : 0;
}

/*
 * cjson.encode, upvalue 1 the library's: lua-cjson 2.1.0 sizes its buffer
 * in int, so a text past 2 GB overflows it (CVE-2022-24834, which Redis
 * patched in its copy and Debian's has not), and the buffer is malloc'd
 * beside the Lua heap, out of script-memory-limit's sight. A value whose
 * text could pass the script's memory limit (or 1 GB) is refused first.
 */
static int cjson_encode_bounded(lua_State *L)
{
	luaL_checkany(L, 1);
	lua_settop(L, 1);
	size_t limit = vm_of(L)->mem_limit;
	if (!limit || limit > (1u << 30))
		limit = 1u << 30;
	size_t bytes = 0, nodes = 0;
	if (json_bound(L, 1, 0, &bytes, &nodes, limit) != 0)
		return luaL_error(L, "cjson.encode: the JSON text could exceed script-memory-limit "
				     "(%d bytes)", (int)limit);
	lua_pushvalue(L, lua_upvalueindex(1));
	lua_insert(L, 1);
	if (lua_pcall(L, 1, 1, 0) != 0) {
		/* Its error where the script called encode, as when called direct. */
		if (lua_isstring(L, -1)) {
			luaL_where(L, 1);
			lua_insert(L, -2);
			lua_concat(L, 2);
		}
		return lua_error(L);
	}
	return 1;
}

/*
 * The cjson table scripts see: encode (bounded), decode and null. The
 * library's settings (decode_max_depth, encode_number_precision, ...) are
 * left out: a VM serves many scripts, and one script's setting would
 * change the next one's results (or let it recurse past the stack).
 */
static void open_cjson(lua_State *L)
{
	lua_pushcfunction(L, luaopen_cjson);
	lua_call(L, 0, 1);                 /* T */
	lua_getfield(L, -1, "encode_keep_buffer");
	if (lua_isfunction(L, -1)) {       /* free the text's buffer after each encode */
		lua_pushboolean(L, 0);
		lua_call(L, 1, 0);
	} else {
		lua_pop(L, 1);
	}
	lua_newtable(L);                   /* T C */
	lua_getfield(L, -2, "encode");
	lua_pushcclosure(L, cjson_encode_bounded, 1);
	lua_setfield(L, -2, "encode");
	static const char *const kept[] = { "decode", "null", "_NAME", "_VERSION", NULL };
	for (int i = 0; kept[i]; i++) {
		lua_getfield(L, -2, kept[i]);
		lua_setfield(L, -2, kept[i]);
	}
	lua_remove(L, -2);                 /* C */
}

/* ---- the sandbox ---- */

/*
 * pcall as Redis 7 gives it: a Redis error comes back as its message. A
 * stopped script's error is raised again: no pcall, xpcall or
 * coroutine.resume keeps a stopped script running (a loop that catches
 * every error would otherwise never end, and never yield).
 */
static int sandbox_pcall(lua_State *L)
{
	luaL_checkany(L, 1);
	int st = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
	if (st == 0) {
		lua_pushboolean(L, 1);
		lua_insert(L, 1);
		return lua_gettop(L);
	}
	if (vm_of(L)->stopped)
		return lua_error(L);
	if (lua_istable(L, -1)) {
		raw_field(L, -1, "err");
		if (lua_isstring(L, -1))
			lua_replace(L, -2);
		else
			lua_pop(L, 1);
	}
	lua_pushboolean(L, 0);
	lua_insert(L, -2);
	return 2;
}

static int sandbox_xpcall(lua_State *L)
{
	luaL_checkany(L, 2);
	lua_settop(L, 2);
	lua_insert(L, 1); /* handler f */
	int st = lua_pcall(L, 0, LUA_MULTRET, 1);
	if (st != 0 && vm_of(L)->stopped)
		return lua_error(L);
	lua_pushboolean(L, st == 0);
	lua_replace(L, 1);
	return lua_gettop(L);
}

/* loadstring and load, refusing precompiled chunks (svm_compile says
 * why). load's reader is drained into one text first. */
static int sandbox_loadstring(lua_State *L)
{
	size_t len;
	const char *s = luaL_checklstring(L, 1, &len);
	const char *name = luaL_optstring(L, 2, s);
	if (len && s[0] == LUA_SIGNATURE[0]) {
		lua_pushnil(L);
		lua_pushliteral(L, "binary chunks are not allowed in scripts");
		return 2;
	}
	if (luaL_loadbuffer(L, s, len, name) == 0)
		return 1;
	lua_pushnil(L);
	lua_insert(L, -2);
	return 2;
}

static int sandbox_load(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TFUNCTION);
	const char *name = luaL_optstring(L, 2, "=(load)");
	luaL_Buffer b;
	luaL_buffinit(L, &b);
	for (;;) {
		lua_pushvalue(L, 1);
		lua_call(L, 0, 1);
		if (lua_isnil(L, -1)) {
			lua_pop(L, 1);
			break;
		}
		if (!lua_isstring(L, -1))
			return luaL_error(L, "reader function must return a string");
		size_t n;
		lua_tolstring(L, -1, &n);
		if (n == 0) {
			lua_pop(L, 1);
			break;
		}
		luaL_addvalue(&b);
	}
	luaL_pushresult(&b);
	lua_pushcfunction(L, sandbox_loadstring);
	lua_insert(L, -2);
	lua_pushstring(L, name);
	lua_call(L, 2, 2);
	return 2;
}

/* coroutine.resume, upvalue 1 the original. */
static int sandbox_resume(lua_State *L)
{
	int n = lua_gettop(L);
	lua_pushvalue(L, lua_upvalueindex(1));
	lua_insert(L, 1);
	lua_call(L, n, LUA_MULTRET);
	if (vm_of(L)->stopped)
		return raise_stop(L);
	return lua_gettop(L);
}

static int readonly_newindex(lua_State *L)
{
	return luaL_error(L, "Attempt to modify a readonly table");
}

static int globals_index(lua_State *L)
{
	/* upvalue 1: G; arguments: proxy, key */
	lua_pushvalue(L, 2);
	lua_rawget(L, lua_upvalueindex(1));
	if (!lua_isnil(L, -1))
		return 1;
	const char *k = lua_tostring(L, 2);
	return luaL_error(L, "Script attempted to access nonexistent global variable '%s'",
			  k ? k : "?");
}

static bool is_readonly(lua_State *L, int idx)
{
	lua_getfield(L, LUA_REGISTRYINDEX, REG_READONLY);
	lua_pushvalue(L, idx);
	lua_rawget(L, -2);
	bool yes = lua_toboolean(L, -1);
	lua_pop(L, 2);
	return yes;
}

/* The error of rawset and setmetatable on a read-only table: no position,
 * as Redis 7.0 raises it from inside the call. */
static int readonly_error(lua_State *L)
{
	lua_pushliteral(L, "Attempt to modify a readonly table");
	return lua_error(L);
}

/* rawset, refusing the read-only proxies: a field set in one would
 * outlive the script, in its VM. */
static int sandbox_rawset(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	if (is_readonly(L, 1))
		return readonly_error(L);
	luaL_checkany(L, 2);
	luaL_checkany(L, 3);
	lua_settop(L, 3);
	lua_rawset(L, 1);
	lua_pushvalue(L, 1);
	return 1;
}

/* setmetatable, upvalue 1 the original. */
static int sandbox_setmetatable(lua_State *L)
{
	if (lua_istable(L, 1) && is_readonly(L, 1))
		return readonly_error(L);
	int n = lua_gettop(L);
	lua_pushvalue(L, lua_upvalueindex(1));
	lua_insert(L, 1);
	lua_call(L, n, LUA_MULTRET);
	return lua_gettop(L);
}

/* Enter the proxy at the top in REG_READONLY. */
static void note_readonly(lua_State *L)
{
	lua_getfield(L, LUA_REGISTRYINDEX, REG_READONLY);
	lua_pushvalue(L, -2);
	lua_pushboolean(L, 1);
	lua_rawset(L, -3);
	lua_pop(L, 1);
}

/* Replace the table at the top with a read-only proxy of it. */
static void make_readonly(lua_State *L)
{
	lua_newtable(L);               /* t proxy */
	lua_newtable(L);               /* t proxy mt */
	lua_pushvalue(L, -3);
	lua_setfield(L, -2, "__index");
	lua_pushcfunction(L, readonly_newindex);
	lua_setfield(L, -2, "__newindex");
	lua_pushliteral(L, "readonly");
	lua_setfield(L, -2, "__metatable");
	lua_setmetatable(L, -2);       /* t proxy */
	lua_remove(L, -2);
	note_readonly(L);
}

static void open_lib(lua_State *L, const char *name, lua_CFunction open)
{
	lua_pushcfunction(L, open);
	lua_pushstring(L, name);
	lua_call(L, 1, 0);
}

/* Runs protected (svm_open): Lua raises on out of memory. */
static int sandbox_setup(lua_State *L)
{
	struct script_vm *vm = lua_touserdata(L, 1);
	lua_pushlightuserdata(L, vm);
	lua_setfield(L, LUA_REGISTRYINDEX, REG_VM);
	lua_newtable(L);
	lua_setfield(L, LUA_REGISTRYINDEX, REG_FUNCS);
	lua_newtable(L);                    /* weak keys: { __mode = "k" } */
	lua_newtable(L);
	lua_pushliteral(L, "k");
	lua_setfield(L, -2, "__mode");
	lua_setmetatable(L, -2);
	lua_setfield(L, LUA_REGISTRYINDEX, REG_READONLY);

	open_lib(L, "", luaopen_base);
	open_lib(L, LUA_TABLIBNAME, luaopen_table);
	open_lib(L, LUA_STRLIBNAME, luaopen_string);
	open_lib(L, LUA_MATHLIBNAME, luaopen_math);

	lua_pushvalue(L, LUA_GLOBALSINDEX); /* G */
	static const char *const removed[] = { "dofile", "loadfile", "print", "getfenv",
					       "setfenv", "newproxy", "gcinfo", NULL };
	for (int i = 0; removed[i]; i++) {
		lua_pushnil(L);
		lua_setfield(L, -2, removed[i]);
	}
	lua_pushcfunction(L, sandbox_pcall);
	lua_setfield(L, -2, "pcall");
	lua_pushcfunction(L, sandbox_xpcall);
	lua_setfield(L, -2, "xpcall");
	lua_pushcfunction(L, sandbox_rawset);
	lua_setfield(L, -2, "rawset");
	lua_pushcfunction(L, sandbox_loadstring);
	lua_setfield(L, -2, "loadstring");
	lua_pushcfunction(L, sandbox_load);
	lua_setfield(L, -2, "load");
	lua_getfield(L, -1, "setmetatable");
	lua_pushcclosure(L, sandbox_setmetatable, 1);
	lua_setfield(L, -2, "setmetatable");
	lua_getfield(L, -1, "coroutine");
	lua_getfield(L, -1, "resume");
	lua_pushcclosure(L, sandbox_resume, 1);
	lua_setfield(L, -2, "resume");
	lua_pop(L, 1);
	open_redis(L);
	lua_setfield(L, -2, "redis");
	lua_newtable(L);
	luaL_register(L, NULL, bit_lib);
	lua_setfield(L, -2, "bit");
	open_cjson(L);
	lua_setfield(L, -2, "cjson");

	static const char *const libs[] = { "string", "math", "table", "coroutine", "redis",
					    "bit", "cjson", NULL };
	for (int i = 0; libs[i]; i++) {
		lua_getfield(L, -1, libs[i]);
		make_readonly(L);
		lua_setfield(L, -2, libs[i]);
	}
	/* Strings' methods ("x":rep(2)) through the read-only string too,
	 * and the strings' metatable itself read-only: getmetatable("")
	 * gives its proxy (a method planted there would run inside every
	 * later script of the VM). */
	lua_pushliteral(L, "");
	lua_getmetatable(L, -1);           /* "" mt */
	lua_getfield(L, -3, "string");
	lua_setfield(L, -2, "__index");
	lua_pushvalue(L, -1);
	make_readonly(L);                  /* "" mt proxy */
	lua_setfield(L, -2, "__metatable");
	lua_pop(L, 2);

	/* The proxy P of G becomes the state's globals; G._G is P. */
	lua_newtable(L);                    /* G P */
	lua_newtable(L);                    /* G P mt */
	lua_pushvalue(L, -3);
	lua_pushcclosure(L, globals_index, 1);
	lua_setfield(L, -2, "__index");
	lua_pushcfunction(L, readonly_newindex);
	lua_setfield(L, -2, "__newindex");
	lua_pushliteral(L, "readonly");
	lua_setfield(L, -2, "__metatable");
	lua_setmetatable(L, -2);            /* G P */
	note_readonly(L);
	lua_pushvalue(L, -1);
	lua_setfield(L, -3, "_G");
	lua_pushvalue(L, -2);
	lua_setfield(L, LUA_REGISTRYINDEX, REG_GLOBALS);
	lua_replace(L, LUA_GLOBALSINDEX);   /* G */
	lua_pop(L, 1);
	return 0;
}

struct script_vm *svm_open(void)
{
	struct script_vm *vm = calloc(1, sizeof(*vm));
	if (!vm)
		return NULL;
	vm->cap = SIZE_MAX;
	resp_w_init(&vm->reply, 2);
	vm->L = lua_newstate(vm_alloc, vm);
	if (!vm->L || lua_cpcall(vm->L, sandbox_setup, vm) != 0) {
		svm_close(vm);
		return NULL;
	}
	return vm;
}

void svm_close(struct script_vm *vm)
{
	if (!vm)
		return;
	if (vm->L)
		lua_close(vm->L);
	resp_w_free(&vm->reply);
	free(vm);
}

size_t svm_used(const struct script_vm *vm)
{
	return vm->used;
}

uint64_t svm_gen(const struct script_vm *vm)
{
	return vm->gen;
}

void svm_forget(struct script_vm *vm, uint64_t gen)
{
	lua_newtable(vm->L);
	lua_setfield(vm->L, LUA_REGISTRYINDEX, REG_FUNCS);
	lua_gc(vm->L, LUA_GCCOLLECT, 0);
	vm->gen = gen;
}

/* Push REG_FUNCS[sha]. */
static void push_func(lua_State *L, const char *sha)
{
	lua_getfield(L, LUA_REGISTRYINDEX, REG_FUNCS);
	lua_getfield(L, -1, sha);
	lua_remove(L, -2);
}

bool svm_compiled(struct script_vm *vm, const char *sha)
{
	push_func(vm->L, sha);
	bool yes = lua_isfunction(vm->L, -1);
	lua_pop(vm->L, 1);
	return yes;
}

/* A reader that gives "--" in place of a shebang's "#!", then the body. */
struct chunk {
	const char *body;
	size_t len;
	int part;
};

static const char *chunk_read(lua_State *L, void *ud, size_t *size)
{
	(void)L;
	struct chunk *c = ud;
	bool shebang = c->len >= 2 && c->body[0] == '#' && c->body[1] == '!';
	switch (c->part++) {
	case 0:
		if (shebang) {
			*size = 2;
			return "--";
		}
		*size = c->len;
		return c->body;
	case 1:
		if (shebang) {
			*size = c->len - 2;
			return c->body + 2;
		}
		return NULL;
	default:
		return NULL;
	}
}

int svm_compile(struct script_vm *vm, const char *sha, const char *body, size_t len,
		char *err, size_t errlen)
{
	lua_State *L = vm->L;
	if (svm_compiled(vm, sha))
		return 0;
	if (len && body[0] == LUA_SIGNATURE[0]) {
		/* Lua 5.1 runs precompiled chunks unverified: crafted bytecode
		 * reads and writes memory at will. Redis's Lua refuses them too. */
		snprintf(err, errlen, "ERR Error compiling script (new function): user_script:1: "
			 "unexpected symbol near 'char(27)'");
		return -1;
	}
	struct chunk c = { .body = body, .len = len };
	if (lua_load(L, chunk_read, &c, "@user_script") != 0) {
		const char *msg = lua_tostring(L, -1);
		snprintf(err, errlen, "ERR Error compiling script (new function): %s",
			 msg ? msg : "out of memory");
		lua_pop(L, 1);
		return -1;
	}
	lua_getfield(L, LUA_REGISTRYINDEX, REG_FUNCS);
	lua_pushvalue(L, -2);
	lua_setfield(L, -2, sha);
	lua_pop(L, 2);
	return 0;
}

static void count_hook(lua_State *L, lua_Debug *ar)
{
	(void)ar;
	struct script_vm *vm = vm_of(L);
	if (vm->stopped || vm->host->tick(vm->host->arg) == SCRIPT_STOP) {
		vm->stopped = true;
		raise_stop(L);
	}
}

/* KEYS or ARGV in G. */
static void set_array(lua_State *L, const char *name, const struct resp_arg *a, int n)
{
	lua_getfield(L, LUA_REGISTRYINDEX, REG_GLOBALS);
	lua_createtable(L, n, 0);
	for (int i = 0; i < n; i++) {
		lua_pushlstring(L, a[i].p, a[i].len);
		lua_rawseti(L, -2, i + 1);
	}
	lua_setfield(L, -2, name);
	lua_pop(L, 1);
}

/* The reply of a script that raised the error at the top. */
static void error_reply(lua_State *L, const char *sha, struct resp_w *out)
{
	size_t len;
	const char *msg;
	if (!lua_istable(L, -1)) { /* out of memory: no handler ran */
		msg = lua_tolstring(L, -1, &len);
		resp_errorf(out, "ERR %s", msg ? msg : "unknown error");
		return;
	}
	msg = table_string(L, -1, "err", &len);
	size_t slen;
	const char *source = table_string(L, -1, "source", &slen);
	raw_field(L, -1, "line");
	int line = (int)lua_tointeger(L, -1);
	lua_pop(L, 1);
	luaL_Buffer b;
	luaL_buffinit(L, &b);
	luaL_addlstring(&b, msg ? msg : "ERR unknown error", msg ? len : 17);
	if (source && line > 0) {
		char where[128];
		snprintf(where, sizeof(where), " script: %s, on %.*s:%d.", sha,
			 (int)(slen < 64 ? slen : 64), source, line);
		luaL_addstring(&b, where);
	}
	luaL_pushresult(&b);
	msg = lua_tolstring(L, -1, &len);
	reply_line(out, '-', msg, len);
	lua_pop(L, 1);
}

int svm_run(struct script_vm *vm, const char *sha, const struct resp_arg *keys, int nkeys,
	    const struct resp_arg *args, int nargs, size_t mem_limit,
	    const struct script_host *host, struct resp_w *out)
{
	lua_State *L = vm->L;
	int base = lua_gettop(L);
	vm->host = host;
	vm->stopped = false;
	set_array(L, "KEYS", keys, nkeys);
	set_array(L, "ARGV", args, nargs);
	lua_pushcfunction(L, err_handler);
	push_func(L, sha);
	vm->cap = vm->used + mem_limit;
	vm->mem_limit = mem_limit;
	lua_sethook(L, count_hook, LUA_MASKCOUNT, SCRIPT_TICK_INSNS);
	int st = lua_pcall(L, 0, 1, base + 1);
	lua_sethook(L, NULL, 0, 0);
	vm->cap = SIZE_MAX;

	int rc;
	if (vm->stopped) {
		rc = SVM_STOPPED;
	} else if (st == 0) {
		to_resp(L, -1, out, 0);
		rc = SVM_OK;
	} else if (st == LUA_ERRMEM) {
		resp_errorf(out, "ERR script used more than script-memory-limit (%zu bytes): "
			    "not enough memory", mem_limit);
		rc = SVM_ERROR;
	} else {
		error_reply(L, sha, out);
		rc = SVM_ERROR;
	}
	lua_settop(L, base);
	set_array(L, "KEYS", NULL, 0);
	set_array(L, "ARGV", NULL, 0);
	lua_gc(L, LUA_GCSTEP, 0);
	vm->host = NULL;
	return rc;
}
