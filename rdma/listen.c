/*
 * listen.c: the fabric listener (see listen.h).
 *
 * The thread sleeps in poll(2) on two fds: the listening socket and an
 * eventfd that fab_listener_stop writes. It never polls with a timeout to
 * look at a stop flag, so it takes no CPU while idle and stops at once.
 * The hello of an accepted connection is read the same way (poll on the
 * connection and the eventfd, then a non-blocking recv), so a stop in the
 * middle of a hello does not wait for FAB_LISTEN_HELLO_MS either.
 *
 * The accepted socket itself is left blocking and without SO_RCVTIMEO:
 * recv(MSG_DONTWAIT) reads the hello without changing it, so what reaches
 * fab_adopt or the callback is a plain socket (the control plane's
 * threads read from it blocking, with no timeout).
 */
#include "rdma/listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rdma/tcp_wire.h"

struct fab_listener {
	struct fab_listener_config cfg; /* cfg.fd: the listening socket */
	int wakefd;     /* eventfd: readable once fab_listener_stop wants the
			   thread to leave; written by the owner, read by the thread */
	pthread_t thread;
	char addr[INET6_ADDRSTRLEN + 8];
};

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/*
 * Wait until fd is readable, the listener is told to stop, or timeout_ms
 * pass (-1: no limit). Returns 0 when fd is readable (or in error: the
 * read that follows says which), -ECANCELED on stop, -ETIMEDOUT.
 */
static int wait_readable(struct fab_listener *l, int fd, int timeout_ms)
{
	struct pollfd pfd[2] = { { .fd = fd, .events = POLLIN },
				 { .fd = l->wakefd, .events = POLLIN } };
	int k = poll(pfd, 2, timeout_ms);
	if (k < 0)
		return errno == EINTR ? 0 : -errno;
	if (pfd[1].revents)
		return -ECANCELED;
	return k == 0 ? -ETIMEDOUT : 0;
}

/* Read the whole hello of a new connection within FAB_LISTEN_HELLO_MS.
 * Returns 0, -ECANCELED on stop, -ETIMEDOUT, -ECONNRESET if the peer
 * closed first, or recv's -errno. */
static int hello_read(struct fab_listener *l, int fd, struct tcp_hello *h)
{
	char *p = (char *)h;
	size_t got = 0;
	uint64_t deadline = mono_ms() + FAB_LISTEN_HELLO_MS;
	while (got < sizeof(*h)) {
		ssize_t k = recv(fd, p + got, sizeof(*h) - got, MSG_DONTWAIT);
		if (k > 0) {
			got += (size_t)k;
			continue;
		}
		if (k == 0)
			return -ECONNRESET;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		uint64_t now = mono_ms();
		if (now >= deadline)
			return -ETIMEDOUT;
		int rc = wait_readable(l, fd, (int)(deadline - now));
		if (rc)
			return rc;
	}
	return 0;
}

/* Hand a connection with a well-formed hello on. Closes fd unless its new
 * owner took it. */
static void dispatch(struct fab_listener *l, int fd, const struct tcp_hello *h)
{
	int rc;
	if (h->type == TCP_HELLO_DATA)
		rc = fab_adopt(l->cfg.fab, fd, h->from, h->worker);
	else
		rc = l->cfg.other ? l->cfg.other(l->cfg.arg, fd, h) : -ENOTSUP;
	if (rc != 0)
		close(fd);
}

/* After an error that may last (poll's ENOMEM, accept's EMFILE, whose
 * connection stays queued and the socket readable): wait a little rather
 * than spin. */
#define FAB_LISTEN_BACKOFF_MS 10

static void *listener_main(void *arg)
{
	struct fab_listener *l = arg;
	pthread_setname_np(pthread_self(), "rckv-listen"); /* top -H, perf, gdb */
	for (;;) {
		int rc = wait_readable(l, l->cfg.fd, -1);
		if (rc == -ECANCELED)
			break;
		int fd = rc ? -1 : accept4(l->cfg.fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			/* EAGAIN: the connection was reset before accept. */
			if (rc || (errno != EAGAIN && errno != EWOULDBLOCK &&
				   errno != ECONNABORTED && errno != EINTR))
				poll(NULL, 0, FAB_LISTEN_BACKOFF_MS);
			continue;
		}
		struct tcp_hello h;
		rc = hello_read(l, fd, &h);
		if (rc == 0 && tcp_hello_check(&h) == 0) {
			dispatch(l, fd, &h);
			continue;
		}
		close(fd);
		if (rc == -ECANCELED)
			break;
	}
	return NULL;
}

/* Fill l->addr from the socket's bound address. */
static int addr_of(struct fab_listener *l)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (getsockname(l->cfg.fd, (struct sockaddr *)&ss, &sl) != 0)
		return -errno;
	char host[INET6_ADDRSTRLEN];
	unsigned port;
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *sa = (struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &sa->sin_addr, host, sizeof(host));
		port = ntohs(sa->sin_port);
	} else if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *sa = (struct sockaddr_in6 *)&ss;
		inet_ntop(AF_INET6, &sa->sin6_addr, host, sizeof(host));
		port = ntohs(sa->sin6_port);
	} else {
		return -EAFNOSUPPORT;
	}
	snprintf(l->addr, sizeof(l->addr), "%s:%u", host, port);
	return 0;
}

int fab_listen_loopback(char *addr, size_t addrlen)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 128) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	snprintf(addr, addrlen, "127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
	return fd;
}

int fab_listener_start(const struct fab_listener_config *cfg, struct fab_listener **out,
		       char *err, size_t errlen)
{
	int rc, fd = cfg->fd;
	const char *what = "";
	struct fab_listener *l = NULL;
	char lo[32];
	if (fd < 0) {
		fd = fab_listen_loopback(lo, sizeof(lo));
		if (fd < 0) {
			rc = fd;
			what = "listen on 127.0.0.1";
			goto fail;
		}
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		rc = -ENOMEM;
		goto fail_fd;
	}
	l->cfg = *cfg;
	l->cfg.fd = fd;
	l->wakefd = eventfd(0, EFD_CLOEXEC);
	if (l->wakefd < 0) {
		rc = -errno;
		what = "eventfd";
		goto fail_l;
	}
	rc = addr_of(l);
	if (rc) {
		what = "address of the listening socket";
		goto fail_wake;
	}
	/* accept never blocks the thread: a connection that is reset between
	 * poll and accept leaves accept4 with EAGAIN. */
	ioctl_nonblock(fd, 1);
	/* Create the thread with every signal blocked, so it never takes one,
	 * not even before its first instruction; the owner's mask is restored
	 * right after. */
	sigset_t all, old;
	sigfillset(&all);
	/* ... but the synchronous faults: one raised while blocked kills the
	 * process without running its handler (server/sigbus.h) */
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = -pthread_create(&l->thread, NULL, listener_main, l);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		what = "thread";
		goto fail_wake;
	}
	*out = l;
	return 0;

fail_wake:
	close(l->wakefd);
fail_l:
	free(l);
fail_fd:
	close(fd);
fail:
	snprintf(err, errlen, "fabric listener: %s%s%s", what, what[0] ? ": " : "",
		 strerror(-rc));
	return rc;
}

const char *fab_listener_addr(const struct fab_listener *l) { return l->addr; }

void fab_listener_stop(struct fab_listener *l)
{
	if (!l)
		return;
	uint64_t one = 1;
	ssize_t w = write(l->wakefd, &one, sizeof(one));
	(void)w; /* cannot fail: the counter is far from overflowing */
	pthread_join(l->thread, NULL);
	close(l->cfg.fd);
	close(l->wakefd);
	free(l);
}
