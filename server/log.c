/*
 * log.c: "2026-11-21 03:58:50.123 node=1 notice: message" lines. A single
 * write(2) per line, so lines of different threads never interleave.
 */
#include "server/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "server/node.h"

static const char *const level_names[] = { "debug", "verbose", "notice", "warning" };

int srv_loglevel_parse(const char *s)
{
	for (int i = 0; i < 4; i++)
		if (strcasecmp(s, level_names[i]) == 0)
			return i;
	return -1;
}

static int log_fd_of(struct node *n)
{
	return n->log_fd > 0 ? n->log_fd : STDOUT_FILENO;
}

int srv_log_open(struct node *n)
{
	n->log_fd = STDOUT_FILENO;
	if (n->cfg.logfile && n->cfg.logfile[0]) {
		int fd = open(n->cfg.logfile, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			return -errno;
		n->log_fd = fd;
	}
	return 0;
}

void srv_log(struct node *n, int level, const char *fmt, ...)
{
	int min = n ? srv_loglevel_parse(n->cfg.loglevel ? n->cfg.loglevel : "notice") : 0;
	if (level < min)
		return;
	char line[1024];
	struct timeval tv;
	gettimeofday(&tv, NULL);
	struct tm tm;
	localtime_r(&tv.tv_sec, &tm);
	size_t len = strftime(line, sizeof(line), "%Y-%m-%d %H:%M:%S", &tm);
	len += (size_t)snprintf(line + len, sizeof(line) - len, ".%03d node=%d %s: ",
				(int)(tv.tv_usec / 1000), n ? n->cfg.node_id : 0,
				level_names[level & 3]);
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + len, sizeof(line) - len - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	len += (size_t)m < sizeof(line) - len - 1 ? (size_t)m : sizeof(line) - len - 2;
	line[len++] = '\n';
	ssize_t w = write(n ? log_fd_of(n) : STDOUT_FILENO, line, len);
	(void)w;
}
