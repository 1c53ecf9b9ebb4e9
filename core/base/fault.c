#include "ws_fault.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char armed_site[128];
static unsigned armed_nth;
static int armed_crash;
static unsigned armed_hits;
static int env_loaded;

void ws_fault_arm(const char *site, unsigned nth, int crash)
{
	snprintf(armed_site, sizeof(armed_site), "%s", site);
	armed_nth = nth ? nth : 1;
	armed_crash = crash;
	armed_hits = 0;
	env_loaded = 1;
}

void ws_fault_disarm(void)
{
	armed_site[0] = '\0';
	armed_hits = 0;
	env_loaded = 1;
}

unsigned ws_fault_hits(void) { return armed_hits; }

static void load_env(void)
{
	const char *spec = getenv("WS_FAULT");
	char buf[192];
	char *nth, *action;

	env_loaded = 1;
	if (!spec || !*spec)
		return;
	snprintf(buf, sizeof(buf), "%s", spec);
	nth = strchr(buf, ':');
	action = NULL;
	if (nth) {
		*nth++ = '\0';
		action = strchr(nth, ':');
		if (action)
			*action++ = '\0';
	}
	ws_fault_arm(buf, nth ? (unsigned)strtoul(nth, NULL, 10) : 1,
		     !action ? 0 : strcmp(action, "crash") == 0 ? 1 : strcmp(action, "stop") == 0 ? 2 : 0);
}

int ws_fault_hit(const char *site)
{
	if (!env_loaded)
		load_env();
	if (!armed_site[0] || strcmp(site, armed_site) != 0)
		return 0;
	if (++armed_hits != armed_nth)
		return 0;
	if (armed_crash == 2) {
		/* "stop": freeze here until SIGCONT, then go on as if nothing
		 * fired: a test runs another process at exactly this point. */
		kill(getpid(), SIGSTOP);
		return 0;
	}
	if (armed_crash) {
		kill(getpid(), SIGKILL);
		_exit(137);
	}
	return -EIO;
}
