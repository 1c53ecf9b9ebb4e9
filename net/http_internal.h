/*
 * net/http.c's response-header parser, apart from libcurl so that
 * tests/fuzz and store/ can feed it any bytes. Not part of ws_http.h's API.
 */
#ifndef WS_HTTP_INTERNAL_H
#define WS_HTTP_INTERNAL_H

#include <stddef.h>

#include "ws_http.h"

/*
 * One raw header line of len bytes as libcurl hands it over (not
 * NUL-terminated, CRLF included): a status line ("HTTP/...") forgets the
 * headers of an earlier response, "Name: value" is kept in r->hdrs (name
 * lower-cased, value trimmed and truncated to fit), anything else is ignored.
 */
void ws_http_header_line(struct ws_http_req *r, const char *line, size_t len);

#endif
