#include "ws_fault.h"
#include "ws_clock.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SITE_NAME(name, about) name,
#define SITE_ABOUT(name, about) about,
static const char *const site_names[] = { WS_FAULT_SITES(SITE_NAME) };
static const char *const site_about[] = { WS_FAULT_SITES(SITE_ABOUT) };
#define SITE_COUNT (sizeof(site_names) / sizeof(site_names[0]))

#define PAUSE_FILE_WAIT_MS 60000

/*
 * The armed sites (a test may arm a failure at one site and a pause at
 * another). Arming happens before the threads that hit sites run (a test
 * arms, then starts the engine or calls tail), or on the first hit (the
 * environment), so plain stores suffice for the configuration; the hit
 * counters are atomic because the shard and upload threads both reach
 * "reader.read" and the stream's read sites. Whether the environment was
 * read is decided once (pthread_once): a running engine's idle shard may
 * reach a site while a test arms another (arming from the disarmed state,
 * its entries are published by armed_count's release).
 */
#define ARMED_MAX 4
struct armed_site {
	int site; /* index into site_names */
	unsigned nth;
	enum ws_fault_action action;
	ws_fault_pause_fn fn;
	void *arg;
	unsigned hits;
	bool every; /* fires on every hit from the nth on (WS_FAULT's "nth+") */
};
static struct armed_site armed[ARMED_MAX];
static unsigned armed_count;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static void env_skip(void) {}

/* WS_PAUSE_RANDOM */
static unsigned rnd_permille, rnd_max_ms;
static uint64_t rnd_state;
static int rnd_log;

unsigned ws_fault_site_count(void) { return (unsigned)SITE_COUNT; }
const char *ws_fault_site_name(unsigned i) { return i < SITE_COUNT ? site_names[i] : NULL; }
const char *ws_fault_site_about(unsigned i) { return i < SITE_COUNT ? site_about[i] : NULL; }

int ws_fault_site_index(const char *site)
{
	for (unsigned i = 0; site && i < SITE_COUNT; i++)
		if (strcmp(site, site_names[i]) == 0)
			return (int)i;
	return -1;
}

/* add, arm and disarm without deciding about the environment (load_env
 * runs inside pthread_once and arms through these). */
static int add_raw_every(const char *site, unsigned nth, enum ws_fault_action action, ws_fault_pause_fn fn,
			 void *arg, bool every)
{
	int i = ws_fault_site_index(site);
	struct armed_site *a;
	if (i < 0 || armed_count == ARMED_MAX)
		return -EINVAL;
	a = &armed[armed_count];
	a->site = i;
	a->nth = nth ? nth : 1;
	a->action = action;
	a->fn = fn;
	a->arg = arg;
	a->every = every;
	__atomic_store_n(&a->hits, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&armed_count, armed_count + 1, __ATOMIC_RELEASE);
	return 0;
}

static int add_raw(const char *site, unsigned nth, enum ws_fault_action action, ws_fault_pause_fn fn, void *arg)
{
	return add_raw_every(site, nth, action, fn, arg, false);
}

static void disarm_raw(void) { __atomic_store_n(&armed_count, 0, __ATOMIC_RELEASE); }

static int arm_raw(const char *site, unsigned nth, enum ws_fault_action action, ws_fault_pause_fn fn, void *arg)
{
	if (ws_fault_site_index(site) < 0)
		return -EINVAL;
	disarm_raw();
	return add_raw(site, nth, action, fn, arg);
}

/* Armed by the caller: WS_FAULT is not read. */
int ws_fault_add(const char *site, unsigned nth, enum ws_fault_action action, ws_fault_pause_fn fn, void *arg)
{
	pthread_once(&env_once, env_skip);
	return add_raw(site, nth, action, fn, arg);
}

int ws_fault_add_every(const char *site, unsigned nth, enum ws_fault_action action, ws_fault_pause_fn fn, void *arg)
{
	pthread_once(&env_once, env_skip);
	return add_raw_every(site, nth, action, fn, arg, true);
}

static int arm(const char *site, unsigned nth, enum ws_fault_action action, ws_fault_pause_fn fn, void *arg)
{
	pthread_once(&env_once, env_skip);
	return arm_raw(site, nth, action, fn, arg);
}

int ws_fault_arm(const char *site, unsigned nth, int crash)
{
	return arm(site, nth, crash ? WS_FAULT_CRASH : WS_FAULT_FAIL, NULL, NULL);
}

int ws_fault_arm_action(const char *site, unsigned nth, enum ws_fault_action action)
{
	return arm(site, nth, action, NULL, NULL);
}

int ws_fault_arm_pause(const char *site, unsigned nth, ws_fault_pause_fn fn, void *arg)
{
	return arm(site, nth, WS_FAULT_PAUSE, fn, arg);
}

void ws_fault_disarm(void)
{
	pthread_once(&env_once, env_skip);
	disarm_raw();
}

/* The environment arms sites only in builds that have them (WS_FAULTS, test
 * builds): an installed library never reads WS_FAULT or WS_PAUSE_RANDOM. */
#ifdef WS_FAULTS
static void load_env(void)
{
	const char *spec = getenv("WS_FAULT");
	const char *rnd = getenv("WS_PAUSE_RANDOM");
	char buf[192];
	char *nth, *action, *end = NULL;
	unsigned long n = 1;
	enum ws_fault_action act = WS_FAULT_FAIL;

	if (rnd && *rnd) {
		unsigned long long seed = 0;
		if (sscanf(rnd, "%llu:%u:%u", &seed, &rnd_permille, &rnd_max_ms) != 3 || rnd_max_ms == 0) {
			fprintf(stderr, "walship: WS_PAUSE_RANDOM=%s is not seed:permille:max_ms\n", rnd);
			_exit(2);
		}
		rnd_state = seed * 0x9E3779B97F4A7C15ull + 1;
		rnd_log = getenv("WS_PAUSE_LOG") && strcmp(getenv("WS_PAUSE_LOG"), "1") == 0;
	}
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
	if (action && strcmp(action, "crash") == 0)
		act = WS_FAULT_CRASH;
	else if (action && strcmp(action, "pause") == 0)
		act = WS_FAULT_PAUSE;
	else if (action && strcmp(action, "stop") == 0)
		act = WS_FAULT_STOP;
	else if (action && strcmp(action, "fail") != 0) {
		fprintf(stderr, "walship: WS_FAULT=%s: action '%s' is not fail, crash, pause or stop\n", spec, action);
		_exit(2);
	}
	if (nth)
		n = strtoul(nth, &end, 10);
	if (nth && *end && strcmp(end, "+") != 0) {
		fprintf(stderr, "walship: WS_FAULT=%s: '%s' is not N or N+\n", spec, nth);
		_exit(2);
	}
	if (arm_raw(buf, (unsigned)n, act, NULL, NULL) != 0) {
		fprintf(stderr, "walship: WS_FAULT=%s: '%s' is not a fault site\n", spec, buf);
		_exit(2);
	}
	armed[0].every = nth && *end == '+';
}
#else
static void load_env(void) {}
#endif

/* Across processes: announce the pause with a file and wait for its removal. */
static void pause_by_file(const char *site)
{
	const char *dir = getenv("WS_PAUSE_DIR");
	char path[4096];
	FILE *f;
	if (!dir || !*dir) {
		fprintf(stderr, "walship: fault site %s: pause needs WS_PAUSE_DIR\n", site);
		return;
	}
	snprintf(path, sizeof(path), "%s/%s.%ld", dir, site, (long)getpid());
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "walship: fault site %s: cannot create %s\n", site, path);
		return;
	}
	fclose(f);
	for (unsigned waited = 0; access(path, F_OK) == 0; waited++) {
		if (waited >= PAUSE_FILE_WAIT_MS) {
			fprintf(stderr, "walship: fault site %s: %s not removed in 60 s; going on\n", site, path);
			unlink(path);
			return;
		}
		ws_sleep_ms(1);
	}
}

/* xorshift64*, shared by threads: a racy update only perturbs the sequence. */
static void random_pause(const char *site)
{
	uint64_t x = __atomic_load_n(&rnd_state, __ATOMIC_RELAXED);
	unsigned ms;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	__atomic_store_n(&rnd_state, x, __ATOMIC_RELAXED);
	x *= 0x2545F4914F6CDD1Dull;
	if ((x >> 32) % 1000 >= rnd_permille)
		return;
	ms = 1 + (unsigned)((x & 0xffffffffu) % rnd_max_ms);
	if (rnd_log)
		fprintf(stderr, "walship: fault: paused at %s for %u ms\n", site, ms);
	ws_sleep_ms(ms);
}

int ws_fault_hit(const char *site)
{
	unsigned n;
	bool known = false;
	int rc = 0;
	pthread_once(&env_once, load_env);
	if (rnd_permille)
		random_pause(site);
	n = __atomic_load_n(&armed_count, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n; i++) {
		struct armed_site *a = &armed[i];
		if (strcmp(site, site_names[a->site]) != 0)
			continue;
		known = true;
		unsigned hits = __atomic_add_fetch(&a->hits, 1, __ATOMIC_RELAXED);
		if (hits != a->nth && !(a->every && hits > a->nth))
			continue;
		switch (a->action) {
		case WS_FAULT_CRASH:
			kill(getpid(), SIGKILL);
			_exit(137);
		case WS_FAULT_PAUSE:
			if (a->fn)
				a->fn(site, a->arg);
			else
				pause_by_file(site);
			break;
		case WS_FAULT_STOP:
			kill(getpid(), SIGSTOP);
			break;
		case WS_FAULT_FAIL:
			rc = -EIO;
			break;
		}
	}
	if (n && !known && ws_fault_site_index(site) < 0) {
		fprintf(stderr, "walship: fault site '%s' is not in WS_FAULT_SITES\n", site);
		abort();
	}
	return rc;
}
