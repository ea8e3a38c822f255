/*
 * script.c: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT on rckv's
 * transactions (DESIGN.md section 10).
 *
 * An EVAL is an ordinary transactional command (not CMD_NOTXN): dispatch
 * declares its KEYS through the command table's getkeys (script_getkeys)
 * and runs it in one transaction, so the KEYS are fetched in one batch
 * per node before the script starts, and a key the script reaches that it
 * did not declare is fetched when reached (another fetch round). Inside
 * MULTI it runs in EXEC's transaction, as any queued command.
 *
 * How a script ends:
 *  - it returns: its value is the reply, and the transaction commits;
 *  - it raises an error (an uncaught redis.call error, a Lua error, its
 *    memory bound): the reply is the error, and everything the script
 *    wrote is undone (srv_call's savepoint, through cmd_ctx.failed). This
 *    is where rckv differs from Redis, which keeps the writes made before
 *    the error;
 *  - a CC abort inside redis.call stops it (the VM raises an error that
 *    pcall cannot keep, script_vm.c), the handler returns CC_ABORT, and
 *    the executor reruns the whole transaction, the script from its
 *    start: the client sees one run. So a script's only output is its
 *    return value;
 *  - a command that fails inside the transaction machinery (a full
 *    MemStore, a value over max-value-bytes, a node that does not answer)
 *    may have written part of its keys, and savepoints do not nest: the
 *    script ends with that command's error, everything undone, even when
 *    it called the command through pcall;
 *  - SCRIPT KILL, or busy-reply-threshold passing, stops it the same way,
 *    and it replies with an error that says so, its writes undone. Redis
 *    refuses to kill a script that wrote; rckv can, as nothing is written
 *    before the commit.
 *
 * A script that runs long does not block its worker: the VM's count hook
 * yields the coroutine every SCRIPT_YIELD_NS, so the worker's other
 * clients are served, and its fabric waits yield as any transaction's do.
 *
 * Commands a script may call: those that run inside a transaction, those
 * that read nothing of the keyspace (PING, ECHO, TIME, LASTSAVE, MOVE),
 * and those that read it through the caller's transaction when given one
 * (OBJECT, RANDOMKEY: CMD_SCRIPT_NOTXN). The rest (CMD_NOTXN: CONFIG,
 * INFO, KEYS, SCAN, FLUSHALL, ...) are refused with an error, since they
 * would not be part of the script's transaction.
 */
#include "server/script.h"

#include <ck_pr.h>
#include <ctype.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cc/exec.h"
#include "cc/sched.h"
#include "cc/txn.h"
#include "server/acl.h"
#include "server/client.h"
#include "server/command.h"
#include "server/declare.h"
#include "server/dispatch.h"
#include "server/log.h"
#include "server/monitor.h"
#include "server/node.h"
#include "server/notify.h"
#include "server/script_vm.h"
#include "server/sha1.h"
#include "server/strutil.h"
#include "server/worker.h"

#define SCRIPT_BUCKETS 1024
#define SCRIPT_POOL_IDLE 64                 /* VMs a worker keeps for reuse */
#define SCRIPT_VM_KEEP_BYTES (4u << 20)     /* a VM grown past it is closed after its run */
#define SCRIPT_YIELD_NS 2000000ull          /* a running script lets others run every 2 ms */

/* Shebang flags ("#!lua flags=..."), as Redis 7 names them. */
enum {
	SF_NO_WRITES = 1u << 0,
	SF_ALLOW_OOM = 1u << 1,
	SF_ALLOW_STALE = 1u << 2,
	SF_NO_CLUSTER = 1u << 3,
	SF_CROSS_SLOT = 1u << 4,
};

struct script_entry {
	struct script_entry *next;
	uint32_t flags;
	size_t len;
	char sha[41];
	char body[];
};

/*
 * The node's cache. The table and the counts are guarded by mu. gen is
 * bumped by SCRIPT FLUSH (ck_pr, read by workers when they lend a VM: a
 * VM of an older generation forgets its compiled functions); kills by
 * SCRIPT KILL (running scripts compare it with its value at their start);
 * running counts the scripts in progress (ck_pr_inc/dec).
 */
struct script_cache {
	pthread_mutex_t mu;
	struct script_entry *buckets[SCRIPT_BUCKETS];
	uint64_t count, bytes;
	uint64_t gen, kills, running;
};

struct script_pool {
	struct script_vm *idle[SCRIPT_POOL_IDLE];
	int nidle;
};

/* ---- the cache ---- */

struct script_cache *script_cache_create(void)
{
	struct script_cache *sc = calloc(1, sizeof(*sc));
	if (sc)
		pthread_mutex_init(&sc->mu, NULL);
	return sc;
}

static void cache_clear_locked(struct script_cache *sc)
{
	for (int i = 0; i < SCRIPT_BUCKETS; i++) {
		struct script_entry *e = sc->buckets[i];
		while (e) {
			struct script_entry *next = e->next;
			free(e);
			e = next;
		}
		sc->buckets[i] = NULL;
	}
	sc->count = sc->bytes = 0;
}

void script_cache_free(struct script_cache *sc)
{
	if (!sc)
		return;
	cache_clear_locked(sc);
	pthread_mutex_destroy(&sc->mu);
	free(sc);
}

void script_cache_stats(struct script_cache *sc, uint64_t *count, uint64_t *bytes)
{
	pthread_mutex_lock(&sc->mu);
	*count = sc->count;
	*bytes = sc->bytes;
	pthread_mutex_unlock(&sc->mu);
}

static struct script_entry **bucket_of(struct script_cache *sc, const char *sha)
{
	unsigned h = 0;
	for (int i = 0; i < 8; i++)
		h = h * 16 + (unsigned)(isdigit((unsigned char)sha[i]) ? sha[i] - '0' : sha[i] - 'a' + 10);
	return &sc->buckets[h % SCRIPT_BUCKETS];
}

static struct script_entry *find_locked(struct script_cache *sc, const char *sha)
{
	for (struct script_entry *e = *bucket_of(sc, sha); e; e = e->next)
		if (memcmp(e->sha, sha, 40) == 0)
			return e;
	return NULL;
}

/* Add the script unless cached. -1 if out of memory. */
static int cache_add(struct script_cache *sc, const char *sha, const char *body, size_t len,
		     uint32_t flags)
{
	int rc = 0;
	pthread_mutex_lock(&sc->mu);
	if (!find_locked(sc, sha)) {
		struct script_entry *e = malloc(sizeof(*e) + len + 1);
		if (e) {
			memcpy(e->sha, sha, 41);
			memcpy(e->body, body, len);
			e->body[len] = '\0';
			e->len = len;
			e->flags = flags;
			struct script_entry **b = bucket_of(sc, sha);
			e->next = *b;
			*b = e;
			sc->count++;
			sc->bytes += len;
		} else {
			rc = -1;
		}
	}
	pthread_mutex_unlock(&sc->mu);
	return rc;
}

/* The script's flags, and a malloc'd copy of its body if body != NULL.
 * False when it is not cached. */
static bool cache_get(struct script_cache *sc, const char *sha, uint32_t *flags, char **body,
		      size_t *len)
{
	pthread_mutex_lock(&sc->mu);
	struct script_entry *e = find_locked(sc, sha);
	if (e) {
		*flags = e->flags;
		if (body) {
			*body = malloc(e->len + 1);
			if (*body) {
				memcpy(*body, e->body, e->len + 1);
				*len = e->len;
			}
		}
	}
	pthread_mutex_unlock(&sc->mu);
	return e != NULL && (!body || *body);
}

/* ---- a worker's pool of VMs ---- */

struct script_pool *script_pool_create(void)
{
	return calloc(1, sizeof(struct script_pool));
}

void script_pool_free(struct script_pool *sp)
{
	if (!sp)
		return;
	for (int i = 0; i < sp->nidle; i++)
		svm_close(sp->idle[i]);
	free(sp);
}

static struct script_vm *pool_take(struct script_pool *sp, struct script_cache *sc)
{
	struct script_vm *vm = sp->nidle ? sp->idle[--sp->nidle] : svm_open();
	uint64_t gen = ck_pr_load_64(&sc->gen);
	if (vm && svm_gen(vm) != gen)
		svm_forget(vm, gen);
	return vm;
}

static void pool_give(struct script_pool *sp, struct script_vm *vm)
{
	if (sp->nidle == SCRIPT_POOL_IDLE || svm_used(vm) > SCRIPT_VM_KEEP_BYTES)
		svm_close(vm);
	else
		sp->idle[sp->nidle++] = vm;
}

/* ---- keys and arguments ---- */

/* EVAL's numkeys, or a reply saying why it is not one (false). */
static bool parse_numkeys(struct cmd_ctx *c, long long *numkeys)
{
	if (srv_str2ll(c->argv[2].p, c->argv[2].len, numkeys) != 0) {
		cmd_reply_not_int(c);
		return false;
	}
	if (*numkeys > c->argc - 3) {
		resp_error(c->out, "ERR Number of keys can't be greater than number of args");
		return false;
	}
	if (*numkeys < 0) {
		resp_error(c->out, "ERR Number of keys can't be negative");
		return false;
	}
	return true;
}

int script_getkeys(int argc, const struct resp_arg *argv, int *idx, int max)
{
	long long nk;
	if (argc < 3 || srv_str2ll(argv[2].p, argv[2].len, &nk) != 0 || nk < 0 || nk > argc - 3)
		return 0;
	int n = 0;
	for (int i = 3; i < 3 + nk && n < max; i++)
		idx[n++] = i;
	return n;
}

/*
 * The shebang, Redis 7's: "#!lua" then options; only flags=a,b,... is
 * known. Writes the error reply and returns -1 for another engine, an
 * unknown option or an unknown flag.
 */
static int parse_shebang(const char *body, size_t len, uint32_t *flags, struct resp_w *out)
{
	static const struct { const char *name; uint32_t flag; } names[] = {
		{ "no-writes", SF_NO_WRITES },     { "allow-oom", SF_ALLOW_OOM },
		{ "allow-stale", SF_ALLOW_STALE }, { "no-cluster", SF_NO_CLUSTER },
		{ "allow-cross-slot-keys", SF_CROSS_SLOT },
	};
	*flags = 0;
	if (len < 2 || body[0] != '#' || body[1] != '!')
		return 0;
	const char *eol = memchr(body, '\n', len);
	size_t llen = eol ? (size_t)(eol - body) : len;
	if (llen && body[llen - 1] == '\r')
		llen--;
	const char *p = body, *end = body + llen;
	const char *sp = memchr(p, ' ', llen);
	const char *engine_end = sp ? sp : end;
	if (engine_end - p != 5 || memcmp(p, "#!lua", 5) != 0) {
		resp_errorf(out, "ERR Unexpected engine in script shebang: %.*s",
			    (int)(engine_end - p < 128 ? engine_end - p : 128), p);
		return -1;
	}
	for (p = engine_end; p < end;) {
		while (p < end && *p == ' ')
			p++;
		const char *w = p;
		while (p < end && *p != ' ')
			p++;
		size_t wl = (size_t)(p - w);
		if (wl == 0)
			break;
		if (wl < 6 || memcmp(w, "flags=", 6) != 0) {
			resp_errorf(out, "ERR Unknown lua shebang option: %.*s",
				    (int)(wl < 128 ? wl : 128), w);
			return -1;
		}
		/* flags= alone sets none; an empty flag between commas is an error */
		for (const char *f = w + 6; f < p || (f == p && f > w + 6 && f[-1] == ',');) {
			const char *comma = memchr(f, ',', (size_t)(p - f));
			const char *fe = comma ? comma : p;
			size_t fl = (size_t)(fe - f);
			bool known = false;
			for (size_t i = 0; !known && i < sizeof(names) / sizeof(names[0]); i++)
				if (strlen(names[i].name) == fl && memcmp(names[i].name, f, fl) == 0) {
					*flags |= names[i].flag;
					known = true;
				}
			if (!known) {
				resp_errorf(out, "ERR Unexpected flag in script shebang: %.*s",
					    (int)(fl < 128 ? fl : 128), f);
				return -1;
			}
			f = fe + (comma ? 1 : 0);
		}
	}
	return 0;
}

/* ---- a run ---- */

enum { STOP_NONE, STOP_ABORT, STOP_KILLED, STOP_TIMEOUT, STOP_FAILED };

struct script_exec {
	struct cmd_ctx *c;
	struct script_cache *sc;
	bool readonly;
	int stop;                 /* STOP_* */
	uint64_t start_ns, yield_ns;
	uint64_t kills;           /* sc->kills at the start */
	long long limit_ms;       /* busy-reply-threshold; 0: none */
	char failure[256];        /* STOP_FAILED: the command's error */
};

/* SCRIPT KILL or the time limit: SCRIPT_STOP, with the reason in x->stop. */
static int exec_check(struct script_exec *x, uint64_t now)
{
	if (ck_pr_load_64(&x->sc->kills) != x->kills)
		x->stop = STOP_KILLED;
	else if (x->limit_ms > 0 && now - x->start_ns > (uint64_t)x->limit_ms * 1000000u)
		x->stop = STOP_TIMEOUT;
	return x->stop ? SCRIPT_STOP : 0;
}

static int host_tick(void *arg)
{
	struct script_exec *x = arg;
	uint64_t now = sched_now_ns();
	if (exec_check(x, now))
		return SCRIPT_STOP;
	if (now - x->yield_ns >= SCRIPT_YIELD_NS && sched_in_coro(x->c->w->sched)) {
		sched_sleep(x->c->w->sched, 0);
		x->yield_ns = sched_now_ns();
	}
	return 0;
}

/*
 * A command of several keys that the script did not declare (MGET, MSET,
 * DEL of computed names) fetches them in one round, one batch per node,
 * before it runs (RCC's further fetch round, cc_fetch_more), rather than
 * one round per key as it reaches them. Declared keys are left as they
 * are; a lone key is fetched when reached, in the same one round. An
 * error other than an abort is met again by the command itself.
 */
static int fetch_keys(struct script_exec *x, const struct cmd_def *def, int argc,
		      const struct resp_arg *argv)
{
	if (def->first_key <= 0 && !def->getkeys)
		return CC_OK;
	struct srv_decl d;
	srv_decl_init(&d);
	srv_decl_command(&d, def, argc, argv);
	int rc = d.n >= 2 ? cc_fetch_more(x->c->txn, d.keys, d.n) : CC_OK;
	srv_decl_free(&d);
	return rc == CC_ABORT ? CC_ABORT : CC_OK;
}

static int host_call(void *arg, int argc, struct resp_arg *argv, struct resp_w *out)
{
	struct script_exec *x = arg;
	struct cmd_ctx *c = x->c;
	if (exec_check(x, sched_now_ns()))
		return SCRIPT_STOP;
	const struct cmd_def *def = cmd_lookup(argv[0].p, argv[0].len);
	if (def && def->subcommands)
		def = argc >= 2 ? cmd_lookup_sub(def, argv[1].p, argv[1].len) : NULL;
	if (!def) {
		resp_error(out, "ERR Unknown Redis command called from script");
		return 0;
	}
	if (def->arity > 0 ? argc != def->arity : argc < -def->arity) {
		resp_error(out, "ERR Wrong number of args calling Redis command from script");
		return 0;
	}
	if (def->flags & CMD_NOSCRIPT) {
		resp_error(out, "ERR This Redis command is not allowed from script");
		return 0;
	}
	if (cmd_reserved_key(def, argc, argv)) {
		resp_error(out, CMD_RESERVED_KEY_ERR);
		return 0;
	}
	if ((def->flags & CMD_NOTXN) && !(def->flags & CMD_SCRIPT_NOTXN)) {
		resp_errorf(out, "ERR This Redis command is not allowed from script in rckv: "
			    "'%s' does not run inside the script's transaction", def->name);
		return 0;
	}
	if (x->readonly && (def->flags & CMD_WRITE)) {
		resp_error(out, "ERR Write commands are not allowed from read-only scripts.");
		return 0;
	}
	if (acl_script_refuse(c->w, c->cl, out, def, argc, argv))
		return 0; /* the user's permissions (server/acl.h) */
	if (fetch_keys(x, def, argc, argv) == CC_ABORT) {
		x->stop = STOP_ABORT;
		return SCRIPT_STOP;
	}
	/* Not srv_call: its savepoint would replace EVAL's own (savepoints do
	 * not nest, cc/txn.h), and EVAL's must undo the whole script. */
	struct cmd_ctx qc = { .node = c->node, .w = c->w, .cl = c->cl, .txn = c->txn,
			      .argc = argc, .argv = argv, .out = out };
	struct notify_pre np;
	notify_pre(&qc, def, &np); /* keyspace notifications: server/notify.h */
	if (monitor_on(c->node)) /* as Redis: before EVAL's own line, from "lua" */
		monitor_feed(c->node, c->w, "lua", def, argc, argv);
	if (def->fn(&qc) == CC_ABORT) {
		x->stop = STOP_ABORT;
		return SCRIPT_STOP;
	}
	if (qc.failed) {
		/* The command may have written part of its keys: the script
		 * ends with its error, everything undone. */
		size_t len = out->len > 3 ? out->len - 3 : 0;
		if (len >= sizeof(x->failure))
			len = sizeof(x->failure) - 1;
		memcpy(x->failure, out->p + 1, len);
		x->failure[len] = '\0';
		x->stop = STOP_FAILED;
		return SCRIPT_STOP;
	}
	notify_post(&qc, def, &np);
	return 0;
}

static void host_log(void *arg, int level, const char *msg, size_t len)
{
	struct script_exec *x = arg;
	srv_log(x->c->node, level, "script: %.*s", (int)(len < 4096 ? len : 4096), msg);
}

/* The 40 hex digits of argv[1] in lower case; false if it is not 40 long. */
static bool sha_arg(const struct resp_arg *a, char sha[41])
{
	if (a->len != 40)
		return false;
	for (int i = 0; i < 40; i++)
		sha[i] = (char)tolower((unsigned char)a->p[i]);
	sha[40] = '\0';
	return true;
}

static void reply_stopped(struct cmd_ctx *c, const struct script_exec *x)
{
	uint64_t ran_ms = (sched_now_ns() - x->start_ns) / 1000000u;
	if (x->stop == STOP_FAILED)
		resp_errorf(c->out, "%s (in a script: nothing it wrote was kept)", x->failure);
	else if (x->stop == STOP_KILLED)
		resp_error(c->out, "ERR Script killed by user with SCRIPT KILL; nothing it "
			   "wrote was kept");
	else
		resp_errorf(c->out, "ERR Script killed: it ran %llu ms, past busy-reply-threshold "
			    "(%lld ms); nothing it wrote was kept",
			    (unsigned long long)ran_ms, x->limit_ms);
}

static int eval_generic(struct cmd_ctx *c, bool by_sha, bool readonly)
{
	struct script_cache *sc = c->node->scripts;
	long long numkeys;
	if (!parse_numkeys(c, &numkeys))
		return 0;
	char sha[41];
	uint32_t flags = 0;
	if (by_sha) {
		if (!sha_arg(&c->argv[1], sha) || !cache_get(sc, sha, &flags, NULL, NULL)) {
			resp_error(c->out, "NOSCRIPT No matching script. Please use EVAL.");
			return 0;
		}
	} else {
		if (parse_shebang(c->argv[1].p, c->argv[1].len, &flags, c->out) != 0)
			return 0;
		sha1_hex(c->argv[1].p, c->argv[1].len, sha);
	}

	struct script_vm *vm = pool_take(c->w->scripts, sc);
	if (!vm) {
		resp_error(c->out, "ERR out of memory creating the Lua interpreter");
		return 0;
	}
	if (!svm_compiled(vm, sha)) {
		char *copy = NULL;
		const char *body = c->argv[1].p;
		size_t len = c->argv[1].len;
		if (by_sha) {
			if (!cache_get(sc, sha, &flags, &copy, &len)) { /* flushed meanwhile */
				pool_give(c->w->scripts, vm);
				resp_error(c->out, "NOSCRIPT No matching script. Please use EVAL.");
				return 0;
			}
			body = copy;
		}
		char err[1024];
		int rc = svm_compile(vm, sha, body, len, err, sizeof(err));
		free(copy);
		if (rc != 0) {
			pool_give(c->w->scripts, vm);
			resp_error(c->out, err);
			return 0;
		}
	}
	if (!by_sha && cache_add(sc, sha, c->argv[1].p, c->argv[1].len, flags) != 0) {
		pool_give(c->w->scripts, vm);
		resp_error(c->out, "ERR out of memory caching the script");
		return 0;
	}

	struct script_exec x = {
		.c = c,
		.sc = sc,
		.readonly = readonly || (flags & SF_NO_WRITES),
		.start_ns = sched_now_ns(),
		.kills = ck_pr_load_64(&sc->kills),
		.limit_ms = (long long)ck_pr_load_64((uint64_t *)&c->node->cfg.busy_reply_ms),
	};
	x.yield_ns = x.start_ns;
	const struct script_host host = { .call = host_call, .tick = host_tick, .log = host_log,
					  .arg = &x };
	size_t mem = (size_t)ck_pr_load_64((uint64_t *)&c->node->cfg.script_memory_limit);
	size_t mark = c->out->len;
	ck_pr_inc_64(&sc->running);
	int rc = svm_run(vm, sha, c->argv + 3, (int)numkeys, c->argv + 3 + numkeys,
			 c->argc - 3 - (int)numkeys, mem, &host, c->out);
	ck_pr_dec_64(&sc->running);
	pool_give(c->w->scripts, vm);

	switch (rc) {
	case SVM_OK:
		return 0;
	case SVM_ERROR:
		c->failed = true; /* srv_call undoes the script's writes */
		return 0;
	default:
		c->out->len = mark;
		if (x.stop == STOP_ABORT)
			return CC_ABORT;
		c->failed = true;
		reply_stopped(c, &x);
		return 0;
	}
}

int cmd_eval(struct cmd_ctx *c)
{
	return eval_generic(c, false, false);
}

int cmd_evalsha(struct cmd_ctx *c)
{
	return eval_generic(c, true, false);
}

int cmd_eval_ro(struct cmd_ctx *c)
{
	return eval_generic(c, false, true);
}

int cmd_evalsha_ro(struct cmd_ctx *c)
{
	return eval_generic(c, true, true);
}

/* ---- SCRIPT ---- */

static int script_load(struct cmd_ctx *c)
{
	struct script_cache *sc = c->node->scripts;
	uint32_t flags;
	if (parse_shebang(c->argv[2].p, c->argv[2].len, &flags, c->out) != 0)
		return 0;
	char sha[41];
	sha1_hex(c->argv[2].p, c->argv[2].len, sha);
	struct script_vm *vm = pool_take(c->w->scripts, sc);
	if (!vm) {
		resp_error(c->out, "ERR out of memory creating the Lua interpreter");
		return 0;
	}
	char err[1024];
	int rc = svm_compile(vm, sha, c->argv[2].p, c->argv[2].len, err, sizeof(err));
	pool_give(c->w->scripts, vm);
	if (rc != 0) {
		resp_error(c->out, err);
		return 0;
	}
	if (cache_add(sc, sha, c->argv[2].p, c->argv[2].len, flags) != 0) {
		resp_error(c->out, "ERR out of memory caching the script");
		return 0;
	}
	resp_bulk(c->out, sha, 40);
	return 0;
}

static int script_exists(struct cmd_ctx *c)
{
	resp_array(c->out, c->argc - 2);
	for (int i = 2; i < c->argc; i++) {
		char sha[41];
		uint32_t flags;
		resp_int(c->out, sha_arg(&c->argv[i], sha) &&
					 cache_get(c->node->scripts, sha, &flags, NULL, NULL));
	}
	return 0;
}

static int script_flush(struct cmd_ctx *c)
{
	if (c->argc > 3 || (c->argc == 3 && !arg_is(&c->argv[2], "sync") &&
			    !arg_is(&c->argv[2], "async"))) {
		resp_error(c->out, "ERR SCRIPT FLUSH only support SYNC|ASYNC option");
		return 0;
	}
	struct script_cache *sc = c->node->scripts;
	pthread_mutex_lock(&sc->mu);
	cache_clear_locked(sc);
	ck_pr_inc_64(&sc->gen);
	pthread_mutex_unlock(&sc->mu);
	resp_status(c->out, "OK");
	return 0;
}

static int script_kill(struct cmd_ctx *c)
{
	struct script_cache *sc = c->node->scripts;
	if (ck_pr_load_64(&sc->running) == 0) {
		resp_error(c->out, "NOTBUSY No scripts in execution right now.");
		return 0;
	}
	ck_pr_inc_64(&sc->kills);
	resp_status(c->out, "OK");
	return 0;
}

static int script_debug(struct cmd_ctx *c)
{
	resp_error(c->out, "ERR SCRIPT DEBUG is not supported by rckv: scripts run as "
		   "transactions, with no debugger");
	return 0;
}

static int script_help(struct cmd_ctx *c)
{
	static const char *const lines[] = {
		"SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"EXISTS <sha1> [<sha1> ...]",
		"    Return information about the existence of the scripts in the script cache.",
		"FLUSH [ASYNC|SYNC]",
		"    Flush the Lua scripts cache. Very dangerous on replicas.",
		"    When called without the optional mode argument, the behavior is determined by the",
		"    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
		"    * ASYNC: Asynchronously flush the scripts cache.",
		"    * SYNC: Synchronously flush the scripts cache.",
		"KILL",
		"    Kill the currently executing Lua script.",
		"LOAD <script>",
		"    Load a script into the scripts cache without executing it.",
		"HELP",
		"    Prints this help.",
	};
	int n = (int)(sizeof(lines) / sizeof(lines[0]));
	resp_array(c->out, n);
	for (int i = 0; i < n; i++)
		resp_status(c->out, lines[i]);
	return 0;
}

/* The container's handler: dispatch checked the subcommand and its arity. */
int cmd_script(struct cmd_ctx *c)
{
	static const struct {
		const char *name;
		int (*fn)(struct cmd_ctx *c);
	} subs[] = {
		{ "load", script_load },   { "exists", script_exists }, { "flush", script_flush },
		{ "kill", script_kill },   { "debug", script_debug },
	};
	for (size_t i = 0; c->argc >= 2 && i < sizeof(subs) / sizeof(subs[0]); i++)
		if (arg_is(&c->argv[1], subs[i].name))
			return subs[i].fn(c);
	return script_help(c);
}
