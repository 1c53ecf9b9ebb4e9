/*
 * AWS Signature Version 4, over OpenSSL (HMAC-SHA256, SHA-256).
 *
 * walship signs its own requests: Debian's libcurl 7.88 --aws-sigv4 omits
 * x-amz-content-sha256, does not sort the query and signs valueless
 * parameters ("?uploads") wrongly.
 *
 * Canonical request (AWS docs, "Create a canonical request"):
 *   METHOD \n CanonicalURI \n CanonicalQuery \n CanonicalHeaders \n
 *   SignedHeaders \n HashedPayload
 * String to sign:
 *   "AWS4-HMAC-SHA256" \n amz_date \n date/region/service/aws4_request \n
 *   hex(SHA256(canonical request))
 * Signing key: HMAC chain "AWS4"+secret -> date -> region -> service ->
 * "aws4_request".
 */
#ifndef WS_SIGV4_H
#define WS_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "ws_fail.h"

#define WS_SIGV4_AUTH_MAX 1024
#define WS_SIGV4_CREQ_MAX 16384

struct ws_sigv4_creds {
	char access_key[128];
	char secret_key[128];
	char session_token[4096]; /* "" = none; sent as x-amz-security-token and signed */
	char region[64];
	char service[32];         /* "s3" */
};

struct ws_sigv4_header {
	const char *name;         /* any case; canonicalised to lower case */
	const char *value;        /* trimmed, inner runs of spaces folded */
};

struct ws_sigv4_request {
	const char *method;       /* "GET", "PUT", ... */
	const char *host;         /* Host header value, e.g. "127.0.0.1:7480" */
	const char *path;         /* path as sent, already URI-encoded ("/bucket/a%20b") */
	const char *query;        /* raw query as sent, without '?', or NULL */
	const struct ws_sigv4_header *headers; /* extra headers to sign (not host/x-amz-date/...) */
	size_t header_count;
	const char *payload_sha256_hex; /* 64 hex chars, or "UNSIGNED-PAYLOAD" */
	const char *amz_date;     /* "YYYYMMDDTHHMMSSZ" */
	/*
	 * S3 rules: the canonical URI is the path as sent (each segment
	 * encoded once, no normalisation). Other services (and the generic AWS
	 * test suite): remove dot segments and encode each segment twice.
	 */
	bool s3;
	/* Add x-amz-content-sha256 to the signed headers (S3 requires it). */
	bool sign_content_sha256;
};

struct ws_sigv4_out {
	char authorization[WS_SIGV4_AUTH_MAX];   /* value of the Authorization header */
	char canonical_request[WS_SIGV4_CREQ_MAX];
	char string_to_sign[1024];
	char signature[65];
	char signed_headers[1024];
};

/*
 * Sign a request. Errors: -EINVAL (missing field, malformed amz_date,
 * payload hash, path or header, or a header the signer sets itself),
 * WS_ETOOBIG (a canonical form exceeds its buffer, more than 64 headers),
 * -ENOMEM, -EIO (OpenSSL failed). On error every field of out is "".
 * Nothing secret is ever written to logs or error details.
 */
int ws_sigv4_sign(const struct ws_sigv4_creds *creds, const struct ws_sigv4_request *req,
		  struct ws_sigv4_out *out) WS_MUST_CHECK;

/* "YYYYMMDDTHHMMSSZ" for t (UTC). */
void ws_sigv4_amz_date(time_t t, char out[17]);

/*
 * URI-encode per SigV4 (unreserved A-Z a-z 0-9 - _ . ~ kept, everything else
 * %XX in upper-case hex); '/' kept when keep_slash. out is NUL-terminated.
 * Errors: -EINVAL (NULL in or out, cap 0), WS_ETOOBIG (result and its NUL
 * do not fit in cap; out is then "").
 */
int ws_uri_encode(const char *in, size_t len, bool keep_slash, char *out, size_t cap) WS_MUST_CHECK;

/* Lower-case hex SHA-256 of data (out: 65 bytes). */
void ws_sha256_hex(const void *data, size_t len, char out[65]);

/*
 * Credentials from the standard environment: AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN (optional), AWS_REGION (or
 * AWS_DEFAULT_REGION; default "us-east-1"). service set to "s3".
 * Errors: WS_ECONFIG when a required variable is missing or too long.
 */
int ws_sigv4_creds_from_env(struct ws_sigv4_creds *out) WS_MUST_CHECK;

#endif
