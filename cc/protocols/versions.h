/*
 * versions.h: the fixed version slots that mvcc and cicada keep inside an
 * item's block (RCBench 6.2.2's "fixed number of version slots"; RCC 4.4),
 * so that one READ fetches every version. One layout, one set of helpers,
 * two protocols (mvcc.c, cicada.c).
 *
 * Layout. Word 1 (ver) is the wts of the newest version, whose value is
 * the block's value (data word 5). meta[1] is the descriptor:
 *   bits 40..47  status of the newest version (cicada: VER_ST_*; always
 *                VER_ST_CM, i.e. 0, under mvcc);
 *   bits 32..39  count of older versions after the value;
 *   bits  0..31  bytes of those older versions;
 *   bits 48..63  0.
 * 0 is "committed, no older version": what a switch into either protocol
 * (st_reset_meta) and a relocation (prim.c reloc_post_block) leave.
 * After the newest value comes the tail: `count` older versions, newest
 * first, each
 *   wts:8 | data:8 (the item's data word: vlen, vflags, ST_F_ABSENT) | value, padded
 *   with zeros to a multiple of 8 bytes,
 * `bytes` bytes in all. An ABSENT version (the key deleted or not yet
 * created at that time) has vlen 0. A version enters the tail only when a
 * newer one is installed over it under the item's lock, by a writer that
 * found it committed, so every tail version is committed (no status of
 * its own is stored for it).
 *
 * Who writes: only an install under the item's lock (prim.c) writes ver,
 * the descriptor and the tail, and the undo record restores all three
 * (cc/undo.c keeps a->otail bytes after the value). cicada's commit also
 * flips the status bits of a descriptor it installed, with a CAS
 * (cicada.c). Readers read the block with a Double-Read (cc.h).
 */
#ifndef RCKV_CC_VERSIONS_H
#define RCKV_CC_VERSIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "cc/cc.h"

#define VER_MAX 16        /* mvcc-versions' upper bound (server/config.c) */
#define VER_ENTRY_HDR 16u /* wts and data words of a tail entry */

/* The newest version's status (cicada; RCBench's X_n^m.st). CM is 0 so
 * that a reset descriptor reads as committed. */
enum { VER_ST_CM = 0, VER_ST_RN = 1 };

static inline uint64_t ver_desc_make(uint32_t count, uint32_t bytes, unsigned status)
{
	return ((uint64_t)(status & 0xffu) << 40) | ((uint64_t)(count & 0xffu) << 32) | bytes;
}
static inline uint32_t ver_desc_count(uint64_t d) { return (uint32_t)(d >> 32) & 0xffu; }
static inline uint32_t ver_desc_bytes(uint64_t d) { return (uint32_t)d; }
static inline unsigned ver_desc_status(uint64_t d) { return (unsigned)(d >> 40) & 0xffu; }
/* The same descriptor with another status. */
static inline uint64_t ver_desc_with(uint64_t d, unsigned status)
{
	return (d & ~(0xffull << 40)) | ((uint64_t)(status & 0xffu) << 40);
}

static inline uint64_t ver_entry_bytes(uint64_t vlen)
{
	return VER_ENTRY_HDR + ((vlen + 7) & ~7ull);
}

/* An older version, as laid in a tail. */
struct ver_entry {
	uint64_t wts;
	uint64_t data;
	const char *val;
};

/* Length of an image's newest value (an ABSENT one has none, as the undo
 * record counts it: cc/undo.c rec_payload). */
uint32_t ver_cur_vlen(const struct st_item *it);
/* The i-th older version of image `it` at offset off (from ver_tail_parse). */
void ver_entry_at(const struct st_item *it, uint32_t off, struct ver_entry *e);
/*
 * ver_tail_parse - the older versions of image `it` (a block of a's class,
 * its identity checked): their offsets from the tail's start, newest
 * first, in off[], and the tail's length in *bytes. Returns their number,
 * or 0 (and *bytes 0) when the descriptor does not describe a well-formed
 * tail inside the block; such an item is treated as having no older
 * version.
 */
int ver_tail_parse(const struct cc_access *a, const struct st_item *it, uint32_t off[VER_MAX],
		   uint32_t *bytes);
/*
 * ver_pick - the version a transaction with timestamp ts reads: the one
 * with the largest wts < ts. Returns 1 for the newest (the image as read),
 * 2 for an older one (in *e), 0 when none is old enough.
 */
int ver_pick(const struct cc_access *a, uint64_t ts, struct ver_entry *e);
/* Show the older version e as the image's current one: the executor reads
 * an access's value from its image (cc/txn.c visible), WATCH its ver. */
void ver_img_show(struct cc_access *a, const struct ver_entry *e);
/*
 * ver_build_tails - before prim_commit_writes/checked: for every written
 * access, a->wtail/wtlen := the tail of its new version (the version it
 * replaces, read under our lock in a->img, then the older ones, at most
 * `keep` in all, as many as fit the block after the new value and within
 * cc_inplace_max), and a->wmeta[1] := its descriptor with `status`. The
 * tails live in one buffer, returned in *buf (free it with
 * ver_free_tails after the commit). CC_EINTERNAL if out of memory.
 */
int ver_build_tails(struct txn *t, int keep, unsigned status, char **buf);
void ver_free_tails(struct txn *t, char *buf);
/* Versions kept per item (mvcc-versions) minus the newest: the tail's
 * most entries. */
int ver_keep(const struct txn *t);

#endif
