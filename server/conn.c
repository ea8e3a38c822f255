/*
 * conn.c: a client's life on its worker. The epoll loop reads bytes into
 * the client's parser; a coroutine then takes complete requests one by one
 * and dispatches them; the worker writes each client's replies in one
 * write(2) per round of its loop (client_flush_pending). Only one coroutine processes a client at a time
 * (CL_RUNNING), which keeps its replies in request order.
 */
#include "server/conn.h"

#include <arpa/inet.h>
#include <ck_pr.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cc/sched.h"
#include "server/acl.h"
#include "server/client.h"
#include "server/command.h"
#include "server/dispatch.h"
#include "server/log.h"
#include "server/node.h"
#include "server/pubsub.h"
#include "server/strutil.h"
#include "server/worker.h"

#define READ_CHUNK (64 * 1024)

static void fmt_addr(const struct sockaddr_storage *ss, char *buf, size_t cap)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	int port = 0;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const void *)ss;
		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
		port = ntohs(s4->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)ss;
		inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
		port = ntohs(s6->sin6_port);
	}
	snprintf(buf, cap, "%s:%d", ip, port);
}

static struct resp_limits limits_of(struct node *n)
{
	return (struct resp_limits){
		.max_query_buf = (size_t)n->cfg.query_buf_limit,
		.max_bulk_len = (size_t)n->cfg.proto_max_bulk_len,
		.max_multibulk = 1024 * 1024,
		.max_inline = 64 * 1024,
	};
}

struct client *client_create(struct worker *w, int fd)
{
	struct node *n = w->node;
	struct client *cl = calloc(1, sizeof(*cl));
	if (!cl)
		return NULL;
	struct resp_limits lim = limits_of(n);
	cl->parser = resp_parser_create(&lim);
	if (!cl->parser) {
		free(cl);
		return NULL;
	}
	cl->fd = fd;
	cl->w = w;
	cl->id = ck_pr_faa_64(&n->next_client_id, 1) + 1;
	cl->proto = 2;
	cl->perm = acl_default_perm(n, &cl->acl_gen);
	cl->authed = acl_default_nopass(n);
	cl->ctime = cl->last_active = time(NULL);
	resp_w_init(&cl->out, 2);
	resp_w_init(&cl->psq, 2);

	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
		fmt_addr(&ss, cl->addr, sizeof(cl->addr));
	sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		fmt_addr(&ss, cl->laddr, sizeof(cl->laddr));

	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = cl };
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
		acl_perm_put(cl->perm);
		resp_parser_free(cl->parser);
		resp_w_free(&cl->out);
		free(cl);
		return NULL;
	}
	pthread_mutex_lock(&w->clients_lock);
	cl->next = w->clients;
	if (w->clients)
		w->clients->prev = cl;
	w->clients = cl;
	w->nclients++;
	pthread_mutex_unlock(&w->clients_lock);
	ck_pr_inc_64(&n->connected_clients);
	w->stats.conns_received++;
	return cl;
}

static void client_free(struct client *cl)
{
	struct worker *w = cl->w;
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, cl->fd, NULL);
	close(cl->fd);
	pthread_mutex_lock(&w->clients_lock);
	if (cl->prev)
		cl->prev->next = cl->next;
	else
		w->clients = cl->next;
	if (cl->next)
		cl->next->prev = cl->prev;
	w->nclients--;
	pthread_mutex_unlock(&w->clients_lock);
	ck_pr_dec_64(&w->node->connected_clients);
	ps_client_drop(cl);
	client_discard_multi(cl);
	client_unwatch(cl);
	resp_parser_free(cl->parser);
	resp_w_free(&cl->out);
	resp_w_free(&cl->psq);
	free(cl->gbuf);
	free(cl->name);
	free(cl->lib_name);
	free(cl->lib_ver);
	acl_perm_put(cl->perm);
	free(cl);
}

void client_close(struct client *cl)
{
	if (cl->flags & CL_RUNNING) {
		cl->flags |= CL_CLOSE_ASAP;
		return;
	}
	if (cl->in_ready || cl->in_wlist) {
		/* A worker list still points here: let it drop us. */
		cl->flags |= CL_CLOSE_ASAP;
		return;
	}
	client_free(cl);
}

static void want_write(struct client *cl, bool on)
{
	struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = cl };
	epoll_ctl(cl->w->epfd, EPOLL_CTL_MOD, cl->fd, &ev);
}

/* Write what we can; returns -1 if the connection failed. */
static int flush_out(struct client *cl)
{
	while (cl->out_sent < cl->out.len) {
		ssize_t k = write(cl->fd, cl->out.p + cl->out_sent, cl->out.len - cl->out_sent);
		if (k > 0) {
			cl->out_sent += (size_t)k;
			cl->w->stats.net_out += (uint64_t)k;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			want_write(cl, true);
			return 0;
		}
		return -1;
	}
	if (cl->out.len) {
		resp_w_reset(&cl->out);
		cl->out_sent = 0;
	}
	return 0;
}

static void ready_push(struct client *cl)
{
	if (cl->flags & CL_RUNNING) {
		cl->more_input = true; /* its coroutine re-queues it when done */
		return;
	}
	if (cl->in_ready)
		return;
	struct worker *w = cl->w;
	cl->in_ready = true;
	cl->ready_next = NULL;
	if (w->ready_tail)
		w->ready_tail->ready_next = cl;
	else
		w->ready_head = cl;
	w->ready_tail = cl;
}

void client_on_readable(struct client *cl)
{
	char buf[READ_CHUNK];
	for (;;) {
		ssize_t k = read(cl->fd, buf, sizeof(buf));
		if (k > 0) {
			cl->w->stats.net_in += (uint64_t)k;
			if (resp_parser_feed(cl->parser, buf, (size_t)k) != 0) {
				client_close(cl);
				return;
			}
			if ((size_t)k < sizeof(buf))
				break;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		client_close(cl); /* EOF or error */
		return;
	}
	ready_push(cl);
}

void client_on_writable(struct client *cl)
{
	if (cl->flags & CL_RUNNING)
		return; /* its coroutine owns the buffer until it finishes */
	if (flush_out(cl) != 0) {
		client_close(cl);
		return;
	}
	if (cl->out_sent == cl->out.len) {
		want_write(cl, false);
		if (cl->flags & CL_CLOSE_AFTER_REPLY)
			client_close(cl);
	}
}

/*
 * Redis's checkClientOutputBufferLimits for the normal class (Pub/Sub
 * clients are pubsub.c's): replies not yet sent over the hard limit, or
 * over the soft limit for soft-seconds, close the client, with Redis's log
 * line. A client that reads nothing while it pipelines requests can then
 * not make the server hold its replies without bound.
 */
static bool out_over_limit(struct client *cl)
{
	struct node *n = cl->w->node;
	uint64_t hard = ck_pr_load_64(&n->cfg.cobl[SRV_COBL_NORMAL][0]);
	uint64_t soft = ck_pr_load_64(&n->cfg.cobl[SRV_COBL_NORMAL][1]);
	if ((!hard && !soft) || (cl->flags & CL_PUBSUB))
		return false; /* the default: no limit */
	uint64_t secs = ck_pr_load_64(&n->cfg.cobl[SRV_COBL_NORMAL][2]);
	uint64_t pending = cl->out.len - cl->out_sent;
	bool over = false;
	if (hard && pending >= hard) {
		over = true;
	} else if (soft && pending >= soft) {
		time_t now = time(NULL);
		if (!cl->obuf_soft_since)
			cl->obuf_soft_since = now; /* as Redis: never on the first sight */
		else
			over = (uint64_t)(now - cl->obuf_soft_since) >= secs;
	} else {
		cl->obuf_soft_since = 0;
	}
	if (over) {
		struct srv_sbuf b = { 0 };
		client_info_line(&b, cl);
		srv_log(n, LOG_WARNING, "Client %s scheduled to be closed ASAP for overcoming of "
			"output buffer limits.", b.p ? b.p : "?");
		srv_sbuf_free(&b);
	}
	return over;
}

/* The coroutine body: process every complete request, then write. */
static void client_run(struct sched *s, void *arg)
{
	(void)s;
	struct client *cl = arg;
	struct worker *w = cl->w;
	for (;;) {
		int argc;
		struct resp_arg *argv;
		const char *err;
		enum resp_status st = resp_parser_next(cl->parser, &argc, &argv, &err);
		if (st == RESP_AGAIN)
			break;
		if (st == RESP_ERR) {
			srv_group_run(w, cl); /* the replies before it first */
			if (strstr(err, "query buffer limit")) { /* Redis's log line */
				struct srv_sbuf b = { 0 };
				client_info_line(&b, cl);
				srv_log(w->node, LOG_WARNING, "Closing client that reached max query "
					"buffer length: %s", b.p ? b.p : "?");
				srv_sbuf_free(&b);
			}
			resp_errorf(&cl->out, "ERR %s", err);
			w->stats.proto_errors++;
			cl->flags |= CL_CLOSE_AFTER_REPLY;
			break;
		}
		cl->last_active = time(NULL);
		const struct cmd_def *def = cmd_lookup(argv[0].p, argv[0].len);
		if (srv_group_add(w, cl, def, argc, argv)) {
			/* It runs with the writes after it (dispatch.c, "Groups"). */
			if (cl->ngrp < SRV_GROUP_MAX)
				continue;
			srv_group_run(w, cl);
		} else {
			srv_group_run(w, cl);
			/* CLIENT REPLY OFF / SKIP: the reply is dropped (its
			 * group never forms: srv_group_add). */
			bool skip = cl->reply_skip, off = cl->reply_off;
			size_t mark = cl->out.len;
			cl->reply_skip = false;
			srv_dispatch(w, cl, def, argc, argv);
			if (skip || (off && cl->reply_off))
				cl->out.len = mark;
		}
		if (cl->ps)
			ps_client_flush_deferred(cl); /* between replies, not inside one */
		if (cl->flags & (CL_CLOSE_AFTER_REPLY | CL_CLOSE_ASAP))
			break;
		if (ck_pr_load_int(&w->node->shutdown))
			break;
		/* Keep replies of a long pipeline flowing. */
		if (cl->out.len - cl->out_sent > (1u << 20) && flush_out(cl) != 0) {
			cl->flags |= CL_CLOSE_ASAP;
			break;
		}
		if (out_over_limit(cl)) {
			cl->flags |= CL_CLOSE_ASAP;
			break;
		}
	}
	srv_group_run(w, cl); /* what is left of a pipeline of writes */
	if (cl->ps)
		ps_client_flush_deferred(cl);
	cl->flags &= ~CL_RUNNING;
	if (cl->flags & CL_CLOSE_ASAP) {
		client_close(cl);
		return;
	}
	/* The replies go out with the round's others (client_flush_pending). */
	if (cl->out.len > cl->out_sent || (cl->flags & CL_CLOSE_AFTER_REPLY))
		client_queue_write(cl);
	if (cl->more_input) {
		cl->more_input = false;
		ready_push(cl);
	}
}

void client_queue_write(struct client *cl)
{
	if (cl->in_wlist)
		return;
	struct worker *w = cl->w;
	cl->in_wlist = true;
	cl->wnext = w->wlist;
	w->wlist = cl;
}

void client_flush_pending(struct worker *w)
{
	struct client *cl = w->wlist;
	w->wlist = NULL;
	while (cl) {
		struct client *next = cl->wnext;
		cl->in_wlist = false;
		if (cl->flags & CL_RUNNING) {
			/* Started again meanwhile: its coroutine owns the buffer
			 * and queues the client again when it finishes. */
		} else if ((cl->flags & CL_CLOSE_ASAP) || flush_out(cl) != 0 ||
			   ((cl->flags & CL_CLOSE_AFTER_REPLY) && cl->out_sent == cl->out.len)) {
			client_close(cl);
		}
		cl = next;
	}
}

int client_start(struct client *cl)
{
	if (cl->flags & CL_RUNNING)
		return 0;
	cl->flags |= CL_RUNNING;
	int rc = sched_spawn(cl->w->sched, client_run, cl);
	if (rc != 0)
		cl->flags &= ~CL_RUNNING;
	return rc;
}

void client_close_all(struct worker *w)
{
	w->wlist = NULL;
	while (w->clients) {
		struct client *cl = w->clients;
		cl->flags &= ~CL_RUNNING;
		cl->in_ready = false;
		cl->in_wlist = false;
		client_free(cl);
	}
}

void client_reap_idle(struct worker *w, int timeout)
{
	time_t now = time(NULL);
	struct client *cl = w->clients, *next;
	for (; cl; cl = next) {
		next = cl->next;
		if (!(cl->flags & (CL_RUNNING | CL_MULTI)) && now - cl->last_active > timeout)
			client_close(cl);
	}
}
