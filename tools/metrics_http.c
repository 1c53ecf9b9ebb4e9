/*
 * GET /metrics over HTTP with libmicrohttpd (Debian's libmicrohttpd).
 *
 * walship binds the listening socket itself (so a bind error names its
 * errno and port 0 works) and hands it to MHD, which serves it from one
 * internal thread. That thread waits with poll(2), not select(2): with
 * thousands of tenants the process holds more than FD_SETSIZE (1024) files,
 * and select cannot watch a connection whose descriptor is above that.
 * Connections are bounded (CONNECTIONS_MAX, TIMEOUT_S); each scrape
 * renders the engine's metrics once, on MHD's thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "metrics_http.h"
#include "ws_clock.h"

#define CONNECTIONS_MAX 64u
#define PER_IP_MAX 4u      /* one client (a slow one) cannot hold every connection */
#define TIMEOUT_S 10u
/* A request's head must arrive whole within this of its connection's start
 * (or of the connection's last answer): the idle timeout alone lets a
 * client that sends a byte every few seconds keep its connections for ever,
 * and on the scraper's own address (loopback) that locks the scraper out. */
#define REQUEST_DEADLINE_MS 10000u
#define BACKLOG 16
#define HOST_BYTES_MAX 256

/* A connection waiting for its request's head, for the watchdog. */
struct conn_ent {
	struct MHD_Connection *conn;   /* NULL: free entry */
	int fd;
	uint64_t since_ms;             /* waiting since (0: a request is being answered) */
	bool cut;
};

struct ws_metrics_http {
	struct MHD_Daemon *daemon;
	struct ws_engine *engine;
	char url[HOST_BYTES_MAX + 32];
	pthread_mutex_t mu;
	struct conn_ent conns[CONNECTIONS_MAX];
	pthread_t watchdog;
	bool watchdog_started;
	int stop_fd;                   /* eventfd: the watchdog ends */
};

/* Under m->mu. */
static struct conn_ent *conn_find(struct ws_metrics_http *m, const struct MHD_Connection *conn)
{
	for (unsigned i = 0; i < CONNECTIONS_MAX; i++)
		if (m->conns[i].conn == conn)
			return &m->conns[i];
	return NULL;
}

/* MHD says when a connection starts and ends (before it closes the socket). */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct ws_metrics_http *m = cls;
	struct conn_ent *e;
	(void)socket_context;
	pthread_mutex_lock(&m->mu);
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (ci && (e = conn_find(m, NULL)) != NULL)
			*e = (struct conn_ent){ conn, ci->connect_fd, ws_mono_ms(), false };
	} else if ((e = conn_find(m, conn)) != NULL) {
		memset(e, 0, sizeof(*e));
	}
	pthread_mutex_unlock(&m->mu);
}

/* A request answered: the connection's next request head is due anew. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct ws_metrics_http *m = cls;
	struct conn_ent *e;
	(void)con_cls;
	(void)toe;
	pthread_mutex_lock(&m->mu);
	if ((e = conn_find(m, conn)) != NULL)
		e->since_ms = ws_mono_ms();
	pthread_mutex_unlock(&m->mu);
}

/* Once a second: a connection whose request head is overdue is shut down
 * (MHD then sees it end and closes it). */
static void *watchdog_main(void *arg)
{
	struct ws_metrics_http *m = arg;
	struct pollfd pf = { m->stop_fd, POLLIN, 0 };
	for (;;) {
		int n = poll(&pf, 1, 1000);
		if (n > 0 || (n < 0 && errno != EINTR))
			break; /* stopped (or poll cannot work: no deadline from here on) */
		uint64_t now = ws_mono_ms();
		pthread_mutex_lock(&m->mu);
		for (unsigned i = 0; i < CONNECTIONS_MAX; i++) {
			struct conn_ent *e = &m->conns[i];
			if (e->conn && e->since_ms && !e->cut && now - e->since_ms > REQUEST_DEADLINE_MS) {
				(void)shutdown(e->fd, SHUT_RDWR);
				e->cut = true;
			}
		}
		pthread_mutex_unlock(&m->mu);
	}
	return NULL;
}

/* HOST:PORT or [HOST]:PORT into host and port. 0 or -1 with err. */
static int split_addr(const char *addr, char *host, size_t host_bytes, unsigned *port, char *err, size_t err_bytes)
{
	const char *colon, *h = addr;
	size_t n;
	char *end;
	unsigned long v;

	if (addr[0] == '[') {
		const char *close = strchr(addr, ']');
		if (!close || close[1] != ':') {
			snprintf(err, err_bytes, "expected [IPV6]:PORT");
			return -1;
		}
		h = addr + 1;
		n = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(addr, ':');
		if (!colon) {
			snprintf(err, err_bytes, "expected HOST:PORT (e.g. 127.0.0.1:9464)");
			return -1;
		}
		n = (size_t)(colon - addr);
		if (memchr(addr, ':', n)) {
			snprintf(err, err_bytes, "an IPv6 address goes in brackets: [ADDR]:PORT");
			return -1;
		}
	}
	if (n == 0 || n >= host_bytes) {
		snprintf(err, err_bytes, "the host is empty or longer than %zu bytes", host_bytes - 1);
		return -1;
	}
	memcpy(host, h, n);
	host[n] = '\0';
	errno = 0;
	v = strtoul(colon + 1, &end, 10);
	if (colon[1] < '0' || colon[1] > '9' || *end || errno || v > 65535) {
		snprintf(err, err_bytes, "the port must be 0..65535");
		return -1;
	}
	*port = (unsigned)v;
	return 0;
}

int ws_metrics_addr_check(const char *addr, char *err, size_t err_bytes)
{
	char host[HOST_BYTES_MAX];
	unsigned port;
	return split_addr(addr, host, sizeof(host), &port, err, err_bytes);
}

int ws_metrics_addr_resolve(const char *addr, char *err, size_t err_bytes)
{
	struct addrinfo hints, *res = NULL;
	char host[HOST_BYTES_MAX];
	unsigned port;
	int e;

	if (split_addr(addr, host, sizeof(host), &port, err, err_bytes))
		return -1;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	e = getaddrinfo(host, "0", &hints, &res);
	if (e) {
		snprintf(err, err_bytes, "the host %s does not resolve: %s", host, gai_strerror(e));
		return -1;
	}
	freeaddrinfo(res);
	return 0;
}

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status, const char *body)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)(uintptr_t)body,
								 MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload_data, size_t *upload_data_bytes,
				  void **con_cls)
{
	struct ws_metrics_http *m = cls;
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *text = NULL;
	size_t len = 0;

	(void)version;
	(void)upload_data;
	(void)con_cls;
	{
		/* The head is in: no deadline while it is answered. */
		struct conn_ent *e;
		pthread_mutex_lock(&m->mu);
		if ((e = conn_find(m, conn)) != NULL)
			e->since_ms = 0;
		pthread_mutex_unlock(&m->mu);
	}
	if (*upload_data_bytes) { /* a body on a GET: ignored */
		*upload_data_bytes = 0;
		return MHD_YES;
	}
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return respond(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
	if (strcmp(url, "/metrics"))
		return respond(conn, MHD_HTTP_NOT_FOUND, "not found; metrics are at /metrics\n");
	if (ws_engine_metrics_text(m->engine, &text, &len)) {
		char msg[512];
		snprintf(msg, sizeof(msg), "metrics: %s\n", ws_errmsg());
		return respond(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, msg);
	}
	/* MUST_FREE: MHD free()s text with the response. */
	r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
	ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* A bound, listening, non-blocking socket for host:port; -1 with err. */
static int listen_on(const char *addr, const char *host, unsigned port, int *family, char *err, size_t err_bytes)
{
	struct addrinfo hints, *res = NULL, *ai;
	char service[8];
	int fd = -1, e = 0, one = 1;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	snprintf(service, sizeof(service), "%u", port);
	e = getaddrinfo(host, service, &hints, &res);
	if (e) {
		snprintf(err, err_bytes, "metrics address %s: %s", addr, gai_strerror(e));
		return -1;
	}
	e = 0;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
		if (fd < 0) {
			e = errno;
			continue;
		}
		if (ai->ai_family == AF_INET6) /* exactly the address given, not also IPv4 */
			(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, BACKLOG) == 0) {
			*family = ai->ai_family;
			break;
		}
		e = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		snprintf(err, err_bytes, "metrics address %s: cannot listen: %s", addr, strerror(e ? e : EADDRNOTAVAIL));
	return fd;
}

/*
 * libmicrohttpd's own messages (a refused connection, a malformed request):
 * each as one line with walship's prefix, at most one a second; the others
 * are counted and said with the next. By default MHD writes them to stderr
 * unprefixed, over several lines, once per bad connection: a remote client
 * could flood the log.
 */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t log_last_ms, log_dropped;

__attribute__((format(printf, 2, 0)))
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	uint64_t now, dropped;
	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	for (char *c = msg; *c; c++)
		if (*c == '\n' || *c == '\r' || *c == '\t')
			*c = ' ';
	for (size_t n = strlen(msg); n > 0 && msg[n - 1] == ' '; n--)
		msg[n - 1] = '\0';
	now = ws_mono_ms();
	pthread_mutex_lock(&log_mu);
	if (log_last_ms && now - log_last_ms < 1000) {
		log_dropped++;
		pthread_mutex_unlock(&log_mu);
		return;
	}
	log_last_ms = now;
	dropped = log_dropped;
	log_dropped = 0;
	pthread_mutex_unlock(&log_mu);
	if (dropped)
		fprintf(stderr, "walship: metrics: %s (and %" PRIu64 " more such messages in the last seconds)\n", msg,
			dropped);
	else
		fprintf(stderr, "walship: metrics: %s\n", msg);
}

struct ws_metrics_http *ws_metrics_http_start(const char *addr, struct ws_engine *e, char *err, size_t err_bytes)
{
	char host[HOST_BYTES_MAX], why[160];
	struct ws_metrics_http *m;
	struct sockaddr_storage ss;
	socklen_t ss_len = sizeof(ss);
	unsigned port;
	int fd, family = AF_INET;
	/* ITC: stopping wakes the server's poll at once, even with every
	 * connection slot taken (it waited out the poll timeout). */
	unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG | MHD_USE_ITC;

	if (split_addr(addr, host, sizeof(host), &port, why, sizeof(why))) {
		snprintf(err, err_bytes, "metrics address %s: %s", addr, why);
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, err_bytes, "metrics: out of memory");
		return NULL;
	}
	m->engine = e;
	pthread_mutex_init(&m->mu, NULL);
	m->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (m->stop_fd < 0) {
		snprintf(err, err_bytes, "metrics: eventfd: %s", strerror(errno));
		goto fail;
	}
	fd = listen_on(addr, host, port, &family, err, err_bytes);
	if (fd < 0)
		goto fail;
	if (getsockname(fd, (struct sockaddr *)&ss, &ss_len) == 0)
		port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						      : ((struct sockaddr_in *)&ss)->sin_port);
	snprintf(m->url, sizeof(m->url), strchr(host, ':') ? "http://[%s]:%u/metrics" : "http://%s:%u/metrics", host,
		 port);
	if (family == AF_INET6)
		flags |= MHD_USE_IPv6;
	m->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, m, MHD_OPTION_LISTEN_SOCKET, fd,
				     MHD_OPTION_CONNECTION_LIMIT, CONNECTIONS_MAX, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
				     PER_IP_MAX, MHD_OPTION_CONNECTION_TIMEOUT, TIMEOUT_S, MHD_OPTION_EXTERNAL_LOGGER,
				     mhd_log, NULL, MHD_OPTION_NOTIFY_CONNECTION, on_connection, m,
				     MHD_OPTION_NOTIFY_COMPLETED, on_completed, m, MHD_OPTION_END);
	if (!m->daemon) {
		/* MHD may or may not have closed the socket it was given; a
		 * descriptor leaked on a path that ends the program is the lesser
		 * harm than closing one twice. */
		snprintf(err, err_bytes, "metrics address %s: libmicrohttpd would not start", addr);
		goto fail;
	}
	if (pthread_create(&m->watchdog, NULL, watchdog_main, m) == 0)
		m->watchdog_started = true;
	else
		fprintf(stderr, "walship: metrics: no request deadline (cannot start its thread); the idle "
			"timeout alone bounds a slow client\n");
	return m;
fail:
	if (m->stop_fd >= 0)
		close(m->stop_fd);
	pthread_mutex_destroy(&m->mu);
	free(m);
	return NULL;
}

const char *ws_metrics_http_url(const struct ws_metrics_http *m)
{
	return m->url;
}

void ws_metrics_http_stop(struct ws_metrics_http *m)
{
	if (!m)
		return;
	if (m->watchdog_started) {
		uint64_t one = 1;
		if (write(m->stop_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
			fprintf(stderr, "walship: metrics: cannot stop the request deadline's thread\n");
		else
			pthread_join(m->watchdog, NULL);
	}
	MHD_stop_daemon(m->daemon); /* closes the listening socket too */
	close(m->stop_fd);
	pthread_mutex_destroy(&m->mu);
	free(m);
}
