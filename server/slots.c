/*
 * slots.c: CRC16 slots and slot maps. The CRC is CRC-16/XMODEM (polynomial
 * 0x1021, initial value 0, no reflection), the one Redis Cluster uses, so
 * users can predict key placement with the usual tools. The table is
 * computed once, not copied in.
 */
#include "server/slots.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static uint16_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (int i = 0; i < 256; i++) {
		uint16_t c = (uint16_t)(i << 8);
		for (int b = 0; b < 8; b++)
			c = (c & 0x8000) ? (uint16_t)((c << 1) ^ 0x1021) : (uint16_t)(c << 1);
		crc_table[i] = c;
	}
}

uint16_t slot_crc16(const char *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
	uint16_t crc = 0;
	for (size_t i = 0; i < len; i++)
		crc = (uint16_t)((crc << 8) ^ crc_table[((crc >> 8) ^ (uint8_t)buf[i]) & 0xff]);
	return crc;
}

unsigned slot_of_key(const char *key, size_t len)
{
	const char *open = memchr(key, '{', len);
	if (open) {
		size_t rest = len - (size_t)(open - key) - 1;
		const char *close = memchr(open + 1, '}', rest);
		if (close && close > open + 1)
			return slot_crc16(open + 1, (size_t)(close - open - 1)) & (SLOT_COUNT - 1);
	}
	return slot_crc16(key, len) & (SLOT_COUNT - 1);
}

void slot_map_single(struct slot_map *m, int id, const char *host, int port)
{
	memset(m, 0, sizeof(*m));
	m->nnodes = 1;
	m->nodes[0].id = id;
	snprintf(m->nodes[0].host, sizeof(m->nodes[0].host), "%s", host);
	m->nodes[0].port = port;
}

void slot_map_spread(struct slot_map *m)
{
	for (unsigned s = 0; s < SLOT_COUNT; s++)
		m->owner[s] = (uint8_t)((uint64_t)s * (uint64_t)m->nnodes / SLOT_COUNT);
}
