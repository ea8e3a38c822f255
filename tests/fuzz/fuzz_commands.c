/*
 * fuzz_commands: the command layer. A fuzzed sequence of commands runs
 * against one node that lives in this process (srv_node_start, as main.c
 * starts it: persistence none, 16 MB, one worker, listening on an
 * ephemeral loopback port nobody uses). Each input is one client: a
 * socketpair whose server end the worker adopts as an accepted connection
 * (worker_give_fd), so every request takes the real path: the connection's
 * parser, dispatch and the command table's checks, MULTI/WATCH, the
 * transaction executor and its protocol, the MemStore, the reply writer.
 * A crash, an ASan or UBSan report in any of them stops the run; so does a
 * reply that is not well-formed RESP (2 or 3), and a node that does not
 * answer every command within 10 s.
 *
 * The input is a client's byte stream. It is split into requests with
 * the server's own parser (resp/; fuzz_resp covers that parser on raw
 * bytes) and each is sent as a multibulk, so mutations land on commands
 * and arguments rather than on framing. Each input starts from an empty
 * store (FLUSHALL, SCRIPT FLUSH on its connection first). Commands that
 * would end or reconfigure the node for the inputs after it are dropped:
 * SHUTDOWN, and CONFIG SET / CONFIG REWRITE (CONFIG GET is kept).
 * At most MAX_CMDS commands per input.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "resp/resp.h"
#include "server/node.h"
#include "server/srv.h"
#include "server/worker.h"
#include "storage/st.h"

#define MAX_CMDS 64
#define ANSWER_MS 10000

static struct node node;
static char dir[] = "/tmp/rckv-fuzz-XXXXXX";
static char logpath[sizeof(dir) + 16];

/* At the end of a run: the node's /dev/shm region and its directory go
 * (after a crash, the next region opened on this machine sweeps the file
 * of a dead process). */
static void cleanup(void)
{
	if (node.cc.region)
		unlink(st_region_path(node.cc.region));
	unlink(logpath);
	rmdir(dir);
}

static void set_opt(const char *name, const char *value)
{
	char err[256];
	char *v = (char *)value;
	if (cfg_set(&node.cfg, name, 1, &v, err, sizeof(err)) != 0) {
		fprintf(stderr, "fuzz_commands: %s %s: %s\n", name, value, err);
		abort();
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	char err[1024];
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		abort();
	}
	snprintf(logpath, sizeof(logpath), "%s/log", dir);
	signal(SIGPIPE, SIG_IGN);
	cfg_defaults(&node.cfg);
	set_opt("port", "0");
	set_opt("bind", "127.0.0.1");
	set_opt("dir", dir);
	set_opt("logfile", logpath);
	set_opt("loglevel", "warning");
	set_opt("persistence", "none");
	set_opt("memory", "16mb");
	set_opt("threads", "1");
	set_opt("coroutines", "8");
	set_opt("busy-poll-us", "0");
	/* A looping script ends in 0.2 s rather than 5 */
	set_opt("busy-reply-threshold", "200");
	set_opt("txn-timeout", "2000");
	if (srv_node_start(&node, err, sizeof(err)) != 0) {
		fprintf(stderr, "fuzz_commands: the node did not start: %s\n", err);
		abort();
	}
	atexit(cleanup);
	return 0;
}

/* ---- requests ---- */

struct out {
	char *p;
	size_t len, cap;
};

static void put(struct out *o, const void *p, size_t n)
{
	if (o->cap - o->len < n) {
		size_t c = o->cap ? o->cap * 2 : 4096;
		while (c - o->len < n)
			c *= 2;
		o->p = realloc(o->p, c);
		if (!o->p)
			abort();
		o->cap = c;
	}
	memcpy(o->p + o->len, p, n);
	o->len += n;
}

static void put_cmd(struct out *o, int argc, const struct resp_arg *argv)
{
	char h[48];
	put(o, h, (size_t)snprintf(h, sizeof(h), "*%d\r\n", argc));
	for (int i = 0; i < argc; i++) {
		put(o, h, (size_t)snprintf(h, sizeof(h), "$%zu\r\n", argv[i].len));
		put(o, argv[i].p, argv[i].len);
		put(o, "\r\n", 2);
	}
}

static bool is(const struct resp_arg *a, const char *s)
{
	return a->len == strlen(s) && strncasecmp(a->p, s, a->len) == 0;
}

/* Commands that would end the node or change it for the inputs after. */
static bool denied(int argc, const struct resp_arg *argv)
{
	if (is(&argv[0], "shutdown"))
		return true;
	if (is(&argv[0], "config") && argc > 1 && (is(&argv[1], "set") || is(&argv[1], "rewrite")))
		return true;
	return false;
}

/* ---- replies ---- */

static bool parse_num(const char *p, const char *end, long long *v)
{
	bool neg = false;
	long long x = 0;
	if (p < end && *p == '-') {
		neg = true;
		p++;
	}
	if (p == end || end - p > 18)
		return false;
	for (; p < end; p++) {
		if (*p < '0' || *p > '9')
			return false;
		x = x * 10 + (*p - '0');
	}
	*v = neg ? -x : x;
	return true;
}

/*
 * The offset just past the RESP2/RESP3 reply at b[i]: 0 while it is
 * incomplete, -1 if it is malformed.
 */
static long reply_end(const char *b, size_t len, size_t i, int depth)
{
	if (i >= len)
		return 0;
	if (depth > 1000)
		return -1;
	const char *nl = memchr(b + i, '\n', len - i);
	if (!nl)
		return 0;
	size_t le = (size_t)(nl - b);
	if (le == i || b[le - 1] != '\r')
		return -1;
	const char *num = b + i + 1, *nend = b + le - 1;
	long long n;
	switch (b[i]) {
	case '+': case '-': case ':': case '_': case '#': case ',': case '(':
		if (memchr(num, '\r', (size_t)(nend - num)))
			return -1; /* a line reply holds no CR */
		return (long)le + 1;
	case '$': case '=': case '!':
		if (!parse_num(num, nend, &n) || n < -1 || (n == -1 && b[i] != '$'))
			return -1;
		if (n == -1)
			return (long)le + 1;
		if (len < le + 1 + (size_t)n + 2)
			return 0;
		if (b[le + 1 + n] != '\r' || b[le + 2 + n] != '\n')
			return -1;
		return (long)(le + 3 + (size_t)n);
	case '*': case '~': case '>': case '%': case '|': {
		if (!parse_num(num, nend, &n) || n < -1 || (n == -1 && b[i] != '*'))
			return -1;
		long pos = (long)le + 1;
		long long items = b[i] == '%' || b[i] == '|' ? 2 * n : n;
		if (b[i] == '|')
			items++; /* an attribute precedes the reply it describes */
		for (long long k = 0; k < items; k++) {
			pos = reply_end(b, len, (size_t)pos, depth + 1);
			if (pos <= 0)
				return pos;
		}
		return pos;
	}
	default:
		return -1;
	}
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Send the requests, read until `want` replies or the node closes. */
static void converse(const struct out *o, int want)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		abort();
	fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) | O_NONBLOCK);
	fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
	while (worker_give_fd(node.workers[0], sv[1]) != 0)
		usleep(1000);

	struct out in = { 0 };
	size_t sent = 0, parsed = 0;
	int got = 0;
	long long deadline = now_ms() + ANSWER_MS;
	bool eof = false;
	while (got < want && !eof) {
		struct pollfd pfd = { .fd = sv[0], .events = POLLIN | (sent < o->len ? POLLOUT : 0) };
		long long left = deadline - now_ms();
		if (left <= 0) {
			fprintf(stderr, "fuzz_commands: %d of %d replies after %d ms\n", got, want,
				ANSWER_MS);
			abort();
		}
		if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR)
			abort();
		if ((pfd.revents & POLLOUT) && sent < o->len) {
			ssize_t k = write(sv[0], o->p + sent, o->len - sent);
			if (k > 0)
				sent += (size_t)k;
		}
		if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
			char buf[65536];
			ssize_t k = read(sv[0], buf, sizeof(buf));
			if (k > 0)
				put(&in, buf, (size_t)k);
			else if (k == 0 || (errno != EAGAIN && errno != EINTR))
				eof = true;
		}
		for (;;) {
			long e = reply_end(in.p, in.len, parsed, 0);
			if (e < 0) {
				fprintf(stderr, "fuzz_commands: malformed reply at byte %zu: %.*s\n",
					parsed, (int)(in.len - parsed < 200 ? in.len - parsed : 200),
					in.p + parsed);
				abort();
			}
			if (e == 0)
				break;
			parsed = (size_t)e;
			got++;
		}
	}
	close(sv[0]);
	free(in.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct resp_arg flushall[] = { { (char *)"FLUSHALL", 8 } };
	static const struct resp_arg script_flush[] = { { (char *)"SCRIPT", 6 }, { (char *)"FLUSH", 5 } };
	struct resp_parser *rp = resp_parser_create(NULL);
	struct out o = { 0 };
	int want = 2;

	put_cmd(&o, 1, flushall);
	put_cmd(&o, 2, script_flush);
	if (!rp || resp_parser_feed(rp, (const char *)data, size) != 0)
		abort();
	for (int k = 0; k < MAX_CMDS; k++) {
		int argc;
		struct resp_arg *argv;
		const char *err;
		if (resp_parser_next(rp, &argc, &argv, &err) != RESP_OK)
			break;
		if (denied(argc, argv))
			continue;
		put_cmd(&o, argc, argv);
		want++;
	}
	resp_parser_free(rp);
	converse(&o, want);
	free(o.p);
	return 0;
}
