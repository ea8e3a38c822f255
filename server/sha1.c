/*
 * sha1.c: SHA-1 as FIPS 180-4 section 6.1 states it: the message padded
 * to a multiple of 64 bytes with a 1 bit, zeros and its bit length, each
 * block expanded to 80 words and folded into five state words.
 */
#include "server/sha1.h"

#include <stdint.h>
#include <string.h>

static uint32_t rol32(uint32_t x, int n)
{
	return (x << n) | (x >> (32 - n));
}

static void sha1_block(uint32_t h[5], const unsigned char *b)
{
	uint32_t w[80];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
		       (uint32_t)b[4 * i + 2] << 8 | (uint32_t)b[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol32(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);

	uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4];
	for (int i = 0; i < 80; i++) {
		uint32_t f, k;
		if (i < 20) {
			f = (bb & c) | (~bb & d);
			k = 0x5a827999;
		} else if (i < 40) {
			f = bb ^ c ^ d;
			k = 0x6ed9eba1;
		} else if (i < 60) {
			f = (bb & c) | (bb & d) | (c & d);
			k = 0x8f1bbcdc;
		} else {
			f = bb ^ c ^ d;
			k = 0xca62c1d6;
		}
		uint32_t t = rol32(a, 5) + f + e + k + w[i];
		e = d;
		d = c;
		c = rol32(bb, 30);
		bb = a;
		a = t;
	}
	h[0] += a;
	h[1] += bb;
	h[2] += c;
	h[3] += d;
	h[4] += e;
}

void sha1_hex(const void *data, size_t len, char out[41])
{
	uint32_t h[5] = { 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0 };
	const unsigned char *p = data;
	size_t left = len;
	for (; left >= 64; p += 64, left -= 64)
		sha1_block(h, p);

	/* The tail, the 0x80 byte and the length: one block, or two when
	 * the tail leaves less than 9 bytes. */
	unsigned char tail[128] = { 0 };
	memcpy(tail, p, left);
	tail[left] = 0x80;
	size_t n = left + 9 <= 64 ? 64 : 128;
	uint64_t bits = (uint64_t)len * 8;
	for (int i = 0; i < 8; i++)
		tail[n - 1 - i] = (unsigned char)(bits >> (8 * i));
	for (size_t off = 0; off < n; off += 64)
		sha1_block(h, tail + off);

	static const char hex[] = "0123456789abcdef";
	for (int i = 0; i < 20; i++) {
		unsigned char byte = (unsigned char)(h[i / 4] >> (24 - 8 * (i % 4)));
		out[2 * i] = hex[byte >> 4];
		out[2 * i + 1] = hex[byte & 15];
	}
	out[40] = '\0';
}
