/*
 * Fault sites, compiled into builds with WS_FAULTS (tests and debug builds).
 *
 * A site is a named point such as "file.put.before_rename". A test (or the
 * WS_FAULT environment variable, "site[:nth[:action]]") arms one site; when
 * execution reaches it for the nth time the site fires: it either returns an
 * error to the caller (action "fail", default) or kills the process on the
 * spot with SIGKILL (action "crash"), which is how crash tests stop a writer
 * between two durable steps, or stops it with SIGSTOP and, once continued,
 * goes on as if nothing fired (action "stop"): how a test runs another
 * process at exactly that point. In builds without WS_FAULTS every site is a
 * constant 0 and costs nothing.
 */
#ifndef WS_FAULT_H
#define WS_FAULT_H

/* Returns 0 normally; a negative error (-EIO) when the armed site fires. */
int ws_fault_hit(const char *site);
#ifdef WS_FAULTS
#define WS_FAULT(site) ws_fault_hit(site)
#else
#define WS_FAULT(site) 0
#endif

/* Arm `site` to fire on its nth hit (1-based); crash=1 kills the process,
 * crash=2 stops it (SIGSTOP) and then returns 0. */
void ws_fault_arm(const char *site, unsigned nth, int crash);
void ws_fault_disarm(void);
/* How many times the armed site has been reached since arming. */
unsigned ws_fault_hits(void);

#endif
