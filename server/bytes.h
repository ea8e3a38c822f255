/*
 * bytes: the little-endian fields and LEB128 varints that the collection
 * layouts (server/coll.c, list.c, zset.c) store in their roots and parts.
 */
#ifndef RCKV_SRV_BYTES_H
#define RCKV_SRV_BYTES_H

#include <stddef.h>
#include <stdint.h>

static inline void put16(char *p, uint16_t v)
{
	p[0] = (char)v;
	p[1] = (char)(v >> 8);
}

static inline void put32(char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (char)(v >> (8 * i));
}

static inline void put64(char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (char)(v >> (8 * i));
}

static inline uint16_t get16(const char *p)
{
	return (uint16_t)((uint8_t)p[0] | (uint16_t)(uint8_t)p[1] << 8);
}

static inline uint32_t get32(const char *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = v << 8 | (uint8_t)p[i];
	return v;
}

static inline uint64_t get64(const char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | (uint8_t)p[i];
	return v;
}

/* v as a LEB128 varint at p (room for 10 bytes); its length. */
static inline size_t vput(char *p, uint64_t v)
{
	size_t n = 0;
	do {
		uint8_t b = v & 0x7f;
		v >>= 7;
		p[n++] = (char)(b | (v ? 0x80 : 0));
	} while (v);
	return n;
}

/* A varint at p (before end) into *v; its length, 0 when malformed. */
static inline size_t vget(const char *p, const char *end, uint64_t *v)
{
	uint64_t r = 0;
	for (size_t i = 0; i < 10 && p + i < end; i++) {
		uint8_t b = (uint8_t)p[i];
		r |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			*v = r;
			return i + 1;
		}
	}
	return 0;
}

#endif
