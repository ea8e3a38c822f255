/*
 * worker.c: a worker thread (DESIGN.md section 3): an epoll loop over its
 * clients, the listening sockets (shared by all workers with EPOLLEXCLUSIVE,
 * so one wakes per connection) and an eventfd; accepted connections are
 * spread round-robin and handed to their worker through a ck_ring; the
 * coroutine scheduler runs between epoll waits. Idle means asleep: with no
 * ready coroutine and no sleeper, epoll_wait blocks without a timeout, once
 * busy-poll-us have passed with nothing to do (worker_wait).
 */
#include "server/worker.h"

#include <ck_pr.h>
#include <ck_ring.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cc/exec.h"
#include "cc/sched.h"
#include "rdma/fab.h"
#include "server/acl.h"
#include "server/client.h"
#include "server/conn.h"
#include "server/cmdstat.h"
#include "server/log.h"
#include "server/pubsub.h"
#include "server/script.h"
#include "server/sigbus.h"

#define HANDOFF_SLOTS 1024
/* 8 MB, as a thread's: a Lua script recurses in C where Lua does not
 * bound it (its pattern matcher, cjson's decoder), as deep as Redis's
 * main thread allows. Mapped with MAP_NORESERVE (cc/coro.c), so only the
 * pages a coroutine touched take memory. */
#define CORO_STACK (8 * 1024 * 1024)

/* epoll tags that are not clients */
static char tag_wake, tag_fab, tag_listen[SRV_MAX_BIND];

struct handoff {
	struct ck_ring ring;
	struct ck_ring_buffer buf[HANDOFF_SLOTS];
};

static uint64_t rr_counter;

void worker_wake(struct worker *w)
{
	uint64_t one = 1;
	ssize_t k = write(w->wakefd, &one, sizeof(one));
	(void)k;
}

/* Redis's protected mode message, byte for byte (its typo included). */
static const char denied_msg[] =
	"-DENIED Redis is running in protected mode because protected mode is enabled and no "
	"password is set for the default user. In this mode connections are only accepted from "
	"the loopback interface. If you want to connect from external computers to Redis you "
	"may adopt one of the following solutions: 1) Just disable protected mode sending the "
	"command 'CONFIG SET protected-mode no' from the loopback interface by connecting to "
	"Redis from the same host the server is running, however MAKE SURE Redis is not "
	"publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change "
	"permanent. 2) Alternatively you can just disable the protected mode by editing the "
	"Redis configuration file, and setting the protected mode option to 'no', and then "
	"restarting the server. 3) If you started the server manually just for testing, "
	"restart it with the '--protected-mode no' option. 4) Setup a an authentication "
	"password for the default user. NOTE: You only need to do one of the above things in "
	"order for the server to start accepting connections from the outside.\r\n";

/* Redis's idea of the loopback interface: exactly 127.0.0.1 or ::1 (so a
 * client from 127.0.0.2 is outside, as with redis-server 7.0.15). */
static bool peer_is_loopback(int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
		return false;
	if (ss.ss_family == AF_UNIX)
		return true;
	if (ss.ss_family == AF_INET)
		return ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) == INADDR_LOOPBACK;
	if (ss.ss_family == AF_INET6) {
		const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
		static const unsigned char v4lo[16] = { [10] = 0xff, [11] = 0xff, [12] = 127,
							[15] = 1 };
		return IN6_IS_ADDR_LOOPBACK(a) || memcmp(a, v4lo, 16) == 0;
	}
	return false;
}

static void adopt(struct worker *w, int fd)
{
	struct node *n = w->node;
	if ((long long)ck_pr_load_64(&n->connected_clients) >= n->cfg.maxclients) {
		static const char msg[] = "-ERR max number of clients reached\r\n";
		ssize_t k = write(fd, msg, sizeof(msg) - 1);
		(void)k;
		close(fd);
		w->stats.conns_rejected++;
		return;
	}
	if (ck_pr_load_8((uint8_t *)&n->cfg.protected_mode) && !peer_is_loopback(fd) &&
	    acl_default_nopass(n)) {
		ssize_t k = write(fd, denied_msg, sizeof(denied_msg) - 1);
		(void)k;
		close(fd);
		w->stats.conns_rejected++;
		return;
	}
	if (!client_create(w, fd)) {
		close(fd);
		srv_log(n, LOG_WARNING, "could not set up a client connection");
	}
}

static void on_accept(struct worker *w, int lfd)
{
	struct node *n = w->node;
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				srv_log(n, LOG_WARNING, "accept: %s", strerror(errno));
			return;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		uint64_t k = ck_pr_faa_64(&rr_counter, 1);
		struct worker *to = n->workers[k % (uint64_t)n->nworkers];
		struct handoff *h = to->handoff;
		if (to == w || !ck_ring_enqueue_mpsc(&h->ring, h->buf, (void *)(intptr_t)fd)) {
			adopt(w, fd);
			continue;
		}
		worker_wake(to);
	}
}

struct worker_task {
	void (*fn)(struct worker *w, void *arg);
	void *arg;
	struct worker *w;
	int state; /* 0 queued, 1 done, -ESHUTDOWN dropped */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct worker_task *next;
};

static void task_finish(struct worker_task *t, int state)
{
	pthread_mutex_lock(&t->mu);
	t->state = state;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

static void task_main(struct sched *s, void *arg)
{
	struct worker_task *t = arg;
	t->fn(t->w, t->arg);
	task_finish(t, 1);
}

/* Start the queued tasks while coroutines are free. */
static void start_tasks(struct worker *w)
{
	if (!ck_pr_load_ptr(&w->tasks))
		return;
	pthread_mutex_lock(&w->tasks_mu);
	while (w->tasks && sched_free_count(w->sched) > 0) {
		struct worker_task *t = w->tasks;
		w->tasks = t->next;
		if (sched_spawn(w->sched, task_main, t) != 0) {
			t->next = w->tasks;
			w->tasks = t;
			break;
		}
	}
	pthread_mutex_unlock(&w->tasks_mu);
}

static void drop_tasks(struct worker *w)
{
	pthread_mutex_lock(&w->tasks_mu);
	w->tasks_closed = true;
	while (w->tasks) {
		struct worker_task *t = w->tasks;
		w->tasks = t->next;
		task_finish(t, -ESHUTDOWN);
	}
	pthread_mutex_unlock(&w->tasks_mu);
}

int worker_call(struct worker *w, void (*fn)(struct worker *w, void *arg), void *arg)
{
	struct worker_task t = { .fn = fn, .arg = arg, .w = w };
	pthread_mutex_init(&t.mu, NULL);
	pthread_cond_init(&t.cv, NULL);
	pthread_mutex_lock(&w->tasks_mu);
	if (w->tasks_closed) {
		pthread_mutex_unlock(&w->tasks_mu);
		return -ESHUTDOWN;
	}
	t.next = w->tasks;
	ck_pr_store_ptr(&w->tasks, &t);
	pthread_mutex_unlock(&w->tasks_mu);
	worker_wake(w);
	pthread_mutex_lock(&t.mu);
	while (t.state == 0)
		pthread_cond_wait(&t.cv, &t.mu);
	pthread_mutex_unlock(&t.mu);
	pthread_cond_destroy(&t.cv);
	pthread_mutex_destroy(&t.mu);
	return t.state == 1 ? 0 : t.state;
}

static void drain_handoff(struct worker *w)
{
	uint64_t v;
	ssize_t k = read(w->wakefd, &v, sizeof(v));
	(void)k;
	struct handoff *h = w->handoff;
	void *p;
	while (ck_ring_dequeue_mpsc(&h->ring, h->buf, &p))
		adopt(w, (int)(intptr_t)p);
	ps_worker_drain(w); /* Pub/Sub messages share the wake (server/pubsub.c) */
}

int worker_give_fd(struct worker *w, int fd)
{
	struct handoff *h = w->handoff;
	if (!ck_ring_enqueue_mpsc(&h->ring, h->buf, (void *)(intptr_t)fd))
		return -EAGAIN;
	worker_wake(w);
	return 0;
}

static void run_ready(struct worker *w)
{
	while (w->ready_head) {
		struct client *cl = w->ready_head;
		if (cl->flags & CL_CLOSE_ASAP) {
			w->ready_head = cl->ready_next;
			if (!w->ready_head)
				w->ready_tail = NULL;
			cl->in_ready = false;
			client_close(cl);
			continue;
		}
		if (client_start(cl) != 0)
			break; /* every coroutine busy: try again after they run */
		w->ready_head = cl->ready_next;
		if (!w->ready_head)
			w->ready_tail = NULL;
		cl->in_ready = false;
	}
}

/*
 * Wait for events, at most timeout_ns (< 0: no limit). After a round that had
 * events, poll for up to busy-poll-us first, yielding the core between polls:
 * a request-response client (redis-benchmark -P 1, a coroutine's fabric
 * reply from a peer) usually sends again within microseconds, and a worker
 * that is not asleep then costs neither side a wake-up (measured: 25% more
 * -P 1 requests per second, 15% more transactions on a 3-node cluster on 2
 * cores; bench/redis-compare.sh, bench/protocols.sh). sched_yield hands the
 * core to any other runnable thread, so the polling only spends CPU that
 * would be idle; a worker with nothing to do for busy-poll-us sleeps.
 */
static int worker_wait(struct worker *w, struct epoll_event *evs, int nevs, int64_t timeout_ns)
{
	int64_t poll_ns = (int64_t)ck_pr_load_int(&w->node->cfg.busy_poll_us) * 1000;
	/* A coroutine due within the polling window (a fabric-delay-us round
	 * trip, a 2 us lock backoff) means a transaction is in progress, not
	 * that the worker is idle, even when the last wait had no events: poll
	 * until it is due rather than sleep on a timer, whose wake-up on a
	 * busy host takes tens of microseconds (measured: shm with
	 * fabric-delay-us 5, one client, the workers slept once per round trip
	 * of a 10-operation MULTI). An idle worker has no such sleeper. */
	bool due_soon = timeout_ns > 0 && timeout_ns <= poll_ns;
	if (timeout_ns != 0 && poll_ns > 0 && (w->busy || due_soon)) {
		if (timeout_ns > 0 && timeout_ns < poll_ns)
			poll_ns = timeout_ns;
		const struct timespec zero = { 0, 0 };
		uint64_t start = sched_now_ns();
		for (;;) {
			int k = epoll_pwait2(w->epfd, evs, nevs, &zero, NULL);
			if (k != 0)
				return k;
			int64_t spent = (int64_t)(sched_now_ns() - start);
			if (spent >= poll_ns) {
				if (timeout_ns > 0)
					timeout_ns = timeout_ns > spent ? timeout_ns - spent : 0;
				break;
			}
			sched_yield();
		}
	}
	struct timespec ts = { .tv_sec = timeout_ns / 1000000000,
			       .tv_nsec = timeout_ns % 1000000000 };
	return epoll_pwait2(w->epfd, evs, nevs, timeout_ns < 0 ? NULL : &ts, NULL);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct node *n = w->node;
	char name[16];
	snprintf(name, sizeof(name), "rckv-worker-%d", w->id);
	pthread_setname_np(pthread_self(), name); /* top -H, perf, gdb */
	/* main handles signals; faults stay deliverable (sigbus.h) */
	srv_block_async_signals();

	struct epoll_event evs[256];
	time_t last_reap = time(NULL);
	bool stopping = false;
	for (;;) {
		if (!stopping && ck_pr_load_int(&n->shutdown)) {
			stopping = true;
			for (int i = 0; i < n->nlisten; i++)
				epoll_ctl(w->epfd, EPOLL_CTL_DEL, n->listen_fds[i], NULL);
		}
		if (stopping && sched_idle(w->sched))
			break;
		/* Nanosecond timeouts (epoll_pwait2): a coroutine backing off
		 * for 2 us must not sleep a whole millisecond. */
		int64_t timeout = sched_timeout_ns(w->sched);
		if (((w->ready_head || ck_pr_load_ptr(&w->tasks)) && sched_free_count(w->sched) > 0) ||
		    cc_worker_pass_due(w->ccw) || ps_worker_pending(w))
			timeout = 0; /* cc_worker_pass_due: commits no one syncs else;
					ps_worker_pending: messages it sent itself */
		if (n->cfg.timeout > 0 && (timeout < 0 || timeout > 1000000000))
			timeout = 1000000000;
		if (stopping && (timeout < 0 || timeout > 10000000))
			timeout = 10000000;
		int k = worker_wait(w, evs, 256, timeout);
		w->busy = k > 0;
		cc_worker_tick(w->ccw);
		for (int i = 0; i < k; i++) {
			void *tag = evs[i].data.ptr;
			if (tag == &tag_wake) {
				drain_handoff(w);
			} else if (tag == &tag_fab) {
				fab_worker_poll(w->fw); /* completions unpark coroutines */
			} else if (tag >= (void *)&tag_listen[0] &&
				   tag < (void *)&tag_listen[SRV_MAX_BIND]) {
				int idx = (int)((char *)tag - tag_listen);
				if (!stopping)
					on_accept(w, n->listen_fds[idx]);
			} else {
				struct client *cl = tag;
				if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
					client_on_readable(cl);
				else if (evs[i].events & EPOLLOUT)
					client_on_writable(cl);
			}
		}
		/* A client closed during this batch may still have a later event
		 * in evs: client_close defers freeing while it is ready or
		 * running, and epoll stops reporting it once its fd is closed. */
		if (!stopping)
			run_ready(w);
		start_tasks(w);
		sched_run(w->sched);
		fab_worker_flush(w->fw); /* the fabric requests its coroutines posted */
		ps_worker_drain(w); /* what its coroutines published to it: no wake (pubsub.c) */
		/* The replies before the commits' sync: persistence power may
		 * sync on this thread (cc/durable.c, wal_round), and the replies
		 * of the previous round's commits must not wait for this one. */
		client_flush_pending(w);
		if (cc_worker_pass_end(w->ccw)) {
			/* It synced here: the commits it woke reply now, as
			 * Redis writes its replies right after its fsync. */
			sched_run(w->sched);
			fab_worker_flush(w->fw);
			client_flush_pending(w);
		}
		if (n->cfg.timeout > 0 && time(NULL) - last_reap >= 1) {
			last_reap = time(NULL);
			client_reap_idle(w, n->cfg.timeout);
		}
	}
	drop_tasks(w);
	client_close_all(w);
	return NULL;
}

int worker_start(struct node *n, int id, struct worker **out, char *err, size_t errlen)
{
	struct worker *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->node = n;
	w->id = id;
	pthread_mutex_init(&w->clients_lock, NULL);
	pthread_mutex_init(&w->tasks_mu, NULL);
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	w->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	struct handoff *h = calloc(1, sizeof(*h));
	w->handoff = h;
	/* One coroutine more than clients may take: calvin's grant notifier
	 * must find one when every client's coroutine waits for a grant
	 * (cc/calvin.c). */
	w->sched = sched_create(n->cfg.coroutines + 1, CORO_STACK);
	if (w->sched)
		sched_reserve(w->sched, 1);
	if (w->epfd < 0 || w->wakefd < 0 || !h || !w->sched) {
		snprintf(err, errlen, "worker %d: out of memory or file descriptors", id);
		return -ENOMEM;
	}
	w->fw = fab_worker_create_err(n->cc.fab, id, err, errlen);
	if (!w->fw)
		return -EHOSTUNREACH;
	ck_ring_init(&h->ring, HANDOFF_SLOTS);
	w->ccw = cc_worker_create(&n->cc, id, w->sched, w->fw);
	w->scripts = script_pool_create();
	w->ps = ps_worker_create();
	w->cstat = cmdstat_create();
	if (!w->ccw || !w->scripts || !w->ps || !w->cstat)
		return -ENOMEM;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &tag_wake };
	epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wakefd, &ev);
	int ffds[8];
	int nf = fab_worker_fds(w->fw, ffds, 8);
	for (int i = 0; i < nf; i++) {
		struct epoll_event fev = { .events = EPOLLIN, .data.ptr = &tag_fab };
		epoll_ctl(w->epfd, EPOLL_CTL_ADD, ffds[i], &fev);
	}
	for (int i = 0; i < n->nlisten; i++) {
		struct epoll_event lev = { .events = EPOLLIN | EPOLLEXCLUSIVE,
					   .data.ptr = &tag_listen[i] };
		epoll_ctl(w->epfd, EPOLL_CTL_ADD, n->listen_fds[i], &lev);
	}
	*out = w;
	return 0;
}

int worker_run(struct worker *w)
{
	return pthread_create(&w->thread, NULL, worker_main, w) ? -EAGAIN : 0;
}

void worker_join(struct worker *w)
{
	pthread_join(w->thread, NULL);
}

void worker_destroy(struct worker *w)
{
	if (!w)
		return;
	script_pool_free(w->scripts);
	ps_worker_destroy(w->ps);
	cmdstat_free(w->cstat);
	cc_worker_destroy(w->ccw);
	fab_worker_destroy(w->fw);
	sched_destroy(w->sched);
	free(w->handoff);
	close(w->epfd);
	close(w->wakefd);
	pthread_mutex_destroy(&w->clients_lock);
	pthread_mutex_destroy(&w->tasks_mu);
	free(w);
}
