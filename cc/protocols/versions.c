/*
 * versions.c: the version slots mvcc and cicada share (layout: versions.h).
 */
#include <ck_pr.h>
#include <stdlib.h>
#include <string.h>

#include "cc/node.h"
#include "cc/protocols/versions.h"

uint32_t ver_cur_vlen(const struct st_item *it)
{
	return (st_data_flags(it->data) & ST_F_ABSENT) ? 0 : st_data_vlen(it->data);
}

static const char *tail_start(const struct st_item *it)
{
	return st_item_val(it) + ver_cur_vlen(it);
}

/* Bytes of a's block after a value of vlen bytes (0 if none fit). */
static uint64_t block_room(const struct cc_access *a, uint32_t vlen)
{
	uint64_t used = sizeof(struct st_item) + (uint64_t)a->klen + vlen;
	uint64_t csz = st_class_size(a->ref.cls);
	return csz > used ? csz - used : 0;
}

void ver_entry_at(const struct st_item *it, uint32_t off, struct ver_entry *e)
{
	const char *p = tail_start(it) + off;
	memcpy(&e->wts, p, 8);
	memcpy(&e->data, p + 8, 8);
	e->val = p + VER_ENTRY_HDR;
}

int ver_tail_parse(const struct cc_access *a, const struct st_item *it, uint32_t off[VER_MAX],
		   uint32_t *bytes)
{
	uint64_t d = it->meta[1];
	uint32_t n = ver_desc_count(d), len = ver_desc_bytes(d);
	*bytes = 0;
	if ((d >> 48) != 0 || n > VER_MAX || len > block_room(a, ver_cur_vlen(it)))
		return 0;
	uint64_t at = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct ver_entry e;
		if (at + VER_ENTRY_HDR > len)
			return 0;
		ver_entry_at(it, (uint32_t)at, &e);
		uint8_t fl = st_data_flags(e.data);
		if ((fl & ~ST_F_ABSENT) || ((fl & ST_F_ABSENT) && st_data_vlen(e.data)))
			return 0;
		off[i] = (uint32_t)at;
		at += ver_entry_bytes(st_data_vlen(e.data));
		if (at > len)
			return 0;
	}
	if (at != len)
		return 0;
	*bytes = len;
	return (int)n;
}

int ver_pick(const struct cc_access *a, uint64_t ts, struct ver_entry *e)
{
	if (a->img->ver < ts)
		return 1;
	uint32_t off[VER_MAX], bytes;
	int n = ver_tail_parse(a, a->img, off, &bytes);
	for (int i = 0; i < n; i++) {
		ver_entry_at(a->img, off[i], e);
		if (e->wts < ts)
			return 2;
	}
	return 0;
}

void ver_img_show(struct cc_access *a, const struct ver_entry *e)
{
	struct st_item *it = a->img;
	uint32_t vlen = st_data_vlen(e->data);
	it->ver = e->wts;
	it->meta[1] = 0;
	memmove((char *)(it + 1) + a->klen, e->val, vlen);
	it->data = e->data;
}

/* Room for the tail of a's new version: after the value in the block, and
 * value plus tail within cc_inplace_max (the undo record's bound). 0 when
 * the write relocates (the new block starts with no tail). */
static uint32_t tail_room(const struct txn *t, const struct cc_access *a)
{
	const struct st_layout *L = t->node->layout;
	if (acc_relocates(a, L))
		return 0;
	uint32_t nvlen = a->wdel ? 0 : a->wvlen;
	uint64_t room = block_room(a, nvlen);
	uint32_t imax = cc_inplace_max(L);
	uint64_t cap = imax > nvlen ? imax - nvlen : 0;
	return (uint32_t)(room < cap ? room : cap);
}

static void put_entry(char *out, uint64_t wts, uint64_t data, const char *val)
{
	uint32_t vlen = st_data_vlen(data);
	uint64_t eb = ver_entry_bytes(vlen);
	memcpy(out, &wts, 8);
	memcpy(out + 8, &data, 8);
	memcpy(out + VER_ENTRY_HDR, val, vlen);
	memset(out + VER_ENTRY_HDR + vlen, 0, eb - VER_ENTRY_HDR - vlen);
}

/* The tail of a's new version into out (room bytes): the version it
 * replaces, then the older ones, at most keep in all, newest first, as
 * many as fit (the oldest are overwritten). Returns its length and its
 * count in *n. */
static uint32_t tail_build(struct cc_access *a, int keep, uint32_t room, char *out, uint32_t *n)
{
	const struct st_item *it = a->img;
	uint32_t vlen = ver_cur_vlen(it);
	uint64_t at = 0;
	*n = 0;
	if (keep <= 0 || ver_entry_bytes(vlen) > room)
		return 0;
	bool absent = st_data_flags(it->data) & ST_F_ABSENT;
	put_entry(out, it->ver,
		  absent ? st_make_data(vlen, ST_F_ABSENT)
			 : st_make_vdata(vlen, st_data_vflags(it->data), 0),
		  st_item_val(it));
	at = ver_entry_bytes(vlen);
	*n = 1;
	uint32_t off[VER_MAX], bytes;
	int old = ver_tail_parse(a, it, off, &bytes);
	for (int i = 0; i < old && (int)*n < keep; i++) {
		struct ver_entry e;
		ver_entry_at(it, off[i], &e);
		uint64_t eb = ver_entry_bytes(st_data_vlen(e.data));
		if (at + eb > room)
			break;
		memcpy(out + at, tail_start(it) + off[i], eb);
		at += eb;
		(*n)++;
	}
	return (uint32_t)at;
}

int ver_keep(const struct txn *t)
{
	int keep = (int)ck_pr_load_64(&t->node->limits.mvcc_versions) - 1;
	return keep < 0 ? 0 : keep > VER_MAX - 1 ? VER_MAX - 1 : keep;
}

int ver_build_tails(struct txn *t, int keep, unsigned status, char **bufp)
{
	uint64_t total = 0;
	for (int i = 0; i < t->nacc; i++)
		if (t->acc[i]->mode & ACC_W)
			total += tail_room(t, t->acc[i]);
	char *buf = NULL;
	if (keep > 0 && total > 0 && !(buf = malloc(total)))
		return CC_EINTERNAL;
	*bufp = buf;
	uint64_t at = 0;
	for (int i = 0; i < t->nacc; i++) {
		struct cc_access *a = t->acc[i];
		if (!(a->mode & ACC_W))
			continue;
		uint32_t room = tail_room(t, a), n = 0;
		a->wtail = NULL;
		a->wtlen = 0;
		if (buf && room) {
			a->wtail = buf + at;
			a->wtlen = tail_build(a, keep, room, buf + at, &n);
			at += room;
		}
		a->wmeta[1] = ver_desc_make(n, a->wtlen, status);
	}
	return CC_OK;
}

void ver_free_tails(struct txn *t, char *buf)
{
	/* The tails were copied into the images (prim.c stage_image). */
	for (int i = 0; i < t->nacc; i++) {
		t->acc[i]->wtail = NULL;
		t->acc[i]->wtlen = 0;
	}
	free(buf);
}
