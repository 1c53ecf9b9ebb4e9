/*
 * HTTP client against a scripted HTTP/1.1 server running inside the test.
 *
 * The server (one accept thread, one thread per connection, keep-alive)
 * answers by path: /hello 200 with a body, /head a HEAD reply, /echo the
 * received body's length and SHA-256, /busy 503 with Retry-After, /short a
 * Content-Length larger than the body it sends before closing, /reset a
 * connection reset mid-body (SO_LINGER 0), /slow a reply later than the
 * client's timeout, /stall the head and a part of a 100000-byte body, then
 * silence for up to 10 s, /hold a 100 ms reply that counts concurrent requests,
 * /headers many, long and mixed-case headers, /big 64 KiB, /drop a reply
 * after which the server closes the idle connection, /vanish the first time
 * it is asked: the whole request read, then the connection closed with no
 * reply (a server that died after acting on it), later times an /echo reply.
 * It counts connections
 * (open now, most at once, total) so reuse and the in-flight bound are
 * measured from the server's side, not taken from the client's word.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http_internal.h"
#include "testutil.h"
#include "ws_clock.h"
#include "ws_fault.h"
#include "ws_http.h"
#include "ws_logging.h"
#include "ws_sigv4.h"

/* ---- the server ---- */

#define SRV_CONNS_MAX 128
#define SRV_BUF (256 * 1024)

struct srv {
	int lfd, port;
	int stop_pipe[2];
	pthread_t accept_thread;
	pthread_mutex_t mu; /* guards everything below */
	int conn_fd[SRV_CONNS_MAX];
	pthread_t conn_thread[SRV_CONNS_MAX];
	int nconn;
	int conns_open, conns_max, conns_total;
	int active, active_max;
	int vanish_seen;                  /* /vanish requests received */
	bool stopping;
};

struct conn {
	struct srv *s;
	int fd;
};

static void send_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
		if (w <= 0)
			return; /* the client went away (timeout test): nothing to do */
		c += w;
		n -= (size_t)w;
	}
}

static void send_str(int fd, const char *s)
{
	send_all(fd, s, strlen(s));
}

static void reply(int fd, int status, const char *reason, const char *extra, const char *body)
{
	char head[1024];
	snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\nContent-Length: %zu\r\n%s\r\n", status, reason,
		 strlen(body), extra ? extra : "");
	send_str(fd, head);
	send_str(fd, body);
}

/* Answer one request; returns false when the connection must close. */
static bool serve(struct srv *s, int fd, const char *method, const char *path, const char *body,
		  size_t body_len)
{
	char extra[512], text[256];

	if (strcmp(path, "/hello") == 0) {
		reply(fd, 200, "OK", NULL, "hello world\n");
	} else if (strcmp(path, "/head") == 0) {
		/* Only ever asked with HEAD: the head alone, its Content-Length describing a body not sent. */
		send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\nX-Thing: yes\r\n\r\n");
	} else if (strcmp(path, "/echo") == 0) {
		char hash[65];
		ws_sha256_hex(body, body_len, hash);
		snprintf(extra, sizeof(extra), "X-Body-Len: %zu\r\nX-Body-Sha256: %s\r\nX-Method: %s\r\n",
			 body_len, hash, method);
		snprintf(text, sizeof(text), "%zu %s", body_len, hash);
		reply(fd, 200, "OK", extra, text);
	} else if (strcmp(path, "/busy") == 0) {
		reply(fd, 503, "Slow Down", "Retry-After: 7\r\n", "SlowDown");
	} else if (strcmp(path, "/short") == 0) {
		send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
		return false;
	} else if (strcmp(path, "/reset") == 0) {
		char part[1000];
		struct linger lg = { 1, 0 };
		memset(part, 'r', sizeof(part));
		send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n");
		send_all(fd, part, sizeof(part));
		usleep(50 * 1000);
		/* close() with a zero linger sends RST instead of FIN. */
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		return false;
	} else if (strcmp(path, "/slow") == 0) {
		/* Wait up to 2 s, or until the client gives up and closes. */
		struct pollfd p = { .fd = fd, .events = POLLIN };
		poll(&p, 1, 2000);
		reply(fd, 200, "OK", NULL, "late");
	} else if (strcmp(path, "/stall") == 0) {
		/* Half way through the body, go silent until the client gives up (at most 10 s). */
		struct pollfd p = { .fd = fd, .events = POLLIN };
		char part[1000];
		memset(part, 's', sizeof(part));
		send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n");
		send_all(fd, part, sizeof(part));
		poll(&p, 1, 10000);
		return false;
	} else if (strcmp(path, "/hold") == 0) {
		pthread_mutex_lock(&s->mu);
		if (++s->active > s->active_max)
			s->active_max = s->active;
		pthread_mutex_unlock(&s->mu);
		usleep(100 * 1000);
		pthread_mutex_lock(&s->mu);
		s->active--;
		pthread_mutex_unlock(&s->mu);
		reply(fd, 200, "OK", NULL, "held");
	} else if (strcmp(path, "/headers") == 0) {
		char *h = malloc(8192), *p = h;
		char longv[601];
		memset(longv, 'L', 600);
		longv[600] = '\0';
		p += sprintf(p, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n");
		p += sprintf(p, "X-Mixed-CASE:   Value With Spaces  \r\n");
		p += sprintf(p, "ETag: \"abc\"\r\n");
		p += sprintf(p, "X-Long: %s\r\n", longv);
		p += sprintf(p, "X-%s: dropped\r\n", "AVeryLongHeaderNameThatIsLongerThanSixtyThreeCharactersInTotal1");
		for (int i = 0; i < 40; i++)
			p += sprintf(p, "X-Many-%02d: %d\r\n", i, i);
		p += sprintf(p, "\r\nok");
		send_str(fd, h);
		free(h);
	} else if (strcmp(path, "/big") == 0) {
		char *b = malloc(65536 + 1);
		memset(b, 'b', 65536);
		b[65536] = '\0';
		reply(fd, 200, "OK", NULL, b);
		free(b);
	} else if (strcmp(path, "/vanish") == 0) {
		char hash[65];
		pthread_mutex_lock(&s->mu);
		int seen = s->vanish_seen++;
		pthread_mutex_unlock(&s->mu);
		if (seen == 0)
			return false;
		ws_sha256_hex(body, body_len, hash);
		snprintf(extra, sizeof(extra), "X-Body-Sha256: %s\r\n", hash);
		reply(fd, 200, "OK", extra, "after vanishing");
	} else if (strcmp(path, "/drop") == 0) {
		reply(fd, 200, "OK", NULL, "bye");
		return false; /* no "Connection: close": the client finds out on reuse */
	} else {
		reply(fd, 404, "Not Found", NULL, "");
	}
	return true;
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	struct srv *s = c->s;
	char *buf = malloc(SRV_BUF);
	size_t len = 0;

	for (;;) {
		char *end, method[16], path[256];
		size_t head_len, body_len = 0;
		const char *cl;

		/* Read until the end of the request head. */
		while (!(end = memmem(buf, len, "\r\n\r\n", 4))) {
			ssize_t r;
			if (len == SRV_BUF)
				goto done;
			r = recv(c->fd, buf + len, SRV_BUF - len, 0);
			if (r <= 0)
				goto done;
			len += (size_t)r;
		}
		head_len = (size_t)(end - buf) + 4;
		if (sscanf(buf, "%15s %255s", method, path) != 2)
			goto done;
		buf[head_len - 2] = '\0'; /* search the head only */
		cl = strcasestr(buf, "\r\nContent-Length:");
		if (cl)
			body_len = strtoul(cl + 17, NULL, 10);
		if (head_len + body_len > SRV_BUF)
			goto done;
		while (len < head_len + body_len) {
			ssize_t r = recv(c->fd, buf + len, SRV_BUF - len, 0);
			if (r <= 0)
				goto done;
			len += (size_t)r;
		}
		if (!serve(s, c->fd, method, path, buf + head_len, body_len))
			goto done;
		memmove(buf, buf + head_len + body_len, len - head_len - body_len);
		len -= head_len + body_len;
	}
done:
	/* Only here does the connection end; stop() shuts fds down but leaves closing to us. */
	pthread_mutex_lock(&s->mu);
	s->conns_open--;
	for (int i = 0; i < s->nconn; i++)
		if (s->conn_fd[i] == c->fd)
			s->conn_fd[i] = -1;
	close(c->fd);
	pthread_mutex_unlock(&s->mu);
	free(buf);
	free(c);
	return NULL;
}

static void *accept_main(void *arg)
{
	struct srv *s = arg;
	struct pollfd p[2] = { { .fd = s->lfd, .events = POLLIN }, { .fd = s->stop_pipe[0], .events = POLLIN } };

	for (;;) {
		if (poll(p, 2, -1) < 0 || (p[1].revents & POLLIN))
			return NULL;
		if (!(p[0].revents & POLLIN))
			continue;
		int fd = accept(s->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		struct conn *c = malloc(sizeof(*c));
		c->s = s;
		c->fd = fd;
		pthread_mutex_lock(&s->mu);
		if (s->nconn == SRV_CONNS_MAX || s->stopping) {
			pthread_mutex_unlock(&s->mu);
			close(fd);
			free(c);
			continue;
		}
		s->conns_total++;
		if (++s->conns_open > s->conns_max)
			s->conns_max = s->conns_open;
		s->conn_fd[s->nconn] = fd;
		pthread_create(&s->conn_thread[s->nconn], NULL, conn_main, c);
		s->nconn++;
		pthread_mutex_unlock(&s->mu);
	}
}

static struct srv *srv_start(void)
{
	struct srv *s = calloc(1, sizeof(*s));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int one = 1;

	assert_non_null(s);
	pthread_mutex_init(&s->mu, NULL);
	s->lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(s->lfd >= 0);
	setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(s->lfd, 64), 0);
	assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &alen), 0);
	s->port = ntohs(a.sin_port);
	assert_int_equal(pipe(s->stop_pipe), 0);
	assert_int_equal(pthread_create(&s->accept_thread, NULL, accept_main, s), 0);
	return s;
}

static void srv_stop(struct srv *s)
{
	int n;

	assert_int_equal(write(s->stop_pipe[1], "x", 1), 1);
	pthread_join(s->accept_thread, NULL);
	pthread_mutex_lock(&s->mu);
	s->stopping = true;
	for (int i = 0; i < s->nconn; i++)
		if (s->conn_fd[i] >= 0)
			shutdown(s->conn_fd[i], SHUT_RDWR);
	n = s->nconn;
	pthread_mutex_unlock(&s->mu);
	for (int i = 0; i < n; i++)
		pthread_join(s->conn_thread[i], NULL);
	close(s->lfd);
	close(s->stop_pipe[0]);
	close(s->stop_pipe[1]);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

struct srv_counts {
	int conns_open, conns_max, conns_total, active_max;
};

static struct srv_counts srv_counts(struct srv *s)
{
	struct srv_counts c;
	pthread_mutex_lock(&s->mu);
	c.conns_open = s->conns_open;
	c.conns_max = s->conns_max;
	c.conns_total = s->conns_total;
	c.active_max = s->active_max;
	pthread_mutex_unlock(&s->mu);
	return c;
}

/* ---- client helpers ---- */

struct buf {
	char *p;
	size_t len, cap;
};

static int buf_sink(void *arg, const void *data, size_t len)
{
	struct buf *b = arg;
	if (len > b->cap - b->len)
		return WS_ETOOBIG;
	memcpy(b->p + b->len, data, len);
	b->len += len;
	return 0;
}

struct fixture {
	struct srv *srv;
	char url[256];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	f->srv = srv_start();
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	srv_stop(f->srv);
	free(f);
	return 0;
}

static const char *url(struct fixture *f, const char *path)
{
	snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d%s", f->srv->port, path);
	return f->url;
}

static struct ws_http *open_client(unsigned max_in_flight, long timeout_ms)
{
	struct ws_http_opts o = { .max_in_flight = max_in_flight, .timeout_ms = timeout_ms };
	int err = -1;
	struct ws_http *h = ws_http_open(&o, &err);
	if (!h)
		fail_msg("ws_http_open: %d %s", err, ws_errmsg());
	assert_int_equal(err, 0);
	return h;
}

static void perform(struct ws_http *h, struct ws_http_req *r, size_t n)
{
	int rc = ws_http_perform(h, r, n);
	if (rc)
		fail_msg("ws_http_perform: %d %s", rc, ws_errmsg());
}

/* ---- tests ---- */

static void test_get_body(void **state)
{
	struct fixture *f = *state;
	struct ws_http *h = open_client(4, 0);
	char mem[64];
	struct buf b = { mem, 0, sizeof(mem) };
	struct ws_http_req r = { .method = "GET", .url = url(f, "/hello"), .on_body = buf_sink, .on_body_arg = &b };

	perform(h, &r, 1);
	assert_int_equal(r.err, 0);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.content_length, 12);
	assert_int_equal(r.body_bytes, 12);
	assert_false(r.truncated);
	assert_int_equal(b.len, 12);
	assert_memory_equal(mem, "hello world\n", 12);
	assert_string_equal(ws_http_header(&r, "content-length"), "12");
	ws_http_close(h);
}

static void test_head(void **state)
{
	struct fixture *f = *state;
	struct ws_http *h = open_client(1, 0);
	struct ws_http_req r = { .method = "HEAD", .url = url(f, "/head") };

	perform(h, &r, 1);
	assert_int_equal(r.err, 0);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.content_length, 1234);
	assert_int_equal(r.body_bytes, 0);
	assert_false(r.truncated);
	assert_string_equal(ws_http_header(&r, "x-thing"), "yes");
	/* The connection is still good for the next request: HEAD left no body to drain. */
	struct ws_http_req g = { .method = "GET", .url = url(f, "/hello") };
	perform(h, &g, 1);
	assert_int_equal(g.status, 200);
	assert_int_equal(srv_counts(f->srv).conns_total, 1);
	ws_http_close(h);
}

/*
 * One slot serves every method after every other: what one request set
 * (HEAD's no-body, an upload, a custom method, a deadline) never carries
 * over into the next. A single slot, so each request reuses the last one's
 * handle; /echo answers with the method and body it received.
 */
static void test_methods_in_turn(void **state)
{
	struct fixture *f = *state;
	struct ws_http *h = open_client(1, 0);
	static const char *const methods[] = { "GET", "PUT", "POST", "DELETE", "HEAD" };
	enum { NM = sizeof(methods) / sizeof(methods[0]) };
	static const char body[] = "a body of 27 bytes, no more";
	struct iovec iov = { .iov_base = (void *)(uintptr_t)body, .iov_len = sizeof(body) - 1 };

	for (int a = 0; a < NM; a++) {
		for (int b = 0; b < NM; b++) {
			const char *pair[2] = { methods[a], methods[b] };
			for (int k = 0; k < 2; k++) {
				const char *m = pair[k];
				bool with_body = strcmp(m, "PUT") == 0 || strcmp(m, "POST") == 0;
				bool head = strcmp(m, "HEAD") == 0;
				struct ws_http_req r = {
					.method = m,
					.url = url(f, head ? "/head" : "/echo"),
					.body = with_body ? &iov : NULL,
					.body_iovcnt = with_body ? 1 : 0,
					/* Every other request with a deadline: the next must not keep it. */
					.deadline_ms = k ? ws_mono_ms() + 20000 : 0,
				};
				perform(h, &r, 1);
				if (r.err || r.status != 200)
					fail_msg("%s after %s: err %d (%s), HTTP %ld", m, k ? pair[0] : "-", r.err,
						 r.err_detail, r.status);
				if (head) {
					assert_int_equal(r.content_length, 1234);
					assert_int_equal(r.body_bytes, 0);
					assert_string_equal(ws_http_header(&r, "x-thing"), "yes");
					continue;
				}
				if (strcmp(ws_http_header(&r, "x-method"), m) != 0)
					fail_msg("%s after %s went out as %s", m, k ? pair[0] : "-",
						 ws_http_header(&r, "x-method"));
				assert_string_equal(ws_http_header(&r, "x-body-len"), with_body ? "27" : "0");
			}
		}
	}
	/* All of it on the one connection: nothing left a body undrained. */
	assert_int_equal(srv_counts(f->srv).conns_total, 1);
	ws_http_close(h);
}

/* A body spread over iovecs (one empty, one large) arrives intact, for PUT and POST. */
static void test_body_from_iovecs(void **state)
{
	struct fixture *f = *state;
	struct ws_http *h = open_client(2, 0);
	static const size_t sizes[] = { 1, 4095, 0, 70000, 12345 };
	struct iovec iov[5];
	uint64_t seed = 42;
	size_t total = 0;
	char want[65];
	uint8_t *all;

	for (int i = 0; i < 5; i++)
		total += sizes[i];
	all = malloc(total);
	for (size_t i = 0; i < total; i++)
		all[i] = (uint8_t)wt_rand(&seed);
	for (size_t i = 0, off = 0; i < 5; off += sizes[i], i++) {
		iov[i].iov_base = all + off;
		iov[i].iov_len = sizes[i];
	}
	ws_sha256_hex(all, total, want);

	const char *hdrs[] = { "Content-Type: application/octet-stream", "X-Client: test", NULL };
	struct ws_http_req r[2] = {
		{ .method = "PUT", .url = url(f, "/echo"), .headers = hdrs, .body = iov, .body_iovcnt = 5 },
		{ .method = "POST", .url = url(f, "/echo"), .headers = hdrs, .header_count = 1, .body = iov, .body_iovcnt = 5 },
	};
	perform(h, r, 2);
	for (int i = 0; i < 2; i++) {
		char len[32];
		assert_int_equal(r[i].err, 0);
		assert_int_equal(r[i].status, 200);
		snprintf(len, sizeof(len), "%zu", total);
		assert_string_equal(ws_http_header(&r[i], "x-body-len"), len);
		assert_string_equal(ws_http_header(&r[i], "x-body-sha256"), want);
		assert_string_equal(ws_http_header(&r[i], "x-method"), i ? "POST" : "PUT");
	}
	struct ws_http_stats st;
	ws_http_get_stats(h, &st);
	assert_int_equal(st.requests, 2);
	assert_int_equal(st.bytes_sent, 2 * total);

	/* An empty PUT is a Content-Length: 0 upload, not a hang. */
	struct ws_http_req e = { .method = "PUT", .url = url(f, "/echo") };
	perform(h, &e, 1);
	assert_int_equal(e.err, 0);
	assert_string_equal(ws_http_header(&e, "x-body-len"), "0");
	free(all);
	ws_http_close(h);
}

/* Many concurrent uploads: each slot's read cursor stays with its own request. */
static void test_concurrent_puts(void **state)
{
	struct fixture *f = *state;
	struct ws_http *h = open_client(4, 0);
	enum { N = 16 };
	struct ws_http_req r[N];
	struct iovec iov[N][3];
	char want[N][65];
	uint8_t *data[N];
	uint64_t seed = 7;

	memset(r, 0, sizeof(r));
	for (int i = 0; i < N; i++) {
		size_t n = 1000 + (size_t)i * 3001;
		data[i] = malloc(n);
		for (size_t j = 0; j < n; j++)
			data[i][j] = (uint8_t)wt_rand(&seed);
		ws_sha256_hex(data[i], n, want[i]);
		iov[i][0] = (struct iovec){ data[i], n / 3 };
		iov[i][1] = (struct iovec){ data[i] + n / 3, n / 3 };
		iov[i][2] = (struct iovec){ data[i] + 2 * (n / 3), n - 2 * (n / 3) };
		r[i] = (struct ws_http_req){ .method = "PUT", .url = url(f, "/echo"), .body = iov[i], .body_iovcnt = 3 };
	}
	perform(h, r, N);
	for (int i = 0; i < N; i++) {
		assert_int_equal(r[i].err, 0);
		assert_string_equal(ws_http_header(&r[i], "x-body-sha256"), want[i]);
		free(data[i]);
	}
	assert_true(srv_counts(f->srv).conns_max <= 4);
	ws_http_close(h);
}

static void test_503_retry_after(void **state)
{
	struct fixture *f = *state;
	struct ws_http *h = open_client(1, 0);
	char mem[64];
	struct buf b = { mem, 0, sizeof(mem) };
	struct ws_http_req r = { .method = "GET", .url = url(f, "/busy"), .on_body = buf_sink, .on_body_arg = &b };

	perform(h, &r, 1);
	/* An HTTP error status is a response, not a transport error: store/ decides. */
	assert_int_equal(r.err, 0);
	assert_int_equal(r.status, 503);
	assert_string_equal(ws_http_header(&r, "retry-after"), "7");
	assert_int_equal(b.len, 8);
	assert_memory_equal(mem, "SlowDown", 8);
	ws_http_close(h);
}

static void test_short_body(void **state)
{
	struct fixture *f = *state;
	struct ws_http *h = open_client(1, 0);
	struct ws_http_req r = { .method = "GET", .url = url(f, "/short") };

	perform(h, &r, 1);
	/* A clean close before Content-Length bytes: CURLE_PARTIAL_FILE. */
	assert_int_equal(r.err, -EIO);
	assert_true(r.truncated);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.content_length, 100);
	assert_int_equal(r.body_bytes, 10);
	assert_true(r.err_detail[0] != '\0');
	ws_http_close(h);
}

static void test_reset_mid_body(void **state)
{
	struct fixture *f = *state;
	struct ws_http *h = open_client(1, 0);
	struct ws_http_req r = { .method = "GET", .url = url(f, "/reset") };

	perform(h, &r, 1);
	assert_int_equal(r.err, -ECONNRESET);
	assert_true(r.truncated);
	assert_int_equal(r.content_length, 100000);
	assert_true(r.body_bytes < 100000);
	assert_true(r.err_detail[0] != '\0');
	ws_http_close(h);
}

static void test_timeout(void **state)
{
	struct fixture *f = *state;
	struct ws_http *h = open_client(1, 200);
	struct ws_http_req r = { .method = "GET", .url = url(f, "/slow") };
	uint64_t t0 = ws_mono_ms();

	perform(h, &r, 1);
	assert_int_equal(r.err, -ETIMEDOUT);
	assert_int_equal(r.status, 0);
	assert_true(ws_mono_ms() - t0 < 1500);
	ws_http_close(h);
}

/*
 * A request's deadline ends it whatever stage it is in, long before the
 * client's own 30 s timeout: waiting for a reply that never comes, or in the
 * middle of a body that stopped. One whose deadline has passed is not sent.
 */
static void test_deadline(void **state)
{
	struct fixture *f = *state;
	struct ws_http *h = open_client(2, 0);
	char u0[256], u1[256];
	uint64_t t0 = ws_mono_ms();
	struct ws_http_req r[2] = {
		{ .method = "GET", .url = strcpy(u0, url(f, "/slow")), .deadline_ms = t0 + 300 },
		{ .method = "GET", .url = strcpy(u1, url(f, "/stall")), .deadline_ms = t0 + 300 },
	};

	perform(h, r, 2);
	uint64_t dt = ws_mono_ms() - t0;
	print_message("  deadline 300 ms: %" PRIu64 " ms; %s; %s\n", dt, r[0].err_detail, r[1].err_detail);
	assert_int_equal(r[0].err, -ETIMEDOUT);
	assert_int_equal(r[0].status, 0);
	assert_int_equal(r[1].err, -ETIMEDOUT);
	assert_int_equal(r[1].status, 200);
	assert_true(r[1].body_bytes > 0 && r[1].body_bytes < 100000);
	assert_true(dt >= 290 && dt < 1500);

	/* Past its deadline: fails at once, and the server never sees it. */
	int conns = srv_counts(f->srv).conns_total;
	struct ws_http_req late = { .method = "GET", .url = url(f, "/hello"), .deadline_ms = ws_mono_ms() - 1 };
	ws_http_close(h);
	h = open_client(1, 0);
	perform(h, &late, 1);
	assert_int_equal(late.err, -ETIMEDOUT);
	assert_int_equal(late.status, 0);
	assert_non_null(strstr(late.err_detail, "deadline"));
	wt_sleep_ms(50);
	assert_int_equal(srv_counts(f->srv).conns_total, conns);

	/* A deadline far off leaves the client's own timeout in charge. */
	ws_http_close(h);
	h = open_client(1, 200);
	struct ws_http_req far = { .method = "GET", .url = url(f, "/slow"), .deadline_ms = ws_mono_ms() + 60000 };
	t0 = ws_mono_ms();
	perform(h, &far, 1);
	assert_int_equal(far.err, -ETIMEDOUT);
	assert_true(ws_mono_ms() - t0 < 1500);
	ws_http_close(h);
}

static void test_refused(void **state)
{
	struct ws_http *h = open_client(1, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	char u[128];
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	(void)state;

	/* A port that was just bound and released: nothing listens there. */
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	close(fd);
	snprintf(u, sizeof(u), "http://127.0.0.1:%d/x", ntohs(a.sin_port));
	struct ws_http_req r = { .method = "GET", .url = u };
	perform(h, &r, 1);
	assert_int_equal(r.err, -ECONNREFUSED);
	assert_int_equal(r.status, 0);
	assert_true(r.err_detail[0] != '\0');
	ws_http_close(h);
}

/* A plain-HTTP server of one connection: whatever it is sent, it answers
 * 400 and closes (as a plain server meets a TLS ClientHello). */
static void *plain_answer(void *arg)
{
	int lfd = *(int *)arg, c = accept(lfd, NULL, NULL);
	static const char reply[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
	char buf[512];
	if (c >= 0) {
		(void)!read(c, buf, sizeof(buf));
		(void)!write(c, reply, sizeof(reply) - 1);
		close(c);
	}
	return NULL;
}

/*
 * TLS spoken to a plain-HTTP server: the handshake fails on protocol, which
 * no retry mends: WS_HTTP_ETLS (not transient), the detail naming the URL
 * up to its query and the ca_file in force. (tests/hostile/test_tls.sh has
 * the certificate cases against a real TLS server.)
 */
static void test_tls_failure_final(void **state)
{
	struct ws_http_opts o = { .max_in_flight = 1, .ca_file = "/etc/ssl/certs/ca-certificates.crt" };
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int err = -1, lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct ws_http *h = ws_http_open(&o, &err);
	char u[128], want[96];
	pthread_t th;
	(void)state;

	assert_non_null(h);
	assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(lfd, 1), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &alen), 0);
	assert_int_equal(pthread_create(&th, NULL, plain_answer, &lfd), 0);
	snprintf(u, sizeof(u), "https://127.0.0.1:%d/bkt/key?x-id=1", ntohs(a.sin_port));
	snprintf(want, sizeof(want), "TLS to https://127.0.0.1:%d/bkt/key failed", ntohs(a.sin_port));
	struct ws_http_req r = { .method = "GET", .url = u };
	perform(h, &r, 1);
	pthread_join(th, NULL);
	close(lfd);
	assert_int_equal(r.err, WS_HTTP_ETLS);
	assert_false(ws_err_transient(r.err));
	if (!strstr(r.err_detail, want) || !strstr(r.err_detail, "ca_file=/etc/ssl/certs/ca-certificates.crt") ||
	    strstr(r.err_detail, "x-id"))
		fail_msg("detail does not name the URL (less its query) and ca_file: %s", r.err_detail);
	assert_int_equal(r.status, 0);
	ws_http_close(h);
}

static void test_keepalive_reuse(void **state)
{
	struct fixture *f = *state;
	struct ws_http *h = open_client(4, 0);
	struct ws_http_stats st;

	/* Sequential calls, PUTs and GETs mixed: one connection throughout. */
	for (int i = 0; i < 5; i++) {
		struct ws_http_req r = { .method = i % 2 ? "GET" : "PUT", .url = url(f, i % 2 ? "/hello" : "/echo") };
		perform(h, &r, 1);
		assert_int_equal(r.err, 0);
		assert_int_equal(r.status, 200);
	}
	ws_http_get_stats(h, &st);
	assert_int_equal(st.requests, 5);
	assert_int_equal(st.connects, 1);
	/* Body bytes only: 2 x "hello world\n", 3 x "0 <sha-256 hex>". */
	assert_int_equal(st.bytes_received, 2 * 12 + 3 * 66);
	ws_http_close(h);

	/* Sequential requests inside one batch (max_in_flight 1). */
	struct ws_http_req rs[3] = {
		{ .method = "GET", .url = url(f, "/hello") },
	};
	rs[1] = rs[0];
	rs[2] = rs[0];
	h = open_client(1, 0);
	perform(h, rs, 3);
	ws_http_get_stats(h, &st);
	assert_int_equal(st.requests, 3);
	assert_int_equal(st.connects, 1);
	ws_http_close(h);

	/* One connection per client, as the server saw it. */
	assert_int_equal(srv_counts(f->srv).conns_total, 2);
}

/*
 * GET first (leaving its connection idle in the cache), wait pause_ms, then
 * PUT 20,000 bytes to put_path on the same client; the PUT must succeed with
 * its body arriving whole (the server echoes its SHA-256). Returns the PUT.
 */
static struct ws_http_req get_then_put(struct fixture *f, struct ws_http *h, const char *first,
				       const char *put_path, unsigned pause_ms)
{
	static char body[20000];
	char want[65];
	struct iovec iov = { body, sizeof(body) };

	memset(body, 'p', sizeof(body));
	ws_sha256_hex(body, sizeof(body), want);
	struct ws_http_req d = { .method = "GET", .url = url(f, first) };
	perform(h, &d, 1);
	assert_int_equal(d.status, 200);
	assert_int_equal(d.resends, 0);
	usleep(pause_ms * 1000);
	struct ws_http_req p = { .method = "PUT", .url = url(f, put_path), .body = &iov, .body_iovcnt = 1 };
	perform(h, &p, 1);
	assert_int_equal(p.err, 0);
	assert_int_equal(p.status, 200);
	assert_string_equal(ws_http_header(&p, "x-body-sha256"), want);
	p.body = NULL;
	p.body_iovcnt = 0;
	return p;
}

/* The server closes an idle kept-alive connection: the next PUT still arrives whole. */
static void test_server_drops_idle(void **state)
{
	struct fixture *f = *state;
	struct ws_http *h = open_client(1, 0);
	struct ws_http_stats st;

	struct ws_http_req p = get_then_put(f, h, "/drop", "/echo", 50);
	/* libcurl saw the close while the connection sat idle: a new one, not a resend. */
	assert_int_equal(p.resends, 0);
	ws_http_get_stats(h, &st);
	assert_int_equal(st.connects, 2);
	ws_http_close(h);
}

/*
 * libcurl's silent resend: a request on a reused connection that dies with
 * no reply is sent again on a fresh connection; the caller sees only the
 * second reply, so ws_http counts it (resends), and the body is whole again.
 * On a fresh connection the same death is an error, not a resend.
 */
static void test_silent_resend_counted(void **state)
{
	struct fixture *f = *state;
	struct ws_http *h = open_client(1, 0);
	char body[100];
	struct iovec iov = { body, sizeof(body) };
	struct ws_http_stats st;

	memset(body, 'v', sizeof(body));
	struct ws_http_req p = get_then_put(f, h, "/hello", "/vanish", 0);
	assert_int_equal(p.resends, 1);
	ws_http_get_stats(h, &st);
	assert_int_equal(st.requests, 2);
	assert_int_equal(st.resends, 1);
	assert_int_equal(st.connects, 2);
	assert_int_equal(f->srv->vanish_seen, 2); /* the server saw it twice */
	ws_http_close(h);

	/* First request of a fresh client: no connection to reuse, so no resend. */
	pthread_mutex_lock(&f->srv->mu);
	f->srv->vanish_seen = 0;
	pthread_mutex_unlock(&f->srv->mu);
	h = open_client(1, 0);
	struct ws_http_req q = { .method = "PUT", .url = url(f, "/vanish"), .body = &iov, .body_iovcnt = 1 };
	perform(h, &q, 1);
	assert_int_equal(q.err, -ECONNRESET);
	assert_int_equal(q.resends, 0);
	ws_http_get_stats(h, &st);
	assert_int_equal(st.resends, 0);
	ws_http_close(h);
}

/* ws_http_perform_each: requests that do not lie side by side, run together. */
static void test_perform_each(void **state)
{
	struct fixture *f = *state;
	struct ws_http *h = open_client(4, 0);
	struct ws_http_req a = { .method = "GET", .url = url(f, "/hold") };
	struct ws_http_req b = { .method = "GET", .url = url(f, "/hold") };
	struct ws_http_req c = { .method = "GET", .url = url(f, "/hello") };
	struct ws_http_req *ptrs[3] = { &a, &b, &c };
	uint64_t t0 = ws_mono_ms();

	assert_int_equal(ws_http_perform_each(h, ptrs, 3), 0);
	assert_int_equal(a.status, 200);
	assert_int_equal(b.status, 200);
	assert_int_equal(c.status, 200);
	assert_int_equal(c.body_bytes, 12);
	assert_true(ws_mono_ms() - t0 < 190); /* the two 100 ms holds ran at once */
	ptrs[1] = NULL;
	assert_int_equal(ws_http_perform_each(h, ptrs, 3), -EINVAL);
	assert_int_equal(ws_http_perform_each(h, NULL, 1), -EINVAL);
	assert_int_equal(ws_http_perform_each(h, NULL, 0), 0);
	ws_http_close(h);
}

static void test_max_in_flight(void **state)
{
	struct fixture *f = *state;
	enum { N = 8 };
	struct ws_http_req r[N];
	struct ws_http *h = open_client(2, 0);
	uint64_t t0 = ws_mono_ms();

	for (int i = 0; i < N; i++)
		r[i] = (struct ws_http_req){ .method = "GET", .url = url(f, "/hold") };
	perform(h, r, N);
	for (int i = 0; i < N; i++)
		assert_int_equal(r[i].status, 200);
	struct srv_counts c = srv_counts(f->srv);
	assert_int_equal(c.active_max, 2);
	assert_true(c.conns_max <= 2);
	/* Four rounds of 100 ms at two at a time. */
	assert_true(ws_mono_ms() - t0 >= 350);
	ws_http_close(h);

	/* And the bound is what limits: with 8 allowed, more than 2 run at once. */
	h = open_client(8, 0);
	for (int i = 0; i < N; i++)
		r[i] = (struct ws_http_req){ .method = "GET", .url = url(f, "/hold") };
	perform(h, r, N);
	assert_true(srv_counts(f->srv).active_max > 2);
	ws_http_close(h);
}

static void test_response_headers(void **state)
{
	struct fixture *f = *state;
	struct ws_http *h = open_client(1, 0);
	struct ws_http_req r = { .method = "GET", .url = url(f, "/headers") };
	const char *v;

	perform(h, &r, 1);
	assert_int_equal(r.err, 0);
	assert_int_equal(r.hdr_count, WS_HTTP_HDR_MAX);
	for (size_t i = 0; i < r.hdr_count; i++)
		for (const char *p = r.hdrs[i].name; *p; p++)
			assert_false(*p >= 'A' && *p <= 'Z');
	assert_string_equal(ws_http_header(&r, "x-mixed-case"), "Value With Spaces");
	assert_string_equal(ws_http_header(&r, "X-MIXED-CASE"), "Value With Spaces");
	assert_string_equal(ws_http_header(&r, "etag"), "\"abc\"");
	/* A value too long to keep is absent, with its length: never read cut. */
	v = ws_http_header(&r, "x-long");
	assert_null(v);
	assert_int_equal(ws_http_header_cut(&r, "x-long"), 600);
	/* A name too long to keep is dropped, not truncated into another name. */
	for (size_t i = 0; i < r.hdr_count; i++)
		assert_null(strstr(r.hdrs[i].name, "averylongheader"));
	assert_non_null(ws_http_header(&r, "x-many-00"));
	assert_null(ws_http_header(&r, "x-many-39"));
	assert_null(ws_http_header(&r, "no-such-header"));
	ws_http_close(h);
}

static void test_sink_error(void **state)
{
	struct fixture *f = *state;
	struct ws_http *h = open_client(1, 0);
	char mem[1000];
	struct buf b = { mem, 0, sizeof(mem) };
	struct ws_http_req r = { .method = "GET", .url = url(f, "/big"), .on_body = buf_sink, .on_body_arg = &b };

	perform(h, &r, 1);
	assert_int_equal(r.err, WS_ETOOBIG);
	assert_true(r.body_bytes <= sizeof(mem));
	assert_true(r.err_detail[0] != '\0');
	/* The easy handle is reset and reused: the next request is unaffected. */
	struct ws_http_req g = { .method = "GET", .url = url(f, "/hello") };
	perform(h, &g, 1);
	assert_int_equal(g.err, 0);
	assert_int_equal(g.status, 200);
	ws_http_close(h);
}

static void test_bad_input(void **state)
{
	struct fixture *f = *state;
	struct ws_http_opts o = { .max_in_flight = 257 };
	struct ws_http *h;
	int err = 0;

	assert_null(ws_http_open(&o, &err));
	assert_int_equal(err, -EINVAL);
	o.max_in_flight = 1;
	o.timeout_ms = -1;
	assert_null(ws_http_open(&o, &err));
	assert_int_equal(err, -EINVAL);
	/* NULL options: all defaults. */
	h = ws_http_open(NULL, &err);
	assert_non_null(h);
	assert_int_equal(ws_http_perform(NULL, NULL, 1), -EINVAL);
	assert_int_equal(ws_http_perform(h, NULL, 1), -EINVAL);
	assert_int_equal(ws_http_perform(h, NULL, 0), 0);

	/* A bad request fails alone; the rest of the batch runs. */
	struct ws_http_req r[3] = {
		{ .method = NULL, .url = url(f, "/hello") },
		{ .method = "GET", .url = url(f, "/hello") },
		{ .method = "PUT", .url = url(f, "/echo"), .body_iovcnt = 2 },
	};
	perform(h, r, 3);
	assert_int_equal(r[0].err, -EINVAL);
	assert_int_equal(r[1].err, 0);
	assert_int_equal(r[1].status, 200);
	assert_int_equal(r[2].err, -EINVAL);
	ws_http_close(h);
	ws_http_close(NULL);
}

static void test_faults(void **state)
{
#ifdef WS_FAULTS
	struct fixture *f = *state;
	struct ws_http *h = open_client(2, 0);
	struct ws_http_req r[2] = {
		{ .method = "GET", .url = url(f, "/hello") },
		{ .method = "GET", .url = url(f, "/hello") },
	};

	ws_fault_arm("http.perform", 1, 0);
	assert_int_equal(ws_http_perform(h, r, 2), -EIO);
	assert_int_equal(r[0].err, -EIO);
	assert_int_equal(r[1].err, -EIO);
	ws_fault_arm("http.request", 2, 0);
	perform(h, r, 2);
	assert_int_equal(r[0].err, 0);
	assert_int_equal(r[0].status, 200);
	assert_int_equal(r[1].err, -ECONNRESET);
	assert_int_equal(r[1].status, 0);
	ws_fault_disarm();
	ws_http_close(h);
#else
	(void)state;
	skip();
#endif
}

static char logged[512];

static void log_capture(enum ws_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level == WS_LOG_WARN)
		snprintf(logged, sizeof(logged), "%s", msg);
}

static void test_insecure_is_logged(void **state)
{
	struct ws_http_opts o = { .insecure = true, .ca_file = "/nonexistent/ca.pem" };
	struct ws_http *h;
	int err;
	(void)state;

	logged[0] = '\0';
	ws_log_set_sink(log_capture, NULL);
	h = ws_http_open(&o, &err);
	ws_log_set_sink(NULL, NULL);
	assert_non_null(h);
	assert_non_null(strstr(logged, "insecure"));
	ws_http_close(h);
}

/* Header lines as libcurl hands them over: the status is known from the
 * status line on (an error body's sink reads it), and a reply padded with
 * more headers than are kept still shows the ones walship reads (an ETag
 * after 40 others), in place of ones it does not. */
static void test_header_lines(void **state)
{
	struct ws_http_req r;
	char line[128];
	(void)state;
	memset(&r, 0, sizeof(r));
	ws_http_header_line(&r, "HTTP/1.1 100 Continue\r\n", 23);
	assert_int_equal(r.status, 100);
	ws_http_header_line(&r, "HTTP/1.1 503 Slow Down\r\n", 24);
	assert_int_equal(r.status, 503);
	for (int i = 0; i < 40; i++) {
		int n = snprintf(line, sizeof(line), "X-Filler-%02d: %d\r\n", i, i);
		ws_http_header_line(&r, line, (size_t)n);
	}
	ws_http_header_line(&r, "ETag: \"abc\"\r\n", 13);
	ws_http_header_line(&r, "Retry-After: 2\r\n", 16);
	assert_int_equal(r.hdr_count, WS_HTTP_HDR_MAX);
	assert_non_null(ws_http_header(&r, "etag"));
	assert_string_equal(ws_http_header(&r, "etag"), "\"abc\"");
	assert_string_equal(ws_http_header(&r, "retry-after"), "2");
	assert_non_null(ws_http_header(&r, "x-filler-00"));
	assert_int_equal(ws_http_header_cut(&r, "etag"), 0);

	/* A value longer than is kept is never read cut (a prefix of an
	 * ETag or a Content-Range would be another value): absent, with its
	 * length. */
	{
		char big[700];
		int n = snprintf(big, sizeof(big), "Content-Range: bytes 0-9/%0600d\r\n", 1);
		memset(&r, 0, sizeof(r));
		ws_http_header_line(&r, "HTTP/1.1 206 Partial Content\r\n", 31);
		ws_http_header_line(&r, big, (size_t)n);
		assert_null(ws_http_header(&r, "content-range"));
		assert_int_equal(ws_http_header_cut(&r, "content-range"), 610);
		assert_int_equal(ws_http_header_cut(&r, "etag"), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_get_body, setup, teardown),
		cmocka_unit_test_setup_teardown(test_head, setup, teardown),
		cmocka_unit_test_setup_teardown(test_methods_in_turn, setup, teardown),
		cmocka_unit_test_setup_teardown(test_body_from_iovecs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_puts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_503_retry_after, setup, teardown),
		cmocka_unit_test_setup_teardown(test_short_body, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reset_mid_body, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deadline, setup, teardown),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_tls_failure_final),
		cmocka_unit_test_setup_teardown(test_keepalive_reuse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_server_drops_idle, setup, teardown),
		cmocka_unit_test_setup_teardown(test_silent_resend_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_perform_each, setup, teardown),
		cmocka_unit_test_setup_teardown(test_max_in_flight, setup, teardown),
		cmocka_unit_test_setup_teardown(test_response_headers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sink_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
		cmocka_unit_test_setup_teardown(test_faults, setup, teardown),
		cmocka_unit_test(test_insecure_is_logged),
		cmocka_unit_test(test_header_lines),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
