/*
 * acl.c: the node's users and their rules, the permission check, and ACL
 * LOG (see acl.h for the threads and invariants (1)-(3) cited below).
 *
 * Redis 7.0's behaviour, checked against redis-server 7.0.15:
 *  - a new user is "off resetchannels -@all" (acl-pubsub-default
 *    resetchannels); `default` is "on nopass ~* &* +@all";
 *  - ACL SETUSER applies its rules to a copy and installs it only when
 *    every rule was valid ("ERR Error in ACL SETUSER modifier '%s': %s");
 *  - commands and subcommands are bits; +@cat / -@cat set or clear the
 *    bits of every command of the category; the categories of a command
 *    are its row's acl_categories (command.h), as COMMAND INFO gives them;
 *  - a key needs read permission when its key spec says "access", write
 *    permission when it says insert, update or delete, both otherwise;
 *  - PSUBSCRIBE's patterns must equal an allowed channel pattern.
 * Deviation: the "commands" description is the rules as given, from the
 * last +@all / -@all on (Redis 7.2's way); Redis 7.0 rebuilds it from the
 * bits, which gives the same text for the usual "-@all +@read" and
 * "+@all -@dangerous" but may differ for others. Selectors ("(...)") are
 * not supported.
 */
#include "server/acl.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "server/client.h"
#include "server/command.h"
#include "server/log.h"
#include "server/node.h"
#include "server/sha256.h"
#include "server/strutil.h"
#include "server/worker.h"

/* Redis 7.0's categories, in ACL CAT's order. */
static const char *const cat_names[] = {
	"keyspace", "read", "write", "set", "sortedset", "list", "hash",
	"string", "bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin",
	"fast", "slow", "blocking", "dangerous", "connection", "transaction", "scripting",
};
#define NCATS ((int)(sizeof(cat_names) / sizeof(cat_names[0])))

/* ACL LOG keeps this many entries (Redis's acllog-max-len default). */
#define ACL_LOG_MAX 128
/* A refusal like one logged less than this long ago counts in that entry. */
#define ACL_LOG_GROUP_MS 60000

struct acl_user {
	char *name;
	bool on, nopass;
	uint8_t sanitize;   /* 0, 1: sanitize-payload, 2: skip-sanitize-payload (shown only:
			       rckv's RESTORE always checks its payload) */
	int npass;
	char (*pass)[65];   /* SHA-256 hex of each password */
	char *rules;        /* the command rules as ACL LIST shows them */
	struct acl_perm *perm; /* published (invariant (1)) */
};

struct acl_log_entry {
	const char *reason; /* static */
	enum acl_ctx ctx;
	char *object, *user, *cinfo;
	long long count;
	uint64_t ctime_ms;
};

struct acl {
	pthread_mutex_t mu;       /* the users, the log */
	int nusers, cap;
	struct acl_user *users;   /* sorted by name (ACL LIST, ACL USERS) */
	int ncmds, nwords;        /* cmd_id_count(), in 64-bit words */
	uint32_t *catmask;        /* per cmd_id: a bit per cat_names[] */
	struct acl_log_entry log[ACL_LOG_MAX]; /* newest first */
	int nlog;
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static char *dupn(const char *p, size_t n)
{
	char *s = malloc(n + 1);
	if (s) {
		memcpy(s, p, n);
		s[n] = '\0';
	}
	return s;
}

static int cat_index(const char *p, size_t n)
{
	for (int i = 0; i < NCATS; i++)
		if (strlen(cat_names[i]) == n && strncasecmp(cat_names[i], p, n) == 0)
			return i;
	return -1;
}

/* A row's categories: its acl_categories text ("@write @string @slow"). */
static uint32_t row_cats(const struct cmd_def *d)
{
	uint32_t m = 0;
	const char *s = d->acl_categories;
	while (s && *s) {
		while (*s == ' ')
			s++;
		const char *e = s;
		while (*e && *e != ' ')
			e++;
		if (*s == '@') {
			int i = cat_index(s + 1, (size_t)(e - s - 1));
			if (i >= 0)
				m |= 1u << i;
		}
		s = e;
	}
	return m;
}

/* ---- permissions ---- */

static struct acl_perm *perm_new(const struct acl *a)
{
	struct acl_perm *p = calloc(1, sizeof(*p) + (size_t)a->nwords * sizeof(uint64_t));
	if (p)
		p->refs = 1;
	return p;
}

static void pats_free(struct acl_pat *v, int n)
{
	for (int i = 0; i < n; i++)
		free(v[i].p);
	free(v);
}

void acl_perm_put(struct acl_perm *p)
{
	bool zero;
	if (!p)
		return;
	ck_pr_dec_int_zero(&p->refs, &zero);
	if (!zero)
		return;
	free(p->name);
	pats_free(p->pats, p->npat);
	pats_free(p->chans, p->nchan);
	free(p);
}

static struct acl_perm *perm_get(struct acl_perm *p)
{
	ck_pr_inc_int(&p->refs);
	return p;
}

static struct acl_pat *pats_dup(const struct acl_pat *v, int n)
{
	if (n == 0)
		return NULL;
	struct acl_pat *c = calloc((size_t)n, sizeof(*c));
	if (!c)
		return NULL;
	for (int i = 0; i < n; i++) {
		c[i] = v[i];
		c[i].p = dupn(v[i].p, v[i].len);
		if (!c[i].p) {
			pats_free(c, i);
			return NULL;
		}
	}
	return c;
}

/* A private copy of p to edit (refs 1, not yet published). */
static struct acl_perm *perm_copy(const struct acl *a, const struct acl_perm *p)
{
	struct acl_perm *c = perm_new(a);
	if (!c)
		return NULL;
	memcpy(c->cmds, p->cmds, (size_t)a->nwords * sizeof(uint64_t));
	c->allcmds = p->allcmds;
	c->allkeys = p->allkeys;
	c->allchannels = p->allchannels;
	c->name = strdup(p->name);
	c->pats = pats_dup(p->pats, p->npat);
	c->chans = pats_dup(p->chans, p->nchan);
	c->npat = p->npat;
	c->nchan = p->nchan;
	if (!c->name || (p->npat && !c->pats) || (p->nchan && !c->chans)) {
		acl_perm_put(c);
		return NULL;
	}
	return c;
}

/* The derived flags, once the bits and lists are final. */
static void perm_seal(const struct acl *a, struct acl_perm *p)
{
	bool all = true;
	for (int id = 0; id < a->ncmds && all; id++)
		all = (p->cmds[id >> 6] >> (id & 63)) & 1;
	p->allcmds = all;
	p->all = p->allcmds && p->allkeys && p->allchannels;
}

static void set_bit(struct acl_perm *p, int id, bool on)
{
	if (on)
		p->cmds[id >> 6] |= 1ull << (id & 63);
	else
		p->cmds[id >> 6] &= ~(1ull << (id & 63));
}

/* ---- the table ---- */

static struct acl_user *find_locked(struct acl *a, const char *name, size_t len)
{
	for (int i = 0; i < a->nusers; i++)
		if (strlen(a->users[i].name) == len && memcmp(a->users[i].name, name, len) == 0)
			return &a->users[i];
	return NULL;
}

static void user_free(struct acl_user *u)
{
	free(u->name);
	free(u->pass);
	free(u->rules);
	acl_perm_put(u->perm);
	memset(u, 0, sizeof(*u));
}

static void bump_gen_locked(struct node *n)
{
	ck_pr_store_64(&n->acl_gen, ck_pr_load_64(&n->acl_gen) + 1); /* invariant (2) */
}

/* A new user as Redis makes one: off, no passwords, keys, channels or
 * commands. Not in the table. */
static int user_init(struct acl *a, struct acl_user *u, const char *name, size_t len)
{
	memset(u, 0, sizeof(*u));
	u->name = dupn(name, len);
	u->rules = strdup("-@all");
	u->perm = perm_new(a);
	if (u->perm)
		u->perm->name = dupn(name, len);
	if (!u->name || !u->rules || !u->perm || !u->perm->name) {
		user_free(u);
		return -ENOMEM;
	}
	return 0;
}

/* Insert u (moved in) at its sorted place. */
static int insert_locked(struct acl *a, struct acl_user *u)
{
	if (a->nusers == a->cap) {
		int cap = a->cap ? a->cap * 2 : 8;
		struct acl_user *v = realloc(a->users, (size_t)cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		a->users = v;
		a->cap = cap;
	}
	int i = 0;
	while (i < a->nusers && strcmp(a->users[i].name, u->name) < 0)
		i++;
	memmove(&a->users[i + 1], &a->users[i], (size_t)(a->nusers - i) * sizeof(*u));
	a->users[i] = *u;
	a->nusers++;
	return 0;
}

/* ---- rules ---- */

static int rules_set(struct acl_user *u, const char *s)
{
	char *r = strdup(s);
	if (!r)
		return -ENOMEM;
	free(u->rules);
	u->rules = r;
	return 0;
}

static int rules_append(struct acl_user *u, const char *tok, size_t len)
{
	size_t have = strlen(u->rules);
	char *r = realloc(u->rules, have + 1 + len + 1);
	if (!r)
		return -ENOMEM;
	r[have] = ' ';
	for (size_t i = 0; i < len; i++)
		r[have + 1 + i] = (char)tolower((unsigned char)tok[i]);
	r[have + 1 + len] = '\0';
	u->rules = r;
	return 0;
}

static void all_commands(struct acl *a, struct acl_perm *p, bool on)
{
	for (int id = 0; id < a->ncmds; id++)
		set_bit(p, id, on);
}

/* +cmd / -cmd / +cmd|sub / -cmd|sub: false if no such command. */
static bool rule_command(struct acl *a, struct acl_perm *p, const char *s, size_t len, bool on)
{
	const char *bar = memchr(s, '|', len);
	const struct cmd_def *d = cmd_lookup(s, bar ? (size_t)(bar - s) : len);
	if (!d)
		return false;
	if (bar) {
		if (!d->subcommands)
			return false;
		d = cmd_lookup_sub(d, bar + 1, len - (size_t)(bar - s) - 1);
		if (!d)
			return false;
	}
	set_bit(p, cmd_id(d), on);
	for (const struct cmd_def *sub = bar ? NULL : d->subcommands; sub && sub->name; sub++)
		set_bit(p, cmd_id(sub), on);
	return true;
}

static void rule_category(struct acl *a, struct acl_perm *p, int cat, bool on)
{
	for (int id = 0; id < a->ncmds; id++)
		if (a->catmask[id] & (1u << cat))
			set_bit(p, id, on);
}

static int add_pat(struct acl_pat **v, int *n, const char *s, size_t len, uint8_t perm)
{
	for (int i = 0; i < *n; i++)
		if ((*v)[i].len == len && memcmp((*v)[i].p, s, len) == 0) {
			(*v)[i].perm |= perm;
			return 0;
		}
	struct acl_pat *nv = realloc(*v, (size_t)(*n + 1) * sizeof(**v));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[*n] = (struct acl_pat){ .p = dupn(s, len), .len = len, .perm = perm };
	if (!nv[*n].p)
		return -ENOMEM;
	(*n)++;
	return 0;
}

static bool is_hash(const char *s, size_t len)
{
	if (len != 64)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isdigit((unsigned char)s[i]) && !(s[i] >= 'a' && s[i] <= 'f'))
			return false;
	return true;
}

static int pass_add(struct acl_user *u, const char hash[65])
{
	for (int i = 0; i < u->npass; i++)
		if (strcmp(u->pass[i], hash) == 0)
			return 0;
	char (*v)[65] = realloc(u->pass, (size_t)(u->npass + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	u->pass = v;
	memcpy(v[u->npass++], hash, 65);
	u->nopass = false;
	return 0;
}

static bool pass_del(struct acl_user *u, const char hash[65])
{
	for (int i = 0; i < u->npass; i++)
		if (strcmp(u->pass[i], hash) == 0) {
			memmove(&u->pass[i], &u->pass[i + 1], (size_t)(u->npass - i - 1) * sizeof(*u->pass));
			u->npass--;
			return true;
		}
	return false;
}

static void reset_pass(struct acl_user *u)
{
	free(u->pass);
	u->pass = NULL;
	u->npass = 0;
	u->nopass = false;
}

static void reset_keys(struct acl_perm *p)
{
	pats_free(p->pats, p->npat);
	p->pats = NULL;
	p->npat = 0;
	p->allkeys = false;
}

static void reset_channels(struct acl_perm *p)
{
	pats_free(p->chans, p->nchan);
	p->chans = NULL;
	p->nchan = 0;
	p->allchannels = false;
}

static bool word_is(const char *s, size_t len, const char *w)
{
	return strlen(w) == len && strncasecmp(s, w, len) == 0;
}

#define E_SYNTAX "Syntax error"
#define E_UNKNOWN "Unknown command or category name in ACL"
#define E_NOPASS "The password you are trying to remove from the user does not exist"
#define E_HASH "The password hash must be exactly 64 characters and contain only lowercase " \
	       "hexadecimal characters"
#define E_KEYS "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and " \
	       "does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
#define E_CHANS "Adding a pattern after the * pattern (or the 'allchannels' flag) is not " \
		"valid and does not have any effect. Try 'resetchannels' to start with an empty " \
		"list of channels"
#define E_OOM "out of memory"

/* Apply one rule to the draft u (whose perm is private). Returns 0, or -1
 * with *why set. */
static int rule_apply(struct acl *a, struct acl_user *u, const char *s, size_t len,
		      const char **why)
{
	struct acl_perm *p = u->perm;
	int rc = 0;
	*why = E_SYNTAX;
	if (word_is(s, len, "on")) {
		u->on = true;
	} else if (word_is(s, len, "off")) {
		u->on = false;
	} else if (word_is(s, len, "nopass")) {
		reset_pass(u);
		u->nopass = true;
	} else if (word_is(s, len, "resetpass")) {
		reset_pass(u);
	} else if (word_is(s, len, "sanitize-payload")) {
		u->sanitize = 1;
	} else if (word_is(s, len, "skip-sanitize-payload")) {
		u->sanitize = 2;
	} else if (word_is(s, len, "allkeys") || (len == 2 && memcmp(s, "~*", 2) == 0)) {
		reset_keys(p);
		p->allkeys = true;
	} else if (word_is(s, len, "resetkeys")) {
		reset_keys(p);
	} else if (word_is(s, len, "allchannels") || (len == 2 && memcmp(s, "&*", 2) == 0)) {
		reset_channels(p);
		p->allchannels = true;
	} else if (word_is(s, len, "resetchannels")) {
		reset_channels(p);
	} else if (word_is(s, len, "allcommands") || word_is(s, len, "+@all")) {
		all_commands(a, p, true);
		rc = rules_set(u, "+@all");
	} else if (word_is(s, len, "nocommands") || word_is(s, len, "-@all")) {
		all_commands(a, p, false);
		rc = rules_set(u, "-@all");
	} else if (word_is(s, len, "reset")) {
		reset_pass(u);
		reset_keys(p);
		reset_channels(p);
		u->on = false;
		u->sanitize = 1;
		all_commands(a, p, false);
		rc = rules_set(u, "-@all");
	} else if (len >= 1 && (s[0] == '>' || s[0] == '<')) {
		char h[65];
		sha256_hex(s + 1, len - 1, h);
		if (s[0] == '>')
			rc = pass_add(u, h);
		else if (!pass_del(u, h)) {
			*why = E_NOPASS;
			return -1;
		}
	} else if (len >= 1 && (s[0] == '#' || s[0] == '!')) {
		if (!is_hash(s + 1, len - 1)) {
			*why = E_HASH;
			return -1;
		}
		char h[65];
		memcpy(h, s + 1, 64);
		h[64] = '\0';
		if (s[0] == '#')
			rc = pass_add(u, h);
		else if (!pass_del(u, h)) {
			*why = E_NOPASS;
			return -1;
		}
	} else if (len >= 1 && (s[0] == '~' || s[0] == '%')) {
		uint8_t perm = ACL_PERM_READ | ACL_PERM_WRITE;
		size_t at = 1;
		if (s[0] == '%') {
			perm = 0;
			for (; at < len && s[at] != '~'; at++) {
				if (toupper((unsigned char)s[at]) == 'R')
					perm |= ACL_PERM_READ;
				else if (toupper((unsigned char)s[at]) == 'W')
					perm |= ACL_PERM_WRITE;
				else
					return -1;
			}
			if (at == len || perm == 0)
				return -1;
			at++;
		}
		if (p->allkeys) {
			*why = E_KEYS;
			return -1;
		}
		if (perm == (ACL_PERM_READ | ACL_PERM_WRITE) && len - at == 1 && s[at] == '*') {
			p->allkeys = true;
			return 0;
		}
		rc = add_pat(&p->pats, &p->npat, s + at, len - at, perm);
	} else if (len >= 1 && s[0] == '&') {
		if (p->allchannels) {
			*why = E_CHANS;
			return -1;
		}
		rc = add_pat(&p->chans, &p->nchan, s + 1, len - 1, ACL_PERM_READ | ACL_PERM_WRITE);
	} else if (len >= 2 && (s[0] == '+' || s[0] == '-')) {
		bool on = s[0] == '+';
		if (s[1] == '@') {
			int cat = cat_index(s + 2, len - 2);
			if (cat < 0) {
				*why = E_UNKNOWN;
				return -1;
			}
			rule_category(a, p, cat, on);
		} else if (!rule_command(a, p, s + 1, len - 1, on)) {
			*why = E_UNKNOWN;
			return -1;
		}
		rc = rules_append(u, s, len);
	} else {
		return -1;
	}
	if (rc != 0) {
		*why = E_OOM;
		return -1;
	}
	return 0;
}

/* A private deep copy of u to apply rules to. */
static int user_copy(struct acl *a, struct acl_user *dst, const struct acl_user *u)
{
	*dst = *u;
	dst->name = strdup(u->name);
	dst->rules = strdup(u->rules);
	dst->pass = NULL;
	if (u->npass) {
		dst->pass = malloc((size_t)u->npass * sizeof(*u->pass));
		if (dst->pass)
			memcpy(dst->pass, u->pass, (size_t)u->npass * sizeof(*u->pass));
	}
	dst->perm = perm_copy(a, u->perm);
	if (!dst->name || !dst->rules || (u->npass && !dst->pass) || !dst->perm) {
		user_free(dst);
		return -ENOMEM;
	}
	return 0;
}

/*
 * acl_setuser_locked - ACL SETUSER name rules...: create the user if
 * needed and apply every rule, or none. Returns 0, or -1 with the error
 * line (Redis's text, without the leading '-') in err.
 */
static int setuser_locked(struct node *n, const struct resp_arg *name, int nrules,
			  const struct resp_arg *rules, char *err, size_t errlen)
{
	struct acl *a = n->acl;
	struct acl_user *u = find_locked(a, name->p, name->len);
	struct acl_user draft;
	int rc = u ? user_copy(a, &draft, u) : user_init(a, &draft, name->p, name->len);
	if (rc != 0) {
		snprintf(err, errlen, "ERR out of memory");
		return -1;
	}
	for (int i = 0; i < nrules; i++) {
		const char *why;
		if (rule_apply(a, &draft, rules[i].p, rules[i].len, &why) != 0) {
			snprintf(err, errlen, "ERR Error in ACL SETUSER modifier '%.*s': %s",
				 (int)(rules[i].len > 128 ? 128 : rules[i].len), rules[i].p, why);
			user_free(&draft);
			return -1;
		}
	}
	perm_seal(a, draft.perm);
	if (u) {
		user_free(u);
		*u = draft; /* the new snapshot is published (invariant (1)) */
	} else if (insert_locked(a, &draft) != 0) {
		user_free(&draft);
		snprintf(err, errlen, "ERR out of memory");
		return -1;
	}
	bump_gen_locked(n);
	return 0;
}

/* ---- the node's table ---- */

int acl_create(struct node *n)
{
	struct acl *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	pthread_mutex_init(&a->mu, NULL);
	a->ncmds = cmd_id_count();
	a->nwords = (a->ncmds + 63) / 64;
	a->catmask = calloc((size_t)a->ncmds, sizeof(*a->catmask));
	if (!a->catmask) {
		free(a);
		return -ENOMEM;
	}
	for (int id = 0; id < a->ncmds; id++)
		a->catmask[id] = row_cats(cmd_by_id(id));
	n->acl = a;
	static const struct resp_arg name = { .p = "default", .len = 7 };
	static const struct resp_arg rules[] = {
		{ .p = "on", .len = 2 }, { .p = "nopass", .len = 6 }, { .p = "~*", .len = 2 },
		{ .p = "&*", .len = 2 }, { .p = "+@all", .len = 5 },
	};
	char err[128];
	if (setuser_locked(n, &name, 5, rules, err, sizeof(err)) != 0) {
		acl_destroy(n);
		return -ENOMEM;
	}
	pthread_mutex_lock(&n->cfg_lock);
	char *rp = n->cfg.requirepass ? strdup(n->cfg.requirepass) : NULL;
	pthread_mutex_unlock(&n->cfg_lock);
	if (rp && rp[0])
		acl_set_requirepass(n, rp);
	free(rp);
	return 0;
}

static void log_entry_free(struct acl_log_entry *e)
{
	free(e->object);
	free(e->user);
	free(e->cinfo);
}

void acl_destroy(struct node *n)
{
	struct acl *a = n->acl;
	if (!a)
		return;
	for (int i = 0; i < a->nusers; i++)
		user_free(&a->users[i]);
	for (int i = 0; i < a->nlog; i++)
		log_entry_free(&a->log[i]);
	free(a->users);
	free(a->catmask);
	pthread_mutex_destroy(&a->mu);
	free(a);
	n->acl = NULL;
}

void acl_set_requirepass(struct node *n, const char *pass)
{
	struct acl *a = n->acl;
	if (!a)
		return; /* at start: acl_create applies it */
	char buf[8 + 512];
	struct resp_arg r[2] = { { .p = "resetpass", .len = 9 } };
	int nr = 1;
	if (pass[0]) {
		snprintf(buf, sizeof(buf), ">%s", pass);
		r[1] = (struct resp_arg){ .p = buf, .len = strlen(buf) };
		nr = 2;
	} else {
		r[0] = (struct resp_arg){ .p = "nopass", .len = 6 };
	}
	static const struct resp_arg name = { .p = "default", .len = 7 };
	char err[256];
	pthread_mutex_lock(&a->mu);
	if (setuser_locked(n, &name, nr, r, err, sizeof(err)) != 0)
		srv_log(n, LOG_WARNING, "requirepass: %s", err);
	pthread_mutex_unlock(&a->mu);
}

bool acl_user_exists(struct node *n, const char *name, size_t len)
{
	struct acl *a = n->acl;
	pthread_mutex_lock(&a->mu);
	bool r = find_locked(a, name, len) != NULL;
	pthread_mutex_unlock(&a->mu);
	return r;
}

bool acl_default_nopass(struct node *n)
{
	struct acl *a = n->acl;
	pthread_mutex_lock(&a->mu);
	struct acl_user *u = find_locked(a, "default", 7);
	bool r = u && u->on && u->nopass;
	pthread_mutex_unlock(&a->mu);
	return r;
}

struct acl_perm *acl_default_perm(struct node *n, uint64_t *gen)
{
	struct acl *a = n->acl;
	pthread_mutex_lock(&a->mu);
	struct acl_perm *p = perm_get(find_locked(a, "default", 7)->perm);
	*gen = ck_pr_load_64(&n->acl_gen);
	pthread_mutex_unlock(&a->mu);
	return p;
}

void acl_client_set(struct client *cl, struct acl_perm *p, uint64_t gen)
{
	pthread_mutex_lock(&cl->w->clients_lock);
	struct acl_perm *old = cl->perm;
	cl->perm = p;
	cl->acl_gen = gen;
	pthread_mutex_unlock(&cl->w->clients_lock);
	acl_perm_put(old);
}

/* Compare in time that depends on the lengths only. */
static bool secret_equal(const char *x, const char *y, size_t len)
{
	unsigned char diff = 0;
	for (size_t i = 0; i < len; i++)
		diff |= (unsigned char)(x[i] ^ y[i]);
	return diff == 0;
}

bool acl_auth(struct node *n, struct client *cl, const char *user, size_t ulen, const char *pass,
	      size_t plen, struct acl_perm **perm)
{
	struct acl *a = n->acl;
	if (!user) {
		user = "default";
		ulen = 7;
	}
	char h[65];
	sha256_hex(pass, plen, h);
	pthread_mutex_lock(&a->mu);
	struct acl_user *u = find_locked(a, user, ulen);
	bool ok = false;
	if (u && u->on) {
		ok = u->nopass;
		for (int i = 0; i < u->npass; i++)
			ok |= secret_equal(u->pass[i], h, 64);
	}
	if (ok && perm)
		*perm = perm_get(u->perm);
	pthread_mutex_unlock(&a->mu);
	if (!ok)
		acl_log_add(n, cl, "auth", ACL_CTX_TOPLEVEL, "AUTH", 4, user, ulen);
	return ok;
}

bool acl_refresh(struct node *n, struct client *cl)
{
	struct acl *a = n->acl;
	pthread_mutex_lock(&a->mu);
	uint64_t gen = ck_pr_load_64(&n->acl_gen);
	struct acl_user *u = find_locked(a, cl->perm->name, strlen(cl->perm->name));
	struct acl_perm *p = u ? perm_get(u->perm) : NULL;
	pthread_mutex_unlock(&a->mu);
	if (!p)
		return false;
	acl_client_set(cl, p, gen);
	return true;
}

/* ---- the check ---- */

static bool has_word(const char *flags, const char *w)
{
	size_t n = strlen(w);
	for (const char *s = flags; s && (s = strstr(s, w)); s += n)
		if ((s == flags || s[-1] == ' ') && (s[n] == ' ' || s[n] == '\0'))
			return true;
	return false;
}

/* The permission a key of the request needs, from its key spec flags. */
static uint8_t key_need(const struct cmd_def *d, int argc, const struct resp_arg *argv, int pos)
{
	const char *f = cmd_key_flags(d, argc, argv, pos);
	uint8_t need = 0;
	if (f && has_word(f, "access"))
		need |= ACL_PERM_READ;
	if (f && (has_word(f, "insert") || has_word(f, "update") || has_word(f, "delete")))
		need |= ACL_PERM_WRITE;
	return need ? need : ACL_PERM_READ | ACL_PERM_WRITE;
}

static bool key_ok(const struct acl_perm *p, const char *k, size_t klen, uint8_t need)
{
	uint8_t have = 0;
	for (int i = 0; i < p->npat && (have & need) != need; i++)
		if ((p->pats[i].perm & need) &&
		    srv_strmatch(p->pats[i].p, p->pats[i].len, k, klen, false))
			have |= p->pats[i].perm;
	return (have & need) == need;
}

static bool channel_ok(const struct acl_perm *p, const char *c, size_t len, bool literal)
{
	for (int i = 0; i < p->nchan; i++) {
		const struct acl_pat *a = &p->chans[i];
		if (literal ? a->len == len && memcmp(a->p, c, len) == 0
			    : srv_strmatch(a->p, a->len, c, len, false))
			return true;
	}
	return false;
}

/* The commands that name channels: from which argument, all of the rest
 * or only that one, and whether they are patterns (PSUBSCRIBE). */
static const struct {
	const char *name;
	int first;
	bool rest, pattern;
} chan_cmds[] = {
	{ "publish", 1, false, false },   { "spublish", 1, false, false },
	{ "subscribe", 1, true, false },  { "ssubscribe", 1, true, false },
	{ "psubscribe", 1, true, true },
};

enum acl_deny acl_check(const struct acl_perm *p, const struct cmd_def *d, int argc,
			const struct resp_arg *argv, int *pos)
{
	*pos = 0;
	if (p->all)
		return ACL_OK;
	int id = cmd_id(d);
	/* AUTH, HELLO and the like are every user's (Redis's no_auth). */
	if (!p->allcmds && !(d->flags & CMD_NOAUTH) &&
	    (id < 0 || !((p->cmds[id >> 6] >> (id & 63)) & 1)))
		return ACL_DENY_CMD;
	if (!p->allkeys && (d->first_key > 0 || d->getkeys)) {
		int stack[16];
		int *idx = argc <= 16 ? stack : malloc((size_t)argc * sizeof(int));
		if (!idx)
			return ACL_DENY_KEY; /* refuse rather than skip the check */
		int nk = cmd_get_keys(d, argc, argv, idx, argc);
		enum acl_deny r = ACL_OK;
		for (int i = 0; i < nk && r == ACL_OK; i++) {
			const struct resp_arg *k = &argv[idx[i]];
			if (!key_ok(p, k->p, k->len, key_need(d, argc, argv, idx[i]))) {
				r = ACL_DENY_KEY;
				*pos = idx[i];
			}
		}
		if (idx != stack)
			free(idx);
		if (r != ACL_OK)
			return r;
	}
	if (!p->allchannels && (d->flags & CMD_PUBSUB)) {
		for (size_t c = 0; c < sizeof(chan_cmds) / sizeof(chan_cmds[0]); c++) {
			if (strcmp(chan_cmds[c].name, d->name) != 0)
				continue;
			int last = chan_cmds[c].rest ? argc - 1 : chan_cmds[c].first;
			for (int i = chan_cmds[c].first; i <= last && i < argc; i++)
				if (!channel_ok(p, argv[i].p, argv[i].len, chan_cmds[c].pattern)) {
					*pos = i;
					return ACL_DENY_CHANNEL;
				}
		}
	}
	return ACL_OK;
}

static const char *const ctx_names[] = { "toplevel", "multi", "lua" };

static const char *reason_of(enum acl_deny r)
{
	return r == ACL_DENY_CMD ? "command" : r == ACL_DENY_KEY ? "key" : "channel";
}

/* Log a refusal of d (or of its key or channel at pos). */
static void log_refusal(struct node *n, struct client *cl, const struct cmd_def *d,
			const struct resp_arg *argv, enum acl_deny r, int pos, enum acl_ctx ctx)
{
	const char *obj = d->name;
	size_t olen = strlen(obj);
	if (r != ACL_DENY_CMD) {
		obj = argv[pos].p;
		olen = argv[pos].len;
	}
	const char *user = cl->perm->name;
	acl_log_add(n, cl, reason_of(r), ctx, obj, olen, user, strlen(user));
}

bool acl_refuse(struct worker *w, struct client *cl, struct resp_w *out, const struct cmd_def *d,
		int argc, const struct resp_arg *argv, enum acl_ctx ctx)
{
	struct node *n = w->node;
	if (cl->acl_gen != ck_pr_load_64(&n->acl_gen) && !acl_refresh(n, cl)) {
		cl->flags |= CL_CLOSE_ASAP; /* its user was deleted (ACL DELUSER) */
		return true;
	}
	int pos;
	enum acl_deny r = acl_check(cl->perm, d, argc, argv, &pos);
	if (r == ACL_OK)
		return false;
	if (r == ACL_DENY_CMD)
		resp_errorf(out, "NOPERM this user has no permissions to run the '%s' command", d->name);
	else
		resp_errorf(out, "NOPERM this user has no permissions to access one of the %s used as "
			    "arguments", r == ACL_DENY_KEY ? "keys" : "channels");
	log_refusal(n, cl, d, argv, r, pos, ctx);
	return true;
}

bool acl_exec_refuse(struct worker *w, struct client *cl, struct resp_w *out,
		     const struct cmd_def *d, int argc, const struct resp_arg *argv, bool log)
{
	struct node *n = w->node;
	if (acl_fast_ok(&n->acl_gen, cl->acl_gen, cl->perm))
		return false;
	if (cl->acl_gen != ck_pr_load_64(&n->acl_gen))
		(void)acl_refresh(n, cl); /* a deleted user's client closes after EXEC */
	int pos;
	enum acl_deny r = acl_check(cl->perm, d, argc, argv, &pos);
	if (r == ACL_OK)
		return false;
	resp_errorf(out, "NOPERM ACLs rules changed between the moment the transaction was "
		    "accumulated and the EXEC call. This command is no longer allowed for the "
		    "following reason: %s",
		    r == ACL_DENY_CMD ? "no permission to execute the command or subcommand"
		    : r == ACL_DENY_KEY ? "no permission to touch the specified keys"
					: "no permission to access one of the channels used as arguments");
	if (log)
		log_refusal(n, cl, d, argv, r, pos, ACL_CTX_MULTI);
	return true;
}

bool acl_script_refuse(struct worker *w, struct client *cl, struct resp_w *out,
		       const struct cmd_def *d, int argc, const struct resp_arg *argv)
{
	if (!cl || acl_fast_ok(&w->node->acl_gen, cl->acl_gen, cl->perm))
		return false;
	struct node *n = w->node;
	if (cl->acl_gen != ck_pr_load_64(&n->acl_gen))
		(void)acl_refresh(n, cl); /* a deleted user's script ends as it began */
	int pos;
	enum acl_deny r = acl_check(cl->perm, d, argc, argv, &pos);
	if (r == ACL_OK)
		return false;
	if (r == ACL_DENY_CMD)
		resp_error(out, "ERR The user executing the script can't run this command or "
				"subcommand");
	else
		resp_errorf(out, "ERR The user executing the script can't access at least one of the "
			    "%s mentioned in the command arguments",
			    r == ACL_DENY_KEY ? "keys" : "channels");
	log_refusal(n, cl, d, argv, r, pos, ACL_CTX_LUA);
	return true;
}

/* ---- ACL LOG ---- */

void acl_log_add(struct node *n, struct client *cl, const char *reason, enum acl_ctx ctx,
		 const char *object, size_t olen, const char *user, size_t ulen)
{
	struct acl *a = n->acl;
	struct srv_sbuf info = { 0 };
	if (cl)
		client_info_line(&info, cl);
	uint64_t now = now_ms();
	pthread_mutex_lock(&a->mu);
	for (int i = 0; i < a->nlog; i++) {
		struct acl_log_entry *e = &a->log[i];
		if (e->reason == reason && e->ctx == ctx && strlen(e->object) == olen &&
		    memcmp(e->object, object, olen) == 0 && strlen(e->user) == ulen &&
		    memcmp(e->user, user, ulen) == 0 && now - e->ctime_ms < ACL_LOG_GROUP_MS) {
			/* Redis's grouping: the same refusal again counts in the
			 * entry, which moves to the front. */
			struct acl_log_entry keep = *e;
			keep.count++;
			keep.ctime_ms = now;
			if (info.p) {
				free(keep.cinfo);
				keep.cinfo = info.p;
				info.p = NULL;
			}
			memmove(&a->log[1], &a->log[0], (size_t)i * sizeof(*e));
			a->log[0] = keep;
			pthread_mutex_unlock(&a->mu);
			srv_sbuf_free(&info);
			return;
		}
	}
	if (a->nlog == ACL_LOG_MAX)
		log_entry_free(&a->log[--a->nlog]);
	memmove(&a->log[1], &a->log[0], (size_t)a->nlog * sizeof(a->log[0]));
	a->log[0] = (struct acl_log_entry){
		.reason = reason, .ctx = ctx, .object = dupn(object, olen), .user = dupn(user, ulen),
		.cinfo = info.p ? info.p : strdup(""), .count = 1, .ctime_ms = now,
	};
	info.p = NULL;
	a->nlog++;
	pthread_mutex_unlock(&a->mu);
	srv_sbuf_free(&info);
}

/* ---- the ACL command ---- */

/* The keys part of ACL LIST / GETUSER. */
static void describe_keys(struct srv_sbuf *b, const struct acl_perm *p)
{
	if (p->allkeys) {
		srv_sbuf_printf(b, "~*");
		return;
	}
	for (int i = 0; i < p->npat; i++) {
		uint8_t m = p->pats[i].perm;
		srv_sbuf_printf(b, "%s%s%.*s", i ? " " : "",
				m == ACL_PERM_READ ? "%R~" : m == ACL_PERM_WRITE ? "%W~" : "~",
				(int)p->pats[i].len, p->pats[i].p);
	}
}

static void describe_channels(struct srv_sbuf *b, const struct acl_perm *p)
{
	if (p->allchannels) {
		srv_sbuf_printf(b, "&*");
		return;
	}
	for (int i = 0; i < p->nchan; i++)
		srv_sbuf_printf(b, "%s&%.*s", i ? " " : "", (int)p->chans[i].len, p->chans[i].p);
}

static void describe_user(struct srv_sbuf *b, const struct acl_user *u)
{
	srv_sbuf_printf(b, "user %s %s", u->name, u->on ? "on" : "off");
	if (u->nopass)
		srv_sbuf_printf(b, " nopass");
	if (u->sanitize)
		srv_sbuf_printf(b, u->sanitize == 1 ? " sanitize-payload" : " skip-sanitize-payload");
	for (int i = 0; i < u->npass; i++)
		srv_sbuf_printf(b, " #%s", u->pass[i]);
	if (u->perm->allkeys || u->perm->npat) {
		srv_sbuf_printf(b, " ");
		describe_keys(b, u->perm);
	}
	if (!u->perm->allchannels)
		srv_sbuf_printf(b, " resetchannels");
	if (u->perm->allchannels || u->perm->nchan) {
		srv_sbuf_printf(b, " ");
		describe_channels(b, u->perm);
	}
	srv_sbuf_printf(b, " %s", u->rules);
}

static void reply_sbuf(struct resp_w *out, struct srv_sbuf *b)
{
	resp_bulk(out, b->p ? b->p : "", b->len);
	srv_sbuf_free(b);
}

static void acl_setuser(struct cmd_ctx *c)
{
	const struct resp_arg *name = &c->argv[2];
	for (size_t i = 0; i < name->len; i++)
		if (name->p[i] == ' ' || name->p[i] == '\0') {
			resp_error(c->out, "ERR Usernames can't contain spaces or null characters");
			return;
		}
	char err[512];
	struct acl *a = c->node->acl;
	pthread_mutex_lock(&a->mu);
	int rc = setuser_locked(c->node, name, c->argc - 3, c->argv + 3, err, sizeof(err));
	pthread_mutex_unlock(&a->mu);
	if (rc != 0)
		resp_error(c->out, err);
	else
		resp_status(c->out, "OK");
}

static void acl_getuser(struct cmd_ctx *c)
{
	struct acl *a = c->node->acl;
	pthread_mutex_lock(&a->mu);
	const struct acl_user *u = find_locked(a, c->argv[2].p, c->argv[2].len);
	if (!u) {
		pthread_mutex_unlock(&a->mu);
		resp_null(c->out);
		return;
	}
	resp_map(c->out, 6);
	resp_bulk_cstr(c->out, "flags");
	resp_set(c->out, 1 + u->nopass + (u->sanitize != 0)); /* a set in RESP3, as Redis */
	resp_bulk_cstr(c->out, u->on ? "on" : "off");
	if (u->nopass)
		resp_bulk_cstr(c->out, "nopass");
	if (u->sanitize)
		resp_bulk_cstr(c->out, u->sanitize == 1 ? "sanitize-payload" : "skip-sanitize-payload");
	resp_bulk_cstr(c->out, "passwords");
	resp_array(c->out, u->npass);
	for (int i = 0; i < u->npass; i++)
		resp_bulk(c->out, u->pass[i], 64);
	resp_bulk_cstr(c->out, "commands");
	resp_bulk_cstr(c->out, u->rules);
	struct srv_sbuf b = { 0 };
	resp_bulk_cstr(c->out, "keys");
	describe_keys(&b, u->perm);
	reply_sbuf(c->out, &b);
	resp_bulk_cstr(c->out, "channels");
	describe_channels(&b, u->perm);
	reply_sbuf(c->out, &b);
	pthread_mutex_unlock(&a->mu);
	resp_bulk_cstr(c->out, "selectors");
	resp_array(c->out, 0);
}

static void acl_deluser(struct cmd_ctx *c)
{
	struct acl *a = c->node->acl;
	for (int i = 2; i < c->argc; i++)
		if (c->argv[i].len == 7 && memcmp(c->argv[i].p, "default", 7) == 0) {
			resp_error(c->out, "ERR The 'default' user cannot be removed");
			return;
		}
	long long gone = 0;
	pthread_mutex_lock(&a->mu);
	for (int i = 2; i < c->argc; i++) {
		struct acl_user *u = find_locked(a, c->argv[i].p, c->argv[i].len);
		if (!u)
			continue;
		user_free(u);
		int at = (int)(u - a->users);
		memmove(u, u + 1, (size_t)(a->nusers - at - 1) * sizeof(*u));
		a->nusers--;
		gone++;
	}
	if (gone)
		bump_gen_locked(c->node); /* its clients close (acl_refuse) */
	pthread_mutex_unlock(&a->mu);
	resp_int(c->out, gone);
}

static void acl_list(struct cmd_ctx *c)
{
	struct acl *a = c->node->acl;
	pthread_mutex_lock(&a->mu);
	resp_array(c->out, a->nusers);
	for (int i = 0; i < a->nusers; i++) {
		struct srv_sbuf b = { 0 };
		describe_user(&b, &a->users[i]);
		reply_sbuf(c->out, &b);
	}
	pthread_mutex_unlock(&a->mu);
}

static void acl_users(struct cmd_ctx *c)
{
	struct acl *a = c->node->acl;
	pthread_mutex_lock(&a->mu);
	resp_array(c->out, a->nusers);
	for (int i = 0; i < a->nusers; i++)
		resp_bulk_cstr(c->out, a->users[i].name);
	pthread_mutex_unlock(&a->mu);
}

static void acl_whoami(struct cmd_ctx *c)
{
	resp_bulk_cstr(c->out, c->cl->perm->name);
}

static void acl_cat(struct cmd_ctx *c)
{
	if (c->argc == 2) {
		resp_array(c->out, NCATS);
		for (int i = 0; i < NCATS; i++)
			resp_bulk_cstr(c->out, cat_names[i]);
		return;
	}
	if (c->argc > 3) {
		cmd_reply_wrong_args(c);
		return;
	}
	int cat = cat_index(c->argv[2].p, c->argv[2].len);
	if (cat < 0) {
		resp_errorf(c->out, "ERR Unknown category '%.*s'",
			    (int)(c->argv[2].len > 128 ? 128 : c->argv[2].len), c->argv[2].p);
		return;
	}
	struct acl *a = c->node->acl;
	long cnt = 0;
	for (int id = 0; id < a->ncmds; id++)
		cnt += (a->catmask[id] >> cat) & 1;
	resp_array(c->out, cnt);
	for (int id = 0; id < a->ncmds; id++)
		if ((a->catmask[id] >> cat) & 1)
			resp_bulk_cstr(c->out, cmd_by_id(id)->name);
}

static void acl_dryrun(struct cmd_ctx *c)
{
	struct acl *a = c->node->acl;
	const struct resp_arg *argv = c->argv + 3;
	int argc = c->argc - 3;
	const struct cmd_def *d = cmd_lookup(argv[0].p, argv[0].len);
	if (d && d->subcommands)
		d = argc >= 2 ? cmd_lookup_sub(d, argv[1].p, argv[1].len) : NULL;
	pthread_mutex_lock(&a->mu);
	struct acl_user *u = find_locked(a, c->argv[2].p, c->argv[2].len);
	struct acl_perm *p = u ? perm_get(u->perm) : NULL;
	pthread_mutex_unlock(&a->mu);
	if (!p) {
		resp_errorf(c->out, "ERR User '%.*s' not found",
			    (int)(c->argv[2].len > 128 ? 128 : c->argv[2].len), c->argv[2].p);
		return;
	}
	if (!d) {
		resp_errorf(c->out, "ERR Command '%.*s' not found",
			    (int)(argv[0].len > 128 ? 128 : argv[0].len), argv[0].p);
	} else if (d->arity > 0 ? argc != d->arity : argc < -d->arity) {
		resp_errorf(c->out, "ERR wrong number of arguments for '%s' command", d->name);
	} else {
		int pos;
		enum acl_deny r = acl_check(p, d, argc, argv, &pos);
		if (r == ACL_OK)
			resp_status(c->out, "OK");
		else if (r == ACL_DENY_CMD) {
			char msg[256];
			int k = snprintf(msg, sizeof(msg),
					 "This user has no permissions to run the '%s' command", d->name);
			resp_bulk(c->out, msg, (size_t)k);
		} else {
			struct srv_sbuf b = { 0 };
			srv_sbuf_printf(&b, "This user has no permissions to access the '%.*s' %s",
					(int)argv[pos].len, argv[pos].p,
					r == ACL_DENY_KEY ? "key" : "channel");
			reply_sbuf(c->out, &b);
		}
	}
	acl_perm_put(p);
}

static void acl_log(struct cmd_ctx *c)
{
	struct acl *a = c->node->acl;
	long long count = 10;
	if (c->argc == 3) {
		if (arg_is(&c->argv[2], "reset")) {
			pthread_mutex_lock(&a->mu);
			for (int i = 0; i < a->nlog; i++)
				log_entry_free(&a->log[i]);
			a->nlog = 0;
			pthread_mutex_unlock(&a->mu);
			resp_status(c->out, "OK");
			return;
		}
		if (srv_str2ll(c->argv[2].p, c->argv[2].len, &count) != 0 || count < 0) {
			resp_error(c->out, "ERR value is out of range, must be positive");
			return;
		}
	} else if (c->argc > 3) {
		cmd_reply_syntax(c);
		return;
	}
	uint64_t now = now_ms();
	pthread_mutex_lock(&a->mu);
	long n = count < a->nlog ? (long)count : a->nlog;
	resp_array(c->out, n);
	for (long i = 0; i < n; i++) {
		const struct acl_log_entry *e = &a->log[i];
		resp_map(c->out, 7);
		resp_bulk_cstr(c->out, "count");
		resp_int(c->out, e->count);
		resp_bulk_cstr(c->out, "reason");
		resp_bulk_cstr(c->out, e->reason);
		resp_bulk_cstr(c->out, "context");
		resp_bulk_cstr(c->out, ctx_names[e->ctx]);
		resp_bulk_cstr(c->out, "object");
		resp_bulk_cstr(c->out, e->object);
		resp_bulk_cstr(c->out, "username");
		resp_bulk_cstr(c->out, e->user);
		resp_bulk_cstr(c->out, "age-seconds");
		resp_double(c->out, (double)(now - e->ctime_ms) / 1000.0);
		resp_bulk_cstr(c->out, "client-info");
		resp_bulk_cstr(c->out, e->cinfo);
	}
	pthread_mutex_unlock(&a->mu);
}

static void acl_genpass(struct cmd_ctx *c)
{
	long long bits = 256;
	if (c->argc > 3) {
		cmd_reply_syntax(c);
		return;
	}
	if (c->argc == 3 && (srv_str2ll(c->argv[2].p, c->argv[2].len, &bits) != 0 || bits <= 0 ||
			     bits > 4096)) {
		resp_error(c->out, "ERR ACL GENPASS argument must be the number of bits for the "
				   "output password, a positive number up to 4096");
		return;
	}
	unsigned char raw[512];
	size_t chars = (size_t)(bits + 3) / 4, bytes = (chars + 1) / 2;
	FILE *f = fopen("/dev/urandom", "rb");
	bool ok = f && fread(raw, 1, bytes, f) == bytes;
	if (f)
		fclose(f);
	if (!ok) {
		resp_error(c->out, "ERR could not read /dev/urandom");
		return;
	}
	char hex[1025];
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < chars; i++)
		hex[i] = digits[(raw[i / 2] >> (i % 2 ? 0 : 4)) & 15];
	resp_bulk(c->out, hex, chars);
}

static const char *const acl_help[] = {
	"ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"CAT [<category>]",
	"    List all commands that belong to <category>, or all command categories",
	"    when no category is specified.",
	"DELUSER <username> [<username> ...]",
	"    Delete a list of users.",
	"DRYRUN <username> <command> [<arg> ...]",
	"    Returns whether the user can execute the given command without executing the command.",
	"GETUSER <username>",
	"    Get the user's details.",
	"GENPASS [<bits>]",
	"    Generate a secure 256-bit user password. The optional `bits` argument can",
	"    be used to specify a different size.",
	"LIST",
	"    Show users details in config file format.",
	"LOAD",
	"    Reload users from the ACL file.",
	"LOG [<count> | RESET]",
	"    Show the ACL log entries.",
	"SAVE",
	"    Save the current config to the ACL file.",
	"SETUSER <username> <attribute> [<attribute> ...]",
	"    Create or modify a user with the specified attributes.",
	"USERS",
	"    List all the registered usernames.",
	"WHOAMI",
	"    Return the current connection username.",
	"HELP",
	"    Prints this help.",
};

static void acl_helpcmd(struct cmd_ctx *c)
{
	int n = (int)(sizeof(acl_help) / sizeof(acl_help[0]));
	resp_array(c->out, n);
	for (int i = 0; i < n; i++)
		resp_status(c->out, acl_help[i]);
}

/* rckv keeps users in memory only: there is no aclfile to load or save. */
static void acl_nofile(struct cmd_ctx *c)
{
	resp_error(c->out, "ERR This Redis instance is not configured to use an ACL file. You may "
			   "want to specify users via the ACL SETUSER command and then issue a "
			   "CONFIG REWRITE (assuming you have a Redis configuration file set) in "
			   "order to store users in the Redis configuration.");
}

static const struct {
	const char *name;
	void (*fn)(struct cmd_ctx *c);
} acl_subs[] = {
	{ "setuser", acl_setuser }, { "getuser", acl_getuser }, { "deluser", acl_deluser },
	{ "list", acl_list },       { "users", acl_users },     { "whoami", acl_whoami },
	{ "cat", acl_cat },         { "dryrun", acl_dryrun },   { "log", acl_log },
	{ "genpass", acl_genpass }, { "help", acl_helpcmd },    { "save", acl_nofile },
	{ "load", acl_nofile },
};

int cmd_acl(struct cmd_ctx *c)
{
	for (size_t i = 0; i < sizeof(acl_subs) / sizeof(acl_subs[0]); i++)
		if (arg_is(&c->argv[1], acl_subs[i].name)) {
			acl_subs[i].fn(c);
			return 0;
		}
	cmd_reply_syntax(c); /* dispatch resolved the subcommand: not reached */
	return 0;
}
