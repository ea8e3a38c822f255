/*
 * sigbus.c: the SIGBUS handler (sigbus.h).
 *
 * The message is one line in the log's format, "2026-11-21 03:58:50.123
 * node=1 warning: ...", written with one write(2) to the log and, when the
 * log is a file, once more to stderr; then the default action is restored
 * and the signal raised again, so the process ends as killed by SIGBUS
 * (what a supervisor and a shell report) and only after saying why.
 * Everything in the handler is async-signal-safe: the local time is the
 * UTC time from clock_gettime plus the offset from UTC taken at install
 * (a change of daylight saving time since then shifts the stamp by an
 * hour; the line is still there).
 */
#include "server/sigbus.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/node.h"

struct watch {
	uintptr_t base;
	size_t len;
	char path[PATH_MAX];
};

/* Written by the main thread before workers start, read by the handler
 * (see sigbus.h: the one place a handler can reach). */
static struct {
	int log_fd;
	int node;
	long gmtoff;
	struct watch w[SRV_SIGBUS_WATCH];
} g = { .log_fd = STDOUT_FILENO };

/* ---- async-signal-safe formatting ---- */

struct line {
	char b[PATH_MAX + 512];
	size_t n;
};

static void put_s(struct line *l, const char *s)
{
	while (*s && l->n < sizeof(l->b) - 1)
		l->b[l->n++] = *s++;
}

static void put_u(struct line *l, uint64_t v, int width, int base)
{
	char t[24];
	int k = 0;
	do {
		t[k++] = "0123456789abcdef"[v % (unsigned)base];
		v /= (unsigned)base;
	} while (v && k < 24);
	while (k < width && k < 24)
		t[k++] = '0';
	while (k > 0 && l->n < sizeof(l->b) - 1)
		l->b[l->n++] = t[--k];
}

/* Days since 1970-01-01 to a civil date (the proleptic Gregorian
 * calendar, in 400-year eras of 146097 days). */
static void civil(int64_t days, int *y, unsigned *m, unsigned *d)
{
	days += 719468;
	int64_t era = (days >= 0 ? days : days - 146096) / 146097;
	unsigned doe = (unsigned)(days - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int)(yoe + era * 400) + (*m <= 2);
}

static void put_stamp(struct line *l)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t t = (int64_t)ts.tv_sec + g.gmtoff;
	int64_t days = t >= 0 ? t / 86400 : (t - 86399) / 86400;
	int64_t secs = t - days * 86400;
	int y;
	unsigned m, d;
	civil(days, &y, &m, &d);
	put_u(l, (uint64_t)y, 4, 10);
	put_s(l, "-");
	put_u(l, m, 2, 10);
	put_s(l, "-");
	put_u(l, d, 2, 10);
	put_s(l, " ");
	put_u(l, (uint64_t)secs / 3600, 2, 10);
	put_s(l, ":");
	put_u(l, (uint64_t)secs / 60 % 60, 2, 10);
	put_s(l, ":");
	put_u(l, (uint64_t)secs % 60, 2, 10);
	put_s(l, ".");
	put_u(l, (uint64_t)ts.tv_nsec / 1000000, 3, 10);
}

static void write_all_safe(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return;
		p += k;
		n -= (size_t)k;
	}
}

static void on_sigbus(int sig, siginfo_t *si, void *uctx)
{
	(void)uctx;
	int saved = errno;
	struct line l;
	l.n = 0;
	uintptr_t a = (uintptr_t)si->si_addr;
	put_stamp(&l);
	put_s(&l, " node=");
	put_u(&l, (uint64_t)(g.node < 0 ? 0 : g.node), 1, 10);
	put_s(&l, " warning: SIGBUS at address 0x");
	put_u(&l, a, 1, 16);
	const struct watch *w = NULL;
	for (int i = 0; i < SRV_SIGBUS_WATCH; i++)
		if (g.w[i].base && a >= g.w[i].base && a - g.w[i].base < g.w[i].len)
			w = &g.w[i];
	if (w) {
		put_s(&l, ", offset ");
		put_u(&l, a - w->base, 1, 10);
		put_s(&l, " of the MemStore region ");
		put_s(&l, w->path);
		put_s(&l, " (");
		put_u(&l, w->len, 1, 10);
		put_s(&l, " bytes): its file has no page there any more (truncated, a hole "
			  "punched, or its file system is full). Exiting.");
	} else {
		put_s(&l, ", outside the MemStore region (code ");
		put_u(&l, (uint64_t)(unsigned)si->si_code, 1, 10);
		put_s(&l, "). Exiting.");
	}
	l.b[l.n++] = '\n';
	write_all_safe(g.log_fd, l.b, l.n);
	if (g.log_fd != STDOUT_FILENO && g.log_fd != STDERR_FILENO)
		write_all_safe(STDERR_FILENO, l.b, l.n);
	/* Die of the signal itself: the default action, raised again when
	 * the faulting instruction runs once more. */
	signal(sig, SIG_DFL);
	errno = saved;
}

int srv_sigbus_install(struct node *n)
{
	time_t now = time(NULL);
	struct tm tm;
	localtime_r(&now, &tm);
	g.gmtoff = tm.tm_gmtoff;
	g.log_fd = n->log_fd > 0 ? n->log_fd : STDOUT_FILENO;
	g.node = n->cfg.node_id;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, NULL) != 0)
		return -errno;
	return 0;
}

void srv_sigbus_watch(const void *base, size_t len, const char *path)
{
	for (int i = 0; i < SRV_SIGBUS_WATCH; i++) {
		if (g.w[i].base == 0) {
			snprintf(g.w[i].path, sizeof(g.w[i].path), "%s", path);
			g.w[i].len = len;
			g.w[i].base = (uintptr_t)base; /* last: the entry is whole */
			return;
		}
	}
}

void srv_sigbus_unwatch(const void *base)
{
	for (int i = 0; i < SRV_SIGBUS_WATCH; i++)
		if (g.w[i].base == (uintptr_t)base)
			g.w[i].base = 0;
}

void srv_block_async_signals(void)
{
	sigset_t s;
	sigfillset(&s);
	sigdelset(&s, SIGBUS);
	sigdelset(&s, SIGSEGV);
	sigdelset(&s, SIGFPE);
	sigdelset(&s, SIGILL);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
}
