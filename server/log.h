/*
 * log: one line per event: time, node, level, message. Any thread.
 */
#ifndef RCKV_SRV_LOG_H
#define RCKV_SRV_LOG_H

enum srv_loglevel { LOG_DEBUG, LOG_VERBOSE, LOG_NOTICE, LOG_WARNING };

struct node;

/* Parse "debug|verbose|notice|warning"; -1 if unknown. */
int srv_loglevel_parse(const char *s);
/* Open the log destination of the node (cfg.logfile; "" = stdout). 0 or -errno. */
int srv_log_open(struct node *n);
void srv_log(struct node *n, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
