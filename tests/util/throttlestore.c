#include "throttlestore.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ws_clock.h"
#include "ws_fail.h"

struct tstore {
	struct ws_store base;
	struct ws_store *inner;
	uint32_t attempts_max, delay_ms;
	pthread_mutex_t mu;
	char match[128];
	int64_t pass, attempts;
	uint32_t slow_ms;
	uint64_t throttled;
	char log_suffix[32];            /* log puts whose key ends so ("" = none) */
	char lost_suffix[32];           /* wt_throttle_lost_reply */
	unsigned lost_n;
	int lost_rc;                    /* what a lost reply answers (WS_EPRECOND unless set) */
	uint64_t log_ms[WT_THROTTLE_LOG_MAX];
	size_t nlog;
};

static void sleep_ms(uint32_t ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Decide one attempt: true = throttle it. */
static bool throttle_now(struct tstore *t, const char *key)
{
	bool yes = false;
	pthread_mutex_lock(&t->mu);
	if (t->attempts != 0 && (!t->match[0] || strstr(key, t->match))) {
		if (t->pass > 0) {
			t->pass--;
		} else {
			yes = true;
			t->throttled++;
			if (t->attempts > 0)
				t->attempts--;
		}
	}
	pthread_mutex_unlock(&t->mu);
	return yes;
}

static int t_put(struct ws_store *s, const char *key, const struct iovec *iov, int iovcnt, enum ws_put_mode mode,
		 const struct ws_etag *expect, struct ws_etag *out_etag)
{
	struct tstore *t = (struct tstore *)s;
	uint64_t sent = ws_mono_ms(); /* the attempt that goes through: when it went out */
	uint32_t slow;
	pthread_mutex_lock(&t->mu);
	slow = t->slow_ms;
	pthread_mutex_unlock(&t->mu);
	if (slow)
		sleep_ms(slow); /* the store's answer is slow: the request went out before */
	for (uint32_t attempt = 1;; attempt++) {
		if (!throttle_now(t, key))
			break;
		if (s->throttle_fail_fast) {
			/* As the S3 store: refused at once, again after a Retry-After. */
			s->throttle_until_ms = ws_mono_ms() + WT_THROTTLE_RETRY_AFTER_MS;
			return ws_fail(WS_ETHROTTLED, "throttle store: PUT %s throttled (HTTP 503 SlowDown)", key);
		}
		if (attempt >= t->attempts_max)
			return ws_fail(WS_ETHROTTLED, "throttle store: PUT %s throttled (HTTP 503 SlowDown) through %u "
				       "attempts", key, attempt);
		__atomic_fetch_add(&s->stats.retries, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&s->stats.throttle_retries, 1, __ATOMIC_RELAXED);
		sleep_ms(t->delay_ms);
		/* The next attempt goes out now (as the S3 store's, after its backoff). */
		sent = s->write_sent_ms = ws_mono_ms();
	}
	int rc = t->inner->ops->put(t->inner, key, iov, iovcnt, mode, expect, out_etag);
	if (rc == 0) {
		size_t kl = strlen(key), sl;
		bool lost = false;
		pthread_mutex_lock(&t->mu);
		sl = strlen(t->lost_suffix);
		if (t->lost_n && sl && kl >= sl && !strcmp(key + kl - sl, t->lost_suffix)) {
			t->lost_n--;
			lost = true;
		}
		pthread_mutex_unlock(&t->mu);
		if (lost && t->lost_rc != WS_EPRECOND)
			return ws_fail(t->lost_rc, "throttle store: PUT %s: landed, reply lost (%s)", key,
				       ws_strerror(t->lost_rc));
		if (lost)
			return ws_fail(WS_EPRECOND, "throttle store: PUT %s: landed, reply lost; the retry was refused "
				       "(412)", key);
		pthread_mutex_lock(&t->mu);
		sl = strlen(t->log_suffix);
		if (sl && kl >= sl && !strcmp(key + kl - sl, t->log_suffix) && t->nlog < WT_THROTTLE_LOG_MAX)
			t->log_ms[t->nlog++] = sent; /* a durable write, timed as it went out */
		pthread_mutex_unlock(&t->mu);
	}
	return rc;
}

static int t_get(struct ws_store *s, const char *key, uint64_t off, uint64_t len, struct ws_buf *out,
		 struct ws_obj_info *info)
{
	struct tstore *t = (struct tstore *)s;
	return t->inner->ops->get(t->inner, key, off, len, out, info);
}

static int t_head(struct ws_store *s, const char *key, struct ws_obj_info *info)
{
	struct tstore *t = (struct tstore *)s;
	return t->inner->ops->head(t->inner, key, info);
}

static int t_list(struct ws_store *s, const char *prefix, const char *token, unsigned max_keys,
		  struct ws_list_page *out)
{
	struct tstore *t = (struct tstore *)s;
	return t->inner->ops->list(t->inner, prefix, token, max_keys, out);
}

static int t_del(struct ws_store *s, const char *key)
{
	struct tstore *t = (struct tstore *)s;
	return t->inner->ops->del(t->inner, key);
}

static void t_close(struct ws_store *s)
{
	struct tstore *t = (struct tstore *)s;
	ws_store_close(t->inner);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

static const struct ws_store_ops t_ops = {
	.put = t_put, .get = t_get, .head = t_head, .list = t_list, .del = t_del, .close = t_close,
};

struct ws_store *wt_throttle_store_open(struct ws_store *inner, uint32_t attempts_max, uint32_t delay_ms)
{
	struct tstore *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->base.ops = &t_ops;
	snprintf(t->base.url, sizeof(t->base.url), "%s", inner->url);
	t->inner = inner;
	t->attempts_max = attempts_max ? attempts_max : 1;
	t->delay_ms = delay_ms;
	pthread_mutex_init(&t->mu, NULL);
	return &t->base;
}

void wt_throttle_set(struct ws_store *s, const char *match, int64_t pass, int64_t attempts)
{
	struct tstore *t = (struct tstore *)s;
	pthread_mutex_lock(&t->mu);
	snprintf(t->match, sizeof(t->match), "%s", match ? match : "");
	t->pass = pass;
	t->attempts = attempts;
	pthread_mutex_unlock(&t->mu);
}

void wt_throttle_slow(struct ws_store *s, uint32_t ms)
{
	struct tstore *t = (struct tstore *)s;
	pthread_mutex_lock(&t->mu);
	t->slow_ms = ms;
	pthread_mutex_unlock(&t->mu);
}

uint64_t wt_throttle_count(struct ws_store *s)
{
	struct tstore *t = (struct tstore *)s;
	uint64_t n;
	pthread_mutex_lock(&t->mu);
	n = t->throttled;
	pthread_mutex_unlock(&t->mu);
	return n;
}

void wt_throttle_log(struct ws_store *s, const char *suffix)
{
	struct tstore *t = (struct tstore *)s;
	pthread_mutex_lock(&t->mu);
	snprintf(t->log_suffix, sizeof(t->log_suffix), "%s", suffix ? suffix : "");
	t->nlog = 0;
	pthread_mutex_unlock(&t->mu);
}

size_t wt_throttle_logged(struct ws_store *s, uint64_t *ms, size_t max)
{
	struct tstore *t = (struct tstore *)s;
	size_t n;
	pthread_mutex_lock(&t->mu);
	n = t->nlog < max ? t->nlog : max;
	memcpy(ms, t->log_ms, n * sizeof(*ms));
	pthread_mutex_unlock(&t->mu);
	return n;
}

void wt_throttle_lost_reply(struct ws_store *s, const char *suffix, unsigned n)
{
	struct tstore *t = (struct tstore *)s;
	pthread_mutex_lock(&t->mu);
	snprintf(t->lost_suffix, sizeof(t->lost_suffix), "%s", suffix ? suffix : "");
	t->lost_n = n;
	t->lost_rc = WS_EPRECOND;
	pthread_mutex_unlock(&t->mu);
}

void wt_throttle_lost_reply_rc(struct ws_store *s, const char *suffix, unsigned n, int rc)
{
	struct tstore *t = (struct tstore *)s;
	wt_throttle_lost_reply(s, suffix, n);
	pthread_mutex_lock(&t->mu);
	t->lost_rc = rc;
	pthread_mutex_unlock(&t->mu);
}

void wt_throttle_forward_conditions(struct ws_store *s)
{
	struct tstore *t = (struct tstore *)s;
	s->forwards_conditions = ws_store_cas_fences(t->inner);
}
