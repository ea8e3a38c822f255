/*
 * stages.c: which stages of a transaction go two-sided (cc-stages, RCC 5).
 *
 * A stage is a tag on the fabric ops a transaction posts (cc/node.h, enum
 * cc_stage; the primitives and protocols set it as they go), and the
 * node's rpc_stages mask says which tags fab_exec ships as RPCs
 * (FAB_OP_TWOSIDED). The RPC handler applies the shipped ops to the
 * target's own region, on the same words the one-sided verbs reach, so:
 *  - an RPC Read or Lock leaves the tuple's address where a one-sided
 *    stage after it looks (the access's ref, resolved before the stage);
 *  - cross-stage state is in the item and the records, never in the
 *    handler (it keeps nothing between calls);
 *  - a lock an RPC CAS took is the owner word in the lock word, which the
 *    CAS's old value reports to the coordinator as a one-sided CAS would,
 *    so a one-sided Release finds it (RCC 5.2's "success bit").
 * RCC's impossible mix (an RPC Release that releases by timestamp, after
 * a one-sided Lock that recorded no holder) cannot arise: both Release
 * forms write the lock words the coordinator knows it holds.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <ck_pr.h>

#include "cc/cc.h"
#include "cc/node.h"
#include "cc/switch.h"

_Static_assert(CC_STAGES <= FAB_TAGS, "a stage is a fabric tag");

static const char *const stage_names[CC_STAGES] = {
	[CC_STAGE_READ] = "read",         [CC_STAGE_LOCK] = "lock",
	[CC_STAGE_VALIDATE] = "validate", [CC_STAGE_LOG] = "log",
	[CC_STAGE_COMMIT] = "commit",     [CC_STAGE_RELEASE] = "release",
};

const char *cc_stage_name(int stage)
{
	return stage >= 0 && stage < CC_STAGES ? stage_names[stage] : "?";
}

static int stage_of(const char *name, size_t len)
{
	for (int s = 0; s < CC_STAGES; s++)
		if (strlen(stage_names[s]) == len && strncasecmp(stage_names[s], name, len) == 0)
			return s;
	return -1;
}

/* "onesided" or "rpc": 0 or 1; else -1. */
static int mode_of(const char *m, size_t len)
{
	if (len == 8 && strncasecmp(m, "onesided", 8) == 0)
		return 0;
	if (len == 3 && strncasecmp(m, "rpc", 3) == 0)
		return 1;
	return -1;
}

int cc_stages_parse(const char *s, uint32_t *mask, char *err, size_t errlen)
{
	int whole = mode_of(s, strlen(s));
	if (whole >= 0) {
		*mask = whole ? CC_STAGES_ALL : 0;
		return 0;
	}
	uint32_t m = 0;
	const char *p = s;
	for (;;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		int st = eq ? stage_of(p, (size_t)(eq - p)) : -1;
		int md = eq ? mode_of(eq + 1, len - (size_t)(eq + 1 - p)) : -1;
		if (st < 0 || md < 0) {
			snprintf(err, errlen,
				 "bad cc-stages item '%.*s': want onesided, rpc, or a list of "
				 "<stage>=<onesided|rpc> with stages read, lock, validate, log, "
				 "commit, release",
				 (int)len, p);
			return -EINVAL;
		}
		m = md ? m | (1u << st) : m & ~(1u << st);
		if (!end)
			break;
		p = end + 1;
	}
	*mask = m;
	return 0;
}

void cc_stages_format(uint32_t mask, char *buf, size_t len)
{
	mask &= CC_STAGES_ALL;
	if (mask == 0 || mask == CC_STAGES_ALL) {
		snprintf(buf, len, "%s", mask ? "rpc" : "onesided");
		return;
	}
	size_t at = 0;
	buf[0] = '\0';
	for (int s = 0; s < CC_STAGES; s++) {
		if (!(mask & (1u << s)))
			continue;
		int k = snprintf(buf + at, len - at, "%s%s=rpc", at ? "," : "", stage_names[s]);
		if (k < 0 || (size_t)k >= len - at)
			break;
		at += (size_t)k;
	}
}

void cc_stages_apply(struct cc_node *n, uint32_t mask)
{
	ck_pr_store_32(&n->rpc_stages, mask & CC_STAGES_ALL);
}

int cc_stages_set(struct cc_node *n, struct cc_worker *w, uint32_t mask, char *err, size_t errlen)
{
	if (n->cops && n->cops->stages_all)
		return n->cops->stages_all(n, w, mask, err, errlen);
	cc_stages_apply(n, mask);
	return 0;
}
