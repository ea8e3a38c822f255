/*
 * listen: a node's fabric listener (DESIGN.md section 8).
 *
 * Every connection to a node's fabric address opens with a struct
 * tcp_hello (rdma/tcp_wire.h). The listener is a thread that accepts them,
 * reads and checks the hello, and hands the connection on:
 *  - DATA (a peer worker's tcp endpoint) to the fabric, with fab_adopt;
 *  - any other well-formed kind (CTL: the control plane) to the owner's
 *    callback, or closes it when there is none;
 * and closes a connection whose hello is malformed (wrong magic or
 * version, unknown type, node id out of range), that closes early, or
 * that does not complete its hello within FAB_LISTEN_HELLO_MS. Then it goes
 * on accepting. One connection is read at a time: a peer that stalls in
 * its hello holds up the others for at most FAB_LISTEN_HELLO_MS.
 *
 * Its users: server/cluster.c (data and control connections of a node),
 * bench/fabric.c and tests/unit/test_fabric.c (data connections of an
 * in-process node over loopback).
 *
 * Threads: fab_listener_start and fab_listener_stop are called by the
 * listener's owner, one thread; the listener's own thread runs the
 * callback. That thread blocks every signal (from its creation on), so
 * process-directed signals reach the owner's threads, and so do threads
 * the callback creates (they inherit its mask).
 */
#ifndef RCKV_FAB_LISTEN_H
#define RCKV_FAB_LISTEN_H

#include <stddef.h>

#include "rdma/fab.h"

#define FAB_LISTEN_HELLO_MS 2000 /* a connection's time to send its whole hello */

struct tcp_hello;
struct fab_listener; /* opaque */

/*
 * What the listener does with a connection whose hello is well-formed and
 * not DATA. Runs on the listener's thread, so it must not block for long
 * (start a thread of its own for a long conversation). `fd` is a blocking
 * socket with no receive timeout, past the hello; `h` is the hello, valid
 * during the call. Returns 0 if it took the fd (and will close it), or a
 * negative value: then the listener closes it.
 */
typedef int (*fab_listen_other_fn)(void *arg, int fd, const struct tcp_hello *h);

struct fab_listener_config {
	int fd;                    /* a bound, listening socket; -1: listen on
				      127.0.0.1 on a port the kernel picks */
	struct fab *fab;           /* DATA connections go to fab_adopt(fab, ...) */
	fab_listen_other_fn other; /* other kinds (CTL); NULL: close them */
	void *arg;                 /* passed to other */
};

/*
 * fab_listen_loopback - a listening TCP socket on 127.0.0.1, on a port the
 * kernel picks, for in-process nodes (tests, bench) that must know their
 * address before the listener starts (before a fork, say).
 * @addr:    receives "127.0.0.1:<port>", the form fab_peer_info.addr takes.
 * @addrlen: its capacity; 22 bytes are enough.
 * Returns the socket (close-on-exec), or -errno. Any thread.
 */
int fab_listen_loopback(char *addr, size_t addrlen);

/*
 * fab_listener_start - start a listener thread.
 * @cfg:  what to listen on and where connections go; copied. The
 *        listener owns cfg->fd from here on, whatever the result: it is
 *        made non-blocking, and closed by fab_listener_stop (or here, on
 *        failure). cfg->fab must stay open until fab_listener_stop.
 * @out:  receives the listener.
 * Returns 0, or -errno (socket, eventfd or thread creation) with a
 * message in err.
 */
int fab_listener_start(const struct fab_listener_config *cfg, struct fab_listener **out,
		       char *err, size_t errlen);

/*
 * fab_listener_addr - "host:port" of the listening socket, as a peer would
 * pass it to fab_attach_peer (an IPv6 host unbracketed). Valid until
 * fab_listener_stop. Owner thread.
 */
const char *fab_listener_addr(const struct fab_listener *l);

/*
 * fab_listener_stop - stop accepting, close the connection whose hello is
 * being read, if any, and the listening socket, join the thread and free
 * the listener. Prompt: the thread is woken at once, even in the middle of
 * a hello; it does not wait for a timeout. Connections already handed to
 * the fabric or to the callback are theirs, and stay open. l may be NULL.
 * Owner thread.
 */
void fab_listener_stop(struct fab_listener *l);

#endif
