/*
 * monitor.c: MONITOR (monitor.h), with Redis 7.0's lines and choices:
 * admin commands (CONFIG, SLOWLOG, DEBUG, ...) are never shown, AUTH's
 * arguments and HELLO's AUTH pair are "(redacted)", a command is shown
 * after it ran (MULTI's queued commands when EXEC ran them, before the
 * EXEC line), and a refused or unknown command is not shown.
 *
 * Not as Redis: the commands a script calls are not shown (Redis shows
 * them as "[0 lua]"): a script's transaction may run several times.
 */
#include "server/monitor.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>

#include "server/client.h"
#include "server/command.h"
#include "server/node.h"
#include "server/pubsub.h"
#include "server/strutil.h"

bool monitor_on(struct node *n)
{
	return ps_monitor_mask(n) != 0;
}

/* Redis's sdscatrepr: a double-quoted string with C escapes. */
static void repr(struct srv_sbuf *b, const char *p, size_t len)
{
	srv_sbuf_printf(b, "\"");
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)p[i];
		switch (ch) {
		case '\\': srv_sbuf_printf(b, "\\\\"); break;
		case '"': srv_sbuf_printf(b, "\\\""); break;
		case '\n': srv_sbuf_printf(b, "\\n"); break;
		case '\r': srv_sbuf_printf(b, "\\r"); break;
		case '\t': srv_sbuf_printf(b, "\\t"); break;
		case '\a': srv_sbuf_printf(b, "\\a"); break;
		case '\b': srv_sbuf_printf(b, "\\b"); break;
		default:
			if (ch >= 0x20 && ch < 0x7f)
				srv_sbuf_printf(b, "%c", ch);
			else
				srv_sbuf_printf(b, "\\x%02x", ch);
		}
	}
	srv_sbuf_printf(b, "\"");
}

void monitor_feed(struct node *n, struct worker *w, const char *addr, const struct cmd_def *def,
		  int argc, const struct resp_arg *argv)
{
	if (def->flags & CMD_ADMIN)
		return;
	struct timeval tv;
	gettimeofday(&tv, NULL);
	struct srv_sbuf b = { 0 };
	srv_sbuf_printf(&b, "+%ld.%06ld [0 %s]", (long)tv.tv_sec, (long)tv.tv_usec, addr);
	bool auth = strcmp(def->name, "auth") == 0, hello = strcmp(def->name, "hello") == 0;
	int redact_from = auth ? 1 : argc, redact_to = argc;
	for (int i = 1; hello && i + 2 < argc; i++) {
		if (arg_is(&argv[i], "auth")) {
			redact_from = i + 1;
			redact_to = i + 3;
			break;
		}
	}
	for (int i = 0; i < argc; i++) {
		srv_sbuf_printf(&b, " ");
		if (i >= redact_from && i < redact_to)
			srv_sbuf_printf(&b, "\"(redacted)\"");
		else
			repr(&b, argv[i].p, argv[i].len);
	}
	srv_sbuf_printf(&b, "\r\n");
	if (!b.failed)
		ps_monitor_send(n, w, b.p, b.len);
	srv_sbuf_free(&b);
}

int cmd_monitor(struct cmd_ctx *c)
{
	/* Redis ignores MONITOR from a client that already is one. */
	if (c->cl->flags & CL_MONITOR)
		return 0;
	if (c->txn) { /* run by EXEC: the block wants one reply per command */
		resp_error(c->out, "ERR MONITOR isn't allowed for DENY BLOCKING client");
		return 0;
	}
	if (ps_monitor_add(c->cl) != 0) {
		resp_error(c->out, "ERR out of memory");
		return 0;
	}
	resp_status(c->out, "OK");
	return 0;
}
