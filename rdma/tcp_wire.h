/*
 * tcp_wire: the byte formats of the tcp fabric (see tcp.c), kept apart so
 * they can be unit-tested without sockets.
 */
#ifndef RCKV_TCP_WIRE_H
#define RCKV_TCP_WIRE_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "rdma/fab.h"

#define TCP_HELLO_MAGIC "RCKVFAB1"
enum { TCP_HELLO_DATA = 1, TCP_HELLO_CTL = 2 };

/* First bytes on every connection to a fabric listener. */
struct tcp_hello {
	char magic[8];
	uint16_t type;   /* TCP_HELLO_DATA or TCP_HELLO_CTL */
	uint16_t from;   /* sender's node id */
	uint16_t worker; /* sender's worker (DATA) */
	uint16_t reserved;
};
static_assert(sizeof(struct tcp_hello) == 16, "hello is 16 bytes");

struct tcp_wire_op {
	uint8_t kind;
	uint8_t pad[3];  /* pad[0]: FAB_OP_FLUSH on a READ (fab_flush); else 0.
			  * pad[1], pad[2]: 0 (a frame with others is refused) */
	uint32_t len;
	uint64_t off;
	uint64_t cmp;
	uint64_t swp;
};
static_assert(sizeof(struct tcp_wire_op) == 32, "wire op is 32 bytes");

void tcp_hello_encode(struct tcp_hello *h, uint16_t type, uint16_t from, uint16_t worker);
/* 0 if h is a well-formed hello. */
int tcp_hello_check(const struct tcp_hello *h);

/* Bytes of the request frame for these ops (including the length word). */
size_t tcp_request_size(struct fab_op *const *ops, int n);
/* Write the request frame for ops at q (tcp_request_size bytes). */
void tcp_request_encode(char *q, struct fab_op *const *ops, int n);
/*
 * Parse the request frame at q (whose length word says flen) into ops,
 * pointing WRITE and RPC bufs into q (an RPC's reply capacity in cmp).
 * Fills *resp with the response payload size of its one-sided ops (RPC
 * replies come after them, each i32 status, u32 len, len bytes). Returns
 * 0, or -EPROTO if the frame is malformed (RPCs must end it).
 */
int tcp_request_decode(const char *q, uint32_t flen, struct fab_op *ops, uint32_t nops,
		       uint32_t *resp);
/* Copy a response payload of plen bytes into the ops' READ buffers,
 * old-value slots and RPC replies; -EPROTO if it does not fit them. */
int tcp_response_decode(const char *payload, size_t plen, struct fab_op *const *ops, int n);

/* Connect to "host:port" (blocking, with a send timeout); TCP_NODELAY set.
 * Returns the fd, or -errno with err filled. */
int fab_tcp_connect(const char *addr, int timeout_ms, char *err, size_t errlen);

/* Set O_NONBLOCK on fd (on = 1) or clear it. */
void ioctl_nonblock(int fd, int on);

#endif
