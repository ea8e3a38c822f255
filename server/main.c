/*
 * main.c: rckv-server. `rckv-server [file.conf] [--name value ...]`.
 * Sets up one node (config, MemStore region with recovery, fabric,
 * protocol, listening sockets, workers), waits for SHUTDOWN or a signal,
 * then stops the workers and closes the region cleanly.
 */
#include <ck_pr.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "server/log.h"
#include "server/node.h"
#include "server/srv.h"
#include "server/worker.h"

/* Files the server keeps open besides its clients: listeners, the region,
 * logs, epoll and event fds, fabric endpoints (Redis reserves 32; rckv's
 * workers and fabric use more). */
#define SRV_RESERVED_FDS 256

/*
 * As Redis's adjustOpenFilesLimit: raise the soft RLIMIT_NOFILE so that
 * maxclients clients fit, as far as the hard limit allows. Returns 0, or
 * the number of files the process may open when that is less than asked
 * (the caller logs it: clients past it are refused by accept failing).
 */
static long long raise_fd_limit(const struct node *n)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)n->cfg.maxclients + SRV_RESERVED_FDS;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
		return 0;
	rlim_t to = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
	rl.rlim_cur = to;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -1;
	return rl.rlim_cur >= want ? 0 : (long long)rl.rlim_cur;
}

int main(int argc, char **argv)
{
	static struct node node; /* main's own; everything else gets it passed */
	struct node *n = &node;
	char err[1024];

	cfg_defaults(&n->cfg);
	if (cfg_parse_argv(&n->cfg, argc - 1, argv + 1, err, sizeof(err)) != 0) {
		fprintf(stderr, "rckv-server: %s\n", err);
		return 1;
	}
	if (argc > 1 && argv[1][0] != '-')
		n->config_file = realpath(argv[1], NULL);
	if (readlink("/proc/self/exe", n->executable, sizeof(n->executable) - 1) < 0)
		snprintf(n->executable, sizeof(n->executable), "%s", argv[0]);

	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	long long files = raise_fd_limit(n);
	if (srv_node_start(n, err, sizeof(err)) != 0) {
		fprintf(stderr, "rckv-server: %s\n", err);
		srv_log(n, LOG_WARNING, "%s", err);
		return 1;
	}
	if (files)
		srv_log(n, LOG_WARNING, "Could not raise the open files limit to maxclients (%d) + "
			"%d: it is %lld", n->cfg.maxclients, SRV_RESERVED_FDS, files);

	/* Wait for a signal or SHUTDOWN; the 200 ms tick is the only wake-up
	 * of an idle server besides its clients. */
	struct timespec tick = { .tv_sec = 0, .tv_nsec = 200 * 1000 * 1000 };
	while (!ck_pr_load_int(&n->shutdown)) {
		int sig = sigtimedwait(&sigs, NULL, &tick);
		if (sig == SIGINT || sig == SIGTERM) {
			srv_log(n, LOG_WARNING, "Received %s scheduling shutdown...",
				sig == SIGINT ? "SIGINT" : "SIGTERM");
			ck_pr_store_int(&n->shutdown, 1);
		}
	}
	srv_node_stop(n);
	return n->exit_code;
}
