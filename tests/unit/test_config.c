/*
 * test_config: server/config.c (defaults, the redis.conf line syntax,
 * errors with file:line, command-line overrides, CONFIG GET globs) and the
 * agreement between the option table and conf/rckv.conf; then the command
 * table of server/cmdtable.c (lookup, subcommands, key positions, flags),
 * whose rows every CONFIG/COMMAND reply is built from.
 *
 * conf/rckv.conf is found through $RCKV_SOURCE_DIR, else from this file's
 * own path (CMake compiles it with an absolute path), else ../conf.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cc/txn.h"
#include "server/command.h"
#include "server/config.h"

static int failures;

#define CHECK(cond)                                                              \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,   \
				__LINE__, #cond);                                \
			failures++;                                              \
		}                                                                \
	} while (0)

#define CHECK_STR(a, b)                                                          \
	do {                                                                     \
		const char *a_ = (a), *b_ = (b);                                 \
		if (!a_ || !b_ || strcmp(a_, b_) != 0) {                         \
			fprintf(stderr, "%s:%d: '%s' != '%s'\n", __FILE__, __LINE__, \
				a_ ? a_ : "(null)", b_ ? b_ : "(null)");         \
			failures++;                                              \
		}                                                                \
	} while (0)

/* ---- helpers ---- */

static char tmpdir[] = "/tmp/rckv-test-config-XXXXXX";

/* Write text to a fresh file in tmpdir; returns its path (static buffer). */
static const char *write_conf(const char *name, const char *text)
{
	static char path[512];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(2);
	}
	fputs(text, f);
	fclose(f);
	return path;
}

/* CONFIG GET of one exact option, into a static buffer. */
struct one {
	const char *want;
	char value[1024];
	int hits;
};

static void one_visit(void *arg, const char *name, const char *value)
{
	struct one *o = arg;
	if (strcasecmp(name, o->want) == 0) {
		snprintf(o->value, sizeof(o->value), "%s", value);
		o->hits++;
	}
}

static const char *get(const struct srv_config *c, const char *name)
{
	static struct one o;
	memset(&o, 0, sizeof(o));
	o.want = name;
	cfg_get(c, name, one_visit, &o);
	return o.hits == 1 ? o.value : NULL;
}

/* Names visited by a pattern, space-separated. */
struct names {
	char buf[2048];
	int n;
};

static void names_visit(void *arg, const char *name, const char *value)
{
	(void)value;
	struct names *nm = arg;
	size_t len = strlen(nm->buf);
	snprintf(nm->buf + len, sizeof(nm->buf) - len, "%s%s", nm->n ? " " : "", name);
	nm->n++;
}

static const char *match(const struct srv_config *c, const char *pattern)
{
	static struct names nm;
	memset(&nm, 0, sizeof(nm));
	cfg_get(c, pattern, names_visit, &nm);
	return nm.buf;
}

/* CONFIG GET * as one text, to compare whole configurations. */
struct dump {
	char buf[8192];
};

static void dump_visit(void *arg, const char *name, const char *value)
{
	struct dump *d = arg;
	size_t len = strlen(d->buf);
	snprintf(d->buf + len, sizeof(d->buf) - len, "%s=%s\n", name, value);
}

static void dump(const struct srv_config *c, struct dump *d)
{
	memset(d, 0, sizeof(*d));
	cfg_get(c, "*", dump_visit, d);
}

/* ---- defaults ---- */

static void test_defaults(void)
{
	struct srv_config c;
	cfg_defaults(&c);
	CHECK(c.port == 6379);
	CHECK(c.nbind == 1 && strcmp(c.bind[0], "127.0.0.1") == 0);
	CHECK(c.tcp_backlog == 511);
	CHECK(c.maxclients == 10000);
	CHECK(c.timeout == 0);
	CHECK_STR(c.requirepass, "");
	/* threads auto: one per online core but one, at least one */
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	CHECK(c.threads == (cores > 1 ? (cores - 1 > 64 ? 64 : cores - 1) : 1));
	CHECK(c.coroutines == CFG_COROUTINES_AUTO); /* 32, or 256 under power: at start */
	CHECK_STR(c.cc, "silo");
	CHECK(c.txn_timeout_ms == 5000);
	CHECK(c.max_key_bytes == 64 * 1024);
	CHECK(c.max_value_bytes == 1024 * 1024);
	CHECK(c.query_buf_limit == 1024LL * 1024 * 1024);
	CHECK(c.proto_max_bulk_len == 512LL * 1024 * 1024);
	CHECK(c.memory == 512LL * 1024 * 1024);
	CHECK_STR(c.dir, "./data");
	CHECK_STR(c.persistence, "process");
	CHECK(c.node_id == 1);
	CHECK_STR(c.fabric, "shm");
	CHECK(c.fabric_delay_us == 0);
	CHECK_STR(c.loglevel, "notice");
	CHECK_STR(c.logfile, "");
	CHECK(c.testing == false);

	/* CONFIG GET shows them as Redis would: memory in bytes, yes/no. */
	CHECK_STR(get(&c, "max-key-bytes"), "65536");
	CHECK_STR(get(&c, "testing"), "no");
	CHECK_STR(get(&c, "bind"), "127.0.0.1");
	/* The answers Redis tools ask for. */
	CHECK_STR(get(&c, "save"), "");
	CHECK_STR(get(&c, "appendonly"), "no");
	CHECK_STR(get(&c, "databases"), "1");
	cfg_free(&c);
	cfg_free(&c); /* idempotent */
}

/* ---- values ---- */

static void test_memory_units(void)
{
	static const struct {
		const char *s;
		int ok;
		long long v;
	} cases[] = {
		{ "0", 1, 0 },           { "100", 1, 100 },
		{ "1b", 1, 1 },          { "1k", 1, 1000 },
		{ "1kb", 1, 1024 },      { "1K", 1, 1000 },
		{ "1KB", 1, 1024 },      { "1kB", 1, 1024 },
		{ "2m", 1, 2000000 },    { "2mb", 1, 2LL << 20 },
		{ "3g", 1, 3000000000 }, { "3gb", 1, 3LL << 30 },
		{ "", 0, 0 },            { "kb", 0, 0 },
		{ "-1", 0, 0 },          { "1.5mb", 0, 0 },
		{ "1 mb", 0, 0 },        { "1tb", 0, 0 },
		{ "1x", 0, 0 },          { "99999999999gb", 0, 0 }, /* overflow */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		long long v = -42;
		int rc = cfg_parse_memory(cases[i].s, &v);
		if (cases[i].ok != (rc == 0) || (rc == 0 && v != cases[i].v)) {
			fprintf(stderr, "cfg_parse_memory(\"%s\") = %d, %lld\n", cases[i].s, rc, v);
			failures++;
		}
	}
}

static int set1(struct srv_config *c, const char *name, const char *value, char *err,
		size_t errlen)
{
	char *argv[1] = { (char *)value };
	err[0] = '\0';
	return cfg_set(c, name, 1, argv, err, errlen);
}

static void test_set_errors(void)
{
	struct srv_config c;
	char err[256];
	cfg_defaults(&c);

	/* The reasons are Redis 7.0's CONFIG SET texts. */
	CHECK(set1(&c, "port", "abc", err, sizeof(err)) == -1);
	CHECK_STR(err, "argument couldn't be parsed into an integer");
	CHECK(set1(&c, "port", "70000", err, sizeof(err)) == -1);
	CHECK_STR(err, "argument must be between 0 and 65535 inclusive");
	CHECK(set1(&c, "port", "+1", err, sizeof(err)) == -1);
	CHECK(set1(&c, "port", "007", err, sizeof(err)) == -1);
	CHECK(c.port == 6379); /* failures change nothing */
	CHECK(set1(&c, "timeout", "-1", err, sizeof(err)) == -1);
	CHECK_STR(err, "argument must be between 0 and 2147483647 inclusive");
	CHECK(set1(&c, "memory", "lots", err, sizeof(err)) == -1);
	CHECK_STR(err, "argument must be a memory value");
	CHECK(set1(&c, "memory", "1mb", err, sizeof(err)) == -1); /* below 16mb */
	CHECK(set1(&c, "max-value-bytes", "4mb", err, sizeof(err)) == -1); /* over one slab */
	CHECK(set1(&c, "max-value-bytes", "3mb", err, sizeof(err)) == 0);
	CHECK(c.max_value_bytes == 3LL << 20);
	CHECK(set1(&c, "max-key-bytes", "1mb", err, sizeof(err)) == -1);
	CHECK(set1(&c, "testing", "maybe", err, sizeof(err)) == -1);
	CHECK_STR(err, "argument must be 'yes' or 'no'");
	CHECK(set1(&c, "testing", "YES", err, sizeof(err)) == 0 && c.testing);
	CHECK(set1(&c, "persistence", "disk", err, sizeof(err)) == -1);
	CHECK_STR(err, "argument(s) must be one of the following: none, process, power, power-everysec");
	CHECK(set1(&c, "persistence", "POWER", err, sizeof(err)) == 0);
	CHECK_STR(c.persistence, "power"); /* stored in canonical spelling */
	CHECK(set1(&c, "loglevel", "loud", err, sizeof(err)) == -1);
	CHECK_STR(err, "argument(s) must be one of the following: debug, verbose, notice, warning");
	CHECK(set1(&c, "fabric", "rdma", err, sizeof(err)) == -1);
	CHECK_STR(err, "argument(s) must be one of the following: shm, tcp, verbs");
	CHECK(set1(&c, "fabric", "TCP", err, sizeof(err)) == 0);
	CHECK_STR(c.fabric, "tcp");
	CHECK(set1(&c, "node", "0", err, sizeof(err)) == -1);
	CHECK(set1(&c, "threads", "0", err, sizeof(err)) == -1);
	CHECK(set1(&c, "prot", "1", err, sizeof(err)) == -1);
	CHECK_STR(err, "unknown option 'prot'");
	/* cc names a protocol of the table (testing-only ones are the
	 * server's to refuse, since `testing` may come later in a file). */
	CHECK(set1(&c, "cc", "anything", err, sizeof(err)) == -1);
	CHECK(strncmp(err, "unknown concurrency control protocol 'anything' (one of: ", 57) == 0);
	CHECK(strstr(err, "silo") != NULL);
	CHECK_STR(c.cc, "silo");
	CHECK(set1(&c, "cc", "NOWAIT", err, sizeof(err)) == 0);
	CHECK_STR(c.cc, "nowait"); /* as the table spells it */
	/* Names are case-insensitive, as in redis.conf. */
	CHECK(set1(&c, "PORT", "7000", err, sizeof(err)) == 0 && c.port == 7000);
	/* Pseudo options answer CONFIG GET only. */
	CHECK(set1(&c, "save", "", err, sizeof(err)) == -1);
	CHECK(set1(&c, "appendonly", "no", err, sizeof(err)) == -1);

	/* Argument counts. */
	char *two[2] = { "1", "2" };
	CHECK(cfg_set(&c, "port", 2, two, err, sizeof(err)) == -1);
	CHECK_STR(err, "wrong number of arguments");
	CHECK(cfg_set(&c, "port", 0, NULL, err, sizeof(err)) == -1);
	char *binds[3] = { "127.0.0.1", "::1", "10.0.0.1" };
	CHECK(cfg_set(&c, "bind", 3, binds, err, sizeof(err)) == 0);
	CHECK(c.nbind == 3 && strcmp(c.bind[2], "10.0.0.1") == 0);
	CHECK_STR(get(&c, "bind"), "127.0.0.1 ::1 10.0.0.1");
	CHECK(cfg_set(&c, "bind", 0, NULL, err, sizeof(err)) == -1);
	CHECK(c.nbind == 3);

	/* Mutability, as CONFIG SET sees it. */
	CHECK(cfg_is_mutable("maxclients") && cfg_is_mutable("CC") && cfg_is_mutable("timeout"));
	CHECK(cfg_is_mutable("requirepass") && cfg_is_mutable("loglevel"));
	CHECK(!cfg_is_mutable("port") && !cfg_is_mutable("memory") && !cfg_is_mutable("threads"));
	CHECK(!cfg_is_mutable("save") && !cfg_is_mutable("nosuch"));
	CHECK(cfg_exists("save") && cfg_exists("Port") && !cfg_exists("nosuch"));
	cfg_free(&c);
}

/* ---- files ---- */

static void test_file_syntax(void)
{
	struct srv_config c;
	char err[1024];
	cfg_defaults(&c);
	const char *path = write_conf("good.conf",
				      "# a comment\n"
				      "\n"
				      "   # an indented comment\n"
				      "port 7001\r\n"
				      "  timeout   30  \n"
				      "requirepass \"p a\\\"s\\x41\\n\"\n"
				      "logfile 'it\\'s.log'\n"
				      "dir \"\"\n"
				      "bind 127.0.0.1 ::1\n"
				      "memory 1gb\n"
				      "max-value-bytes 2MB\n"
				      "testing yes\n"
				      "CC nowait\n"
				      "port 7002\n" /* the last one wins */
				      "loglevel warning"); /* no final newline */
	CHECK(cfg_load_file(&c, path, err, sizeof(err)) == 0);
	if (err[0] && failures)
		fprintf(stderr, "  (error: %s)\n", err);
	CHECK(c.port == 7002);
	CHECK(c.timeout == 30);
	CHECK_STR(c.requirepass, "p a\"sA\n");
	CHECK_STR(c.logfile, "it's.log");
	CHECK_STR(c.dir, "");
	CHECK(c.nbind == 2 && strcmp(c.bind[1], "::1") == 0);
	CHECK(c.memory == 1LL << 30);
	CHECK(c.max_value_bytes == 2LL << 20);
	CHECK(c.testing);
	CHECK_STR(c.cc, "nowait");
	CHECK_STR(c.loglevel, "warning");
	cfg_free(&c);
}

/* Load text and expect an error equal to "<path>:<suffix>", or starting
 * with it when the suffix ends in "...". */
static void expect_file_error(const char *text, const char *suffix)
{
	struct srv_config c;
	char err[1024], want[1024];
	cfg_defaults(&c);
	const char *path = write_conf("bad.conf", text);
	snprintf(want, sizeof(want), "%s:%s", path, suffix);
	size_t wlen = strlen(want);
	bool prefix = wlen > 3 && strcmp(want + wlen - 3, "...") == 0;
	if (prefix)
		want[wlen -= 3] = '\0';
	err[0] = '\0';
	int rc = cfg_load_file(&c, path, err, sizeof(err));
	CHECK(rc == -1);
	if (prefix ? strncmp(err, want, wlen) != 0 : strcmp(err, want) != 0) {
		fprintf(stderr, "file error: got '%s'\n            want '%s'\n", err, want);
		failures++;
	}
	cfg_free(&c);
}

static void test_file_errors(void)
{
	expect_file_error("port 1\n\n# x\nprot 6379\n", "4: unknown option 'prot'");
	expect_file_error("port abc\n",
			  "1: option 'port': argument couldn't be parsed into an integer");
	expect_file_error("port 1\nmemory 12q\n",
			  "2: option 'memory': argument must be a memory value");
	expect_file_error("testing on\n", "1: option 'testing': argument must be 'yes' or 'no'");
	expect_file_error("port 1\ncc nosuchprotocol\n",
			  "2: option 'cc': unknown concurrency control protocol 'nosuchprotocol' "
			  "(one of: ...");
	expect_file_error("port 1 2\n", "1: option 'port': wrong number of arguments");
	expect_file_error("port\n", "1: option 'port': wrong number of arguments");
	expect_file_error("requirepass \"open\n", "1: Unbalanced quotes in configuration line");
	expect_file_error("requirepass \"a\"b\n", "1: Unbalanced quotes in configuration line");
	expect_file_error("requirepass 'a\n", "1: Unbalanced quotes in configuration line");
	/* redis.conf habits are not silently accepted. */
	expect_file_error("save 900 1\n",
			  "1: option 'save': 'save' is not an rckv option (CONFIG GET reports '' "
			  "for Redis tools only)");
	expect_file_error("port 6379 # trailing comment\n",
			  "1: option 'port': wrong number of arguments");

	struct srv_config c;
	char err[1024];
	cfg_defaults(&c);
	CHECK(cfg_load_file(&c, "/nonexistent/rckv.conf", err, sizeof(err)) == -1);
	CHECK(strncmp(err, "/nonexistent/rckv.conf: cannot open: ", 37) == 0);
	cfg_free(&c);
}

/* ---- command line ---- */

static void test_argv(void)
{
	struct srv_config c;
	char err[1024];
	const char *path = write_conf("argv.conf", "port 7001\ntimeout 5\n");

	/* The file, then options that override it, multi-word values. */
	cfg_defaults(&c);
	char *a1[] = { (char *)path, "--port", "7100", "--bind", "127.0.0.1", "::1",
		       "--requirepass", "", "--timeout", "-0" };
	CHECK(cfg_parse_argv(&c, 8, a1, err, sizeof(err)) == 0);
	CHECK(c.port == 7100);
	CHECK(c.timeout == 5);
	CHECK(c.nbind == 2);
	CHECK_STR(c.requirepass, "");
	/* A negative number is a value, not an option; "-0" is not an integer. */
	CHECK(cfg_parse_argv(&c, 10, a1, err, sizeof(err)) == -1);
	CHECK_STR(err, "command line: option 'timeout': argument couldn't be parsed into an "
		       "integer");
	cfg_free(&c);

	/* Options only. */
	cfg_defaults(&c);
	char *a2[] = { "--port", "0", "--port", "7200", "--cc", "nowait" };
	CHECK(cfg_parse_argv(&c, 6, a2, err, sizeof(err)) == 0);
	CHECK(c.port == 7200);
	CHECK_STR(c.cc, "nowait");
	CHECK(cfg_parse_argv(&c, 0, a2, err, sizeof(err)) == 0);
	cfg_free(&c);

	/* Errors name the command line and the option. */
	cfg_defaults(&c);
	char *a3[] = { "--prot", "1" };
	CHECK(cfg_parse_argv(&c, 2, a3, err, sizeof(err)) == -1);
	CHECK_STR(err, "command line: unknown option 'prot'");
	char *a4[] = { "--port", "7000", "stray" };
	CHECK(cfg_parse_argv(&c, 3, a4, err, sizeof(err)) == -1);
	CHECK_STR(err, "command line: option 'port': wrong number of arguments");
	char *a5[] = { "--" };
	CHECK(cfg_parse_argv(&c, 1, a5, err, sizeof(err)) == -1);
	CHECK_STR(err, "command line: unexpected argument '--'");
	/* A file that fails reports the file. */
	const char *bad = write_conf("argv-bad.conf", "port 1\nbogus 2\n");
	char *a6[] = { (char *)bad, "--port", "1" };
	CHECK(cfg_parse_argv(&c, 3, a6, err, sizeof(err)) == -1);
	CHECK(strstr(err, "argv-bad.conf:2: unknown option 'bogus'") != NULL);
	cfg_free(&c);
}

/* ---- cc-stages ---- */

static const char *stages_of(struct srv_config *c, const char *v, char *err, size_t errlen)
{
	static char got[160];
	char *arg = (char *)v;
	err[0] = '\0';
	if (cfg_set(c, "cc-stages", 1, &arg, err, errlen) != 0)
		return NULL;
	cc_stages_format(c->cc_stages, got, sizeof(got));
	return got;
}

/* The values CONFIG SET cc-stages takes, as CONFIG GET says them back,
 * and the ones it refuses (the value is then unchanged). */
static void test_cc_stages(void)
{
	struct srv_config c;
	char err[256];
	cfg_defaults(&c);
	CHECK(c.cc_stages == 0);
	CHECK_STR(stages_of(&c, "rpc", err, sizeof(err)), "rpc");
	CHECK(c.cc_stages == CC_STAGES_ALL);
	CHECK_STR(stages_of(&c, "ONESIDED", err, sizeof(err)), "onesided");
	CHECK_STR(stages_of(&c, "lock=rpc,release=onesided", err, sizeof(err)), "lock=rpc");
	CHECK(c.cc_stages == 1u << CC_STAGE_LOCK);
	CHECK_STR(stages_of(&c, "commit=rpc,Read=RPC", err, sizeof(err)), "read=rpc,commit=rpc");
	CHECK_STR(stages_of(&c, "lock=rpc,lock=onesided", err, sizeof(err)), "onesided");
	CHECK_STR(stages_of(&c, "read=rpc,lock=rpc,validate=rpc,log=rpc,commit=rpc,release=rpc",
			    err, sizeof(err)),
		  "rpc");
	stages_of(&c, "log=rpc", err, sizeof(err));
	static const char *const bad[] = { "", "lock", "lock=", "lock=maybe", "fetch=rpc",
					   "lock=rpc,", "lock=rpc,,commit=rpc", "=rpc", "rpc,lock=rpc" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *got = stages_of(&c, bad[i], err, sizeof(err));
		if (got || !strstr(err, "bad cc-stages item") || c.cc_stages != 1u << CC_STAGE_LOG) {
			fprintf(stderr, "cc-stages '%s': took it (%s), or said '%s'\n", bad[i],
				got ? got : "-", err);
			failures++;
		}
	}
	cfg_free(&c);
}

/* ---- CONFIG GET patterns ---- */

static void test_glob(void)
{
	struct srv_config c;
	cfg_defaults(&c);
	CHECK_STR(match(&c, "port"), "port");
	CHECK_STR(match(&c, "PORT"), "port");
	CHECK_STR(match(&c, "max*"), "maxclients max-key-bytes max-value-bytes maxmemory maxmemory-policy");
	CHECK_STR(match(&c, "*bytes"), "max-key-bytes max-value-bytes");
	CHECK_STR(match(&c, "t?meout"), "timeout");
	CHECK_STR(match(&c, "[ct]*s"), "threads coroutines cc-stages calvin-epoch-us");
	CHECK_STR(match(&c, "[^a-s]*"), "tcp-backlog timeout threads txn-timeout testing");
	CHECK_STR(match(&c, "[a-c]?"), "cc");
	CHECK_STR(match(&c, "no\\de"), "node");
	CHECK_STR(match(&c, "*-*-*"), "busy-poll-us cc-lock-mode maat-list-slots calvin-epoch-us "
				      "addr-cache-entries "
				      "busy-reply-threshold lua-time-limit script-memory-limit "
				      "max-key-bytes max-value-bytes "
				      "client-query-buffer-limit "
				      "proto-max-bulk-len client-output-buffer-limit "
				      "list-max-listpack-size list-max-ziplist-size "
				      "list-compress-depth checkpoint-log-size power-worker-sync-min "
				      "power-sim-crash-in "
				      "power-sim-crash-after fabric-delay-us slowlog-log-slower-than "
				      "slowlog-max-len notify-keyspace-events latency-monitor-threshold");
	CHECK_STR(match(&c, "nosuch*"), "");
	CHECK_STR(match(&c, ""), "");
	/* "*" lists every option once, the pseudo options last. */
	struct names all;
	memset(&all, 0, sizeof(all));
	cfg_get(&c, "*", names_visit, &all);
	CHECK(all.n == 59);
	CHECK(strstr(all.buf, "testing save appendonly databases") != NULL);
	cfg_free(&c);
}

/* ---- conf/rckv.conf ---- */

static FILE *open_rckv_conf(char *path, size_t cap)
{
	const char *env = getenv("RCKV_SOURCE_DIR");
	if (env) {
		snprintf(path, cap, "%s/conf/rckv.conf", env);
		FILE *f = fopen(path, "r");
		if (f)
			return f;
	}
	const char *me = __FILE__;
	const char *tail = strstr(me, "tests/unit/test_config.c");
	if (tail) {
		snprintf(path, cap, "%.*sconf/rckv.conf", (int)(tail - me), me);
		FILE *f = fopen(path, "r");
		if (f)
			return f;
	}
	snprintf(path, cap, "../conf/rckv.conf");
	return fopen(path, "r");
}

static void test_shipped_conf(void)
{
	char path[4096];
	FILE *f = open_rckv_conf(path, sizeof(path));
	if (!f) {
		fprintf(stderr, "conf/rckv.conf not found (set RCKV_SOURCE_DIR)\n");
		failures++;
		return;
	}

	/* Every line that sets something names a known option, and the file
	 * loads cleanly. */
	char line[1024];
	char seen[64][64];
	int nseen = 0;
	while (fgets(line, sizeof(line), f)) {
		char name[64];
		if (line[0] == '#' || sscanf(line, "%63s", name) != 1)
			continue;
		if (!cfg_exists(name)) {
			fprintf(stderr, "conf/rckv.conf sets unknown option '%s'\n", name);
			failures++;
		}
		if (nseen < 64)
			snprintf(seen[nseen++], sizeof(seen[0]), "%s", name);
	}
	fclose(f);

	struct srv_config def, conf;
	char err[1024];
	cfg_defaults(&def);
	cfg_defaults(&conf);
	err[0] = '\0';
	CHECK(cfg_load_file(&conf, path, err, sizeof(err)) == 0);
	if (err[0])
		fprintf(stderr, "  loading %s: %s\n", path, err);

	/* Loading it gives exactly the defaults: the file documents them. */
	struct dump d1, d2;
	dump(&def, &d1);
	dump(&conf, &d2);
	if (strcmp(d1.buf, d2.buf) != 0) {
		fprintf(stderr, "conf/rckv.conf differs from the defaults:\n%s---\n%s", d1.buf,
			d2.buf);
		failures++;
	}

	/* And every real option is in it (the three pseudo options, and
	 * cluster-node, which has no default, are documented in comments). */
	struct names all;
	memset(&all, 0, sizeof(all));
	cfg_get(&def, "*", names_visit, &all);
	for (char *tok = strtok(all.buf, " "); tok; tok = strtok(NULL, " ")) {
		if (!strcmp(tok, "save") || !strcmp(tok, "appendonly") || !strcmp(tok, "databases") ||
		    !strcmp(tok, "cluster-node"))
			continue;
		bool found = false;
		for (int i = 0; i < nseen && !found; i++)
			found = strcmp(seen[i], tok) == 0;
		if (!found) {
			fprintf(stderr, "option '%s' is not documented in conf/rckv.conf\n", tok);
			failures++;
		}
	}
	cfg_free(&def);
	cfg_free(&conf);
}

/* ---- the command table ---- */

static void test_command_table(void)
{
	int n;
	const struct cmd_def *tab = cmd_table(&n);
	CHECK(n > 40);
	CHECK(tab[n].name == NULL);
	for (int i = 0; i < n; i++) {
		const struct cmd_def *d = &tab[i];
		/* Every row is found by its name, in any case. */
		char upper[64];
		size_t len = strlen(d->name);
		for (size_t k = 0; k <= len && k < sizeof(upper); k++)
			upper[k] = (char)(d->name[k] >= 'a' && d->name[k] <= 'z' ? d->name[k] - 32
										 : d->name[k]);
		CHECK(cmd_lookup(d->name, len) == d);
		CHECK(cmd_lookup(upper, len) == d);
		/* MONITOR has no complexity in Redis's docs either. */
		CHECK(d->fn && d->arity != 0 && d->group && d->since && d->summary &&
		      (d->complexity || strcmp(d->name, "monitor") == 0) && d->acl_categories);
		/* Data commands run as transactions; admin ones never. A
		 * script's (EVAL: movable keys) reads or writes as it runs. */
		if (!(d->flags & CMD_NOTXN))
			CHECK(!(d->flags & CMD_ADMIN) &&
			      (d->flags & (CMD_READONLY | CMD_WRITE | CMD_MOVABLEKEYS)));
		for (const struct cmd_def *s = d->subcommands; s && s->name; s++) {
			const char *bar = strchr(s->name, '|');
			CHECK(bar && strncmp(s->name, d->name, len) == 0 && bar == s->name + len);
			CHECK(cmd_lookup_sub(d, bar + 1, strlen(bar + 1)) == s);
			CHECK(s->fn == d->fn && (s->flags & CMD_NOTXN));
		}
	}
	/* Lookups are exact, not prefix matches, and length-bounded. */
	CHECK(cmd_lookup("ge", 2) == NULL);
	CHECK(cmd_lookup("gets", 4) == NULL);
	CHECK(cmd_lookup("getXX", 3) == cmd_lookup("get", 3)); /* not NUL-terminated */
	CHECK(cmd_lookup("", 0) == NULL);
	CHECK(cmd_lookup("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 55) == NULL);

	/* Values Redis 7.0 reports. */
	const struct cmd_def *set = cmd_lookup("SET", 3);
	CHECK(set && set->arity == -3 && set->first_key == 1 && set->last_key == 1);
	const struct cmd_def *client = cmd_lookup("client", 6);
	const struct cmd_def *setname = cmd_lookup_sub(client, "SETNAME", 7);
	CHECK(setname && setname->arity == 3 && strcmp(setname->name, "client|setname") == 0);
	CHECK(cmd_lookup_sub(client, "caching", 7) == NULL); /* not built */
	CHECK(cmd_lookup_sub(client, "setnam", 6) == NULL);
	CHECK(cmd_lookup_sub(set, "x", 1) == NULL);
	const struct cmd_def *hello = cmd_lookup("hello", 5);
	CHECK(hello && (hello->flags & CMD_NOAUTH) && (hello->flags & CMD_NOTXN));
	CHECK(cmd_lookup("auth", 4)->flags & CMD_NOAUTH);
	CHECK(!(cmd_lookup("ping", 4)->flags & CMD_NOAUTH));
	CHECK(cmd_lookup("shutdown", 8)->flags & CMD_NOMULTI);
	CHECK(cmd_lookup("exec", 4)->flags & CMD_MULTICTL);
	CHECK(cmd_lookup("quit", 4)->flags & CMD_MULTICTL);
	CHECK(!(cmd_lookup("unwatch", 7)->flags & CMD_MULTICTL)); /* queued, as in 7.0 */
	CHECK(!(cmd_lookup("get", 3)->flags & (CMD_NOTXN | CMD_ADMIN)));

	const char *names[16];
	int nf = cmd_flag_names(cmd_lookup("hello", 5)->flags, names, 16);
	CHECK(nf == 6 && !strcmp(names[0], "noscript") && !strcmp(names[3], "fast") &&
	      !strcmp(names[4], "no_auth") && !strcmp(names[5], "allow_busy"));
	nf = cmd_flag_names(cmd_lookup("setnx", 5)->flags, names, 16);
	CHECK(nf == 3 && !strcmp(names[0], "write") && !strcmp(names[1], "denyoom") &&
	      !strcmp(names[2], "fast"));

	/* Key positions: MSET k v k v, MGET k k k, none for PING. */
	int idx[8];
	const struct cmd_def *mset = cmd_lookup("mset", 4);
	CHECK(cmd_get_keys(mset, 5, NULL, idx, 8) == 2 && idx[0] == 1 && idx[1] == 3);
	CHECK(cmd_get_keys(mset, 4, NULL, idx, 8) == 2 && idx[1] == 3); /* odd count, as Redis */
	CHECK(cmd_get_keys(cmd_lookup("mget", 4), 4, NULL, idx, 8) == 3 && idx[2] == 3);
	CHECK(cmd_get_keys(cmd_lookup("mget", 4), 4, NULL, idx, 2) == 2); /* bounded by max */
	CHECK(cmd_get_keys(cmd_lookup("get", 3), 2, NULL, idx, 8) == 1 && idx[0] == 1);
	CHECK(cmd_get_keys(cmd_lookup("ping", 4), 2, NULL, idx, 8) == 0);
	CHECK(cmd_get_keys(NULL, 2, NULL, idx, 8) == 0);
}

/* cluster-node lines: parsed, checked, listed by CONFIG GET. */
static void test_cluster_nodes(void)
{
	struct srv_config c;
	char err[256];
	cfg_defaults(&c);
	CHECK(c.ncluster_nodes == 0);
	char *n1[] = { "1", "127.0.0.1:7001", "127.0.0.1:17001" };
	char *n2[] = { "2", "127.0.0.1:7002", "127.0.0.1:17002" };
	CHECK(cfg_set(&c, "cluster-node", 3, n1, err, sizeof(err)) == 0);
	CHECK(cfg_set(&c, "cluster-node", 3, n2, err, sizeof(err)) == 0);
	CHECK(c.ncluster_nodes == 2 && c.cluster_nodes[1].id == 2);
	CHECK_STR(c.cluster_nodes[1].fabric, "127.0.0.1:17002");
	CHECK(cfg_set(&c, "cluster-node", 3, n1, err, sizeof(err)) == -1);
	CHECK_STR(err, "node 1 is listed twice");
	char *bad_id[] = { "0", "127.0.0.1:7001", "127.0.0.1:17001" };
	CHECK(cfg_set(&c, "cluster-node", 3, bad_id, err, sizeof(err)) == -1);
	char *bad_addr[] = { "3", "127.0.0.1", "127.0.0.1:17003" };
	CHECK(cfg_set(&c, "cluster-node", 3, bad_addr, err, sizeof(err)) == -1);
	CHECK_STR(err, "'127.0.0.1' is not a host:port address");
	CHECK(cfg_set(&c, "cluster-node", 2, n1, err, sizeof(err)) == -1);
	CHECK(c.ncluster_nodes == 2);
	struct dump d;
	dump(&c, &d);
	CHECK(strstr(d.buf, "cluster-node=1 127.0.0.1:7001 127.0.0.1:17001 127.0.0.1:27001 "
			    "2 127.0.0.1:7002 127.0.0.1:17002 127.0.0.1:27002\n") != NULL);
	/* The Raft address: given, or the fabric's host 10000 ports away. */
	char *n3[] = { "3", "127.0.0.1:7003", "127.0.0.1:60000", "10.0.0.3:5003" };
	char *n4[] = { "4", "127.0.0.1:7004", "127.0.0.1:60004" };
	CHECK(cfg_set(&c, "cluster-node", 4, n3, err, sizeof(err)) == 0);
	CHECK(cfg_set(&c, "cluster-node", 3, n4, err, sizeof(err)) == 0);
	CHECK_STR(c.cluster_nodes[2].raft, "10.0.0.3:5003");
	CHECK_STR(c.cluster_nodes[3].raft, "127.0.0.1:50004");
	cfg_free(&c);
}

int main(void)
{
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 2;
	}
	test_defaults();
	test_memory_units();
	test_set_errors();
	test_file_syntax();
	test_file_errors();
	test_argv();
	test_glob();
	test_cc_stages();
	test_cluster_nodes();
	test_shipped_conf();
	test_command_table();

	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	if (failures) {
		fprintf(stderr, "test_config: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_config: ok\n");
	return 0;
}
