/*
 * The metrics endpoint of `walship replicate --metrics-addr HOST:PORT`:
 * GET /metrics answers ws_engine_metrics_text() (Prometheus text format),
 * served by libmicrohttpd on its own thread, bound to that address only.
 */
#ifndef WS_CLI_METRICS_HTTP_H
#define WS_CLI_METRICS_HTTP_H

#include <stddef.h>

#include "walship.h"

struct ws_metrics_http;

/* Syntax of HOST:PORT ([V6ADDR]:PORT for IPv6; PORT 0..65535, 0 = any free
 * one). 0, or -1 with the reason in err. Resolves nothing. */
int ws_metrics_addr_check(const char *addr, char *err, size_t err_bytes);
/* ws_metrics_addr_check, and the host resolves to an address to bind (so a
 * config names its bad line before anything starts). 0, or -1 with err. */
int ws_metrics_addr_resolve(const char *addr, char *err, size_t err_bytes);

/* Bind addr and serve e's metrics until ws_metrics_http_stop(). NULL on
 * failure with the reason (naming the address) in err. */
struct ws_metrics_http *ws_metrics_http_start(const char *addr, struct ws_engine *e, char *err, size_t err_bytes);
/* "http://HOST:PORT/metrics" with the port bound (useful with port 0). */
const char *ws_metrics_http_url(const struct ws_metrics_http *m);
/* Stops serving (waits for a request in progress), closes the socket, frees. NULL is a no-op. */
void ws_metrics_http_stop(struct ws_metrics_http *m);

#endif
