#!/usr/bin/env python3
"""Deterministic HTTP fault-injection proxy for walship's S3 tests.

Sits between walship and the real S3 server (radosgw) on 127.0.0.1 and
injects the faults object stores produce on their own: 503 SlowDown, 429,
added latency, a connection reset mid-body, a truncated response body. It
never fakes a successful answer: every request that is not faulted goes to
the real server and its real response comes back.

    faultproxy.py --upstream 127.0.0.1:7480 --port-file P --control C [--stats S]

The control file is JSON, re-read whenever it changes:

    {"mode": "slowdown", "count": 3, "methods": ["PUT"], "latency_ms": 0,
     "retry_after": 0, "error_pad": 0}

error_pad: bytes of padding in a slowdown's error message (a long error
page, as a proxy in front of a store may send).

mode: pass | slowdown (503 SlowDown) | throttle (429) | error500 |
bad_request (400 InvalidArgument: a request the store refuses as it is) | reset
(forward the request, then reset the client connection mid-body, or before
any reply when the body is empty: the store did the work, the client never
heard) | reset_body (read the request head and half its body, then reset the
client connection: the upload dies mid-body and the store never sees it) |
truncate (send a short body and close) | latency (delay every
request by latency_ms; with latency_ms, slowdown, throttle and error500 are
delayed as much before they answer) | ignore_conditional (a store that ignores
If-None-Match/If-Match: a 412 from the server is answered 200; radosgw
cannot be made to do this, so the proxy fakes that one fault) | hang (read the
request, then never answer: a server that accepted and went silent) | stall
(forward the request, send the reply's head and half its body, then go
silent: a transfer hung mid-body) | phantom_exists (a create, a PUT with
If-None-Match, answered 412 without forwarding it: a store that says an
absent object exists; radosgw cannot be made to do this) | strip_etag
(forward, and drop the ETag header from the reply: what a proxy in front
of a store may do) | ignore_range (drop a GET's Range header, signed again:
a server that answers a range request with the whole object, 200, as HTTP
allows) | shift_range (ask the server for the range from byte 0 instead,
signed again: a 206 for another range than the one asked for) | slow_reply
(forward, and send the reply at rate_bps bytes a second: a slow link, a
transfer that is slow but never stops) | unframed (forward, then send the
reply without its Content-Length and only half its body, and close: a body
cut short that nothing in HTTP/1.1 tells from a whole one; radosgw always
frames its bodies) | short_range (a 206 cut to half its bytes, its
Content-Range saying so: fewer bytes than asked for and than the object
holds) | put_status (a PUT's reply with its status line replaced by
"status", e.g. 201 or 204, headers kept: the success codes HTTP allows that
radosgw does not send) | head_no_length (a HEAD's reply without its
Content-Length) | put_error_body (forward a PUT, then answer its 200 with an
S3 error document as the body: a proxy's, or a store's that reports an
error after the status line) | chunked_padded (a reply's body sent in
chunked encoding after 40 extra headers, as a proxy or CDN in front of a
store may send it) | fake_reply (answer the request HTTP 200 with the
control's "body" as the body, without forwarding it: a multipart upload's
CreateMultipartUpload without an UploadId or not XML, and a
CompleteMultipartUpload that fails after the store began its answer, 200
with an <Error> document, as AWS S3 does; radosgw cannot be made to send
either).

lost_then_gone (the first matching request forwarded and its reply lost,
the connection reset; the later ones answered 404 NoSuchUpload without
forwarding: a store where a completed upload is gone, as AWS S3 may answer
a completion sent again; radosgw answers 200).

target: a substring the request line must hold to match (default: any),
such as "?uploads" (CreateMultipartUpload) or "?uploadId=" (its parts and
completion).

Stores that spell If-Match differently from radosgw (which matches only a
bare etag and answers 412 to a quoted one) are made from radosgw by
rewriting the If-Match header of each request and signing it again with
$AWS_SECRET_ACCESS_KEY (SigV4, as walship signed it): radosgw still decides
every condition, on the object's real etag. if_match_quoted_only (an
RFC 9110 store: only a quoted etag matches; a bare one is sent on quoted,
so never matches) | if_match_any (an AWS-like store: quoted or bare both
match) | if_match_ignored (a store that ignores If-Match: the header is
dropped, the write is unconditional; radosgw cannot be made to do this) |
long_etag (a store whose ETags are etag_bytes long, default 200: every
reply's ETag becomes the real one, "-" and a padding derived from it; an
If-Match naming exactly that is sent to radosgw as the real etag, signed
again, and any other, a cut one included, as it came, never matching).

count: how many matching requests get the fault before the proxy passes
everything again (latency, hang and the if_match_* modes ignore it: they
last until the mode changes). methods: which methods match (default all).
The stats file gets {"requests": N, "faulted": M, "amz_dates": [...],
"delayed_max": D, ...} after every request (amz_dates: the x-amz-date of
the last 64 requests, in the order their bodies arrived; delayed_max: the
most requests that waited out latency_ms at the same time, which is how
many a client had in flight at once).
"""
import argparse
import asyncio
import hashlib
import hmac
import json
import os
import socket
import struct
import sys


class Control:
    def __init__(self, path):
        self.path = path
        self.mtime = None
        self.conf = {"mode": "pass"}
        self.remaining = 0

    def refresh(self):
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        if key == self.mtime:
            return
        self.mtime = key
        try:
            with open(self.path) as f:
                self.conf = json.load(f)
        except (OSError, ValueError) as e:
            print(f"faultproxy: bad control file: {e}", file=sys.stderr)
            self.conf = {"mode": "pass"}
        self.remaining = int(self.conf.get("count", 1))

    def pick(self, method, reqline=""):
        """The fault for this request, consuming one from count."""
        self.refresh()
        mode = self.conf.get("mode", "pass")
        methods = self.conf.get("methods")
        if mode == "pass" or (methods and method not in methods):
            return "pass"
        if self.conf.get("target", "") not in reqline:
            return "pass"
        if mode in PERSISTENT:
            return mode
        if self.remaining <= 0:
            return "pass"
        self.remaining -= 1
        return mode


STATS = {"requests": 0, "faulted": 0, "amz_dates": [], "delayed_now": 0, "delayed_max": 0}
PERSISTENT = ("latency", "hang", "if_match_quoted_only", "if_match_any", "if_match_ignored", "long_etag")


def _hmac(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def resign(method, target, headers, secret):
    """Sign headers again (SigV4, the scope and signed header list walship
    chose, less any header no longer present). Returns the new headers."""
    auth = header(headers, "authorization")
    if not auth or not auth.startswith("AWS4-HMAC-SHA256 "):
        return headers
    parts = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    present = {n.lower() for n, _ in headers}
    signed = [n for n in parts["SignedHeaders"].split(";") if n in present]
    path, _, query = target.partition("?")
    cquery = "&".join(sorted(q if "=" in q else q + "=" for q in query.split("&") if q))
    cheaders = "".join(
        f"{n}:{','.join(' '.join(v.split()) for hn, v in headers if hn.lower() == n)}\n" for n in signed)
    creq = "\n".join([method, path, cquery, cheaders, ";".join(signed),
                      header(headers, "x-amz-content-sha256")])
    access, date8, region, service, term = parts["Credential"].split("/")
    scope = f"{date8}/{region}/{service}/{term}"
    sts = "\n".join(["AWS4-HMAC-SHA256", header(headers, "x-amz-date"), scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    key = _hmac(("AWS4" + secret).encode(), date8)
    for x in (region, service, term):
        key = _hmac(key, x)
    sig = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
    new_auth = (f"AWS4-HMAC-SHA256 Credential={parts['Credential']}, "
                f"SignedHeaders={';'.join(signed)}, Signature={sig}")
    return [(n, new_auth if n.lower() == "authorization" else v) for n, v in headers]


def rewrite_if_match(mode, reqline, headers):
    """The request head the store in mode would act on (if_match_* modes)."""
    v = header(headers, "if-match")
    if v is None:
        return None
    bare = v[1:-1] if len(v) >= 2 and v[0] == '"' and v[-1] == '"' else v
    if mode == "if_match_ignored":
        headers = [(n, x) for n, x in headers if n.lower() != "if-match"]
    else:
        quoted = v != bare
        # radosgw matches only the bare spelling: send that when the store
        # in mode would match, the quoted one (never matching) when not.
        new = bare if (quoted or mode == "if_match_any") else f'"{bare}"'
        headers = [(n, new if n.lower() == "if-match" else x) for n, x in headers]
    method, target, _ = reqline.split(" ", 2)
    headers = resign(method, target, headers, os.environ.get("AWS_SECRET_ACCESS_KEY", ""))
    return (reqline + "\r\n" + "".join(f"{n}: {x}\r\n" for n, x in headers) + "\r\n").encode("latin-1")


def etag_pad(real, total):
    """The padding long_etag appends to the real etag (bare)."""
    want = max(0, total - len(real) - 1)
    digest = hashlib.sha256(real.encode("latin-1")).hexdigest()
    return (digest * (want // len(digest) + 1))[:want]


def long_etag_request(reqline, headers, total):
    """The request head radosgw acts on in long_etag mode, or None (as is)."""
    v = header(headers, "if-match")
    if v is None:
        return None
    bare = v[1:-1] if len(v) >= 2 and v[0] == '"' and v[-1] == '"' else v
    real, _, pad = bare.partition("-")
    if pad != etag_pad(real, total):
        return None
    headers = [(n, real if n.lower() == "if-match" else x) for n, x in headers]
    method, target, _ = reqline.split(" ", 2)
    headers = resign(method, target, headers, os.environ.get("AWS_SECRET_ACCESS_KEY", ""))
    return (reqline + "\r\n" + "".join(f"{n}: {x}\r\n" for n, x in headers) + "\r\n").encode("latin-1")


def long_etag_reply(rhead, rheaders, total):
    v = header(rheaders, "etag")
    if v is None:
        return rhead
    real = v[1:-1] if len(v) >= 2 and v[0] == '"' and v[-1] == '"' else v
    return edit_head(rhead, drop=("etag",), add=(f'ETag: "{real}-{etag_pad(real, total)}"',))


async def read_head(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = []
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers.append((name.strip(), value.strip()))
    return head, lines[0], headers


def header(headers, name):
    for n, v in headers:
        if n.lower() == name:
            return v
    return None


async def read_body(reader, headers, no_body):
    if no_body:
        return b""
    te = header(headers, "transfer-encoding")
    if te and "chunked" in te.lower():
        out = b""
        while True:
            line = await reader.readuntil(b"\r\n")
            size = int(line.split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)
            out += line + chunk
            if size == 0:
                return out
    n = header(headers, "content-length")
    return await reader.readexactly(int(n)) if n else b""


def edit_head(rhead, drop=(), add=(), status=None):
    """A reply head with the named headers dropped, others added, and the
    status line replaced (status: "201 Created")."""
    lines = rhead.decode("latin-1").split("\r\n")
    first = lines[0] if status is None else lines[0].split(" ", 1)[0] + " " + status
    keep = [x for x in lines[1:] if x and x.split(":", 1)[0].strip().lower() not in drop]
    return ("\r\n".join([first] + keep + list(add)) + "\r\n\r\n").encode("latin-1")


def s3_error(status, reason, code, retry_after, pad=0):
    body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
            f"<Message>injected by faultproxy{' ' * pad}</Message></Error>").encode()
    extra = f"Retry-After: {retry_after}\r\n" if retry_after else ""
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def write_stats(stats_path):
    if stats_path:
        with open(stats_path + ".tmp", "w") as f:
            json.dump(STATS, f)
        os.replace(stats_path + ".tmp", stats_path)


def hard_reset(writer):
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def handle(reader, writer, upstream, control, stats_path):
    up_r = up_w = None
    try:
        while True:
            try:
                head, reqline, headers = await read_head(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            method = reqline.split(" ", 1)[0]
            fault = control.pick(method, reqline)
            n = header(headers, "content-length")
            if fault == "reset_body" and n and int(n) > 1:
                await reader.readexactly(int(n) // 2)
                STATS["requests"] += 1
                STATS["faulted"] += 1
                write_stats(stats_path)
                hard_reset(writer)
                return
            if fault == "reset_body":
                fault = "pass"  # nothing to cut in half: not a fault
            body = await read_body(reader, headers, False)
            STATS["requests"] += 1
            # When each request was signed (its x-amz-date), as it arrived;
            # the last 64.
            STATS["amz_dates"] = (STATS["amz_dates"] + [header(headers, "x-amz-date") or ""])[-64:]
            if fault != "pass":
                STATS["faulted"] += 1
            write_stats(stats_path)
            if fault == "latency" or (fault in ("slowdown", "throttle", "error500") and
                                      "latency_ms" in control.conf):
                # How many requests wait here at once: what a client sends
                # concurrently (each waits the same latency).
                STATS["delayed_now"] += 1
                STATS["delayed_max"] = max(STATS["delayed_max"], STATS["delayed_now"])
                try:
                    await asyncio.sleep(int(control.conf.get("latency_ms", 100)) / 1000)
                finally:
                    STATS["delayed_now"] -= 1
                write_stats(stats_path)
            if fault == "hang":
                # Never answer; wait for the client to give up and close.
                await reader.read()
                return
            if fault == "phantom_exists" and header(headers, "if-none-match") is not None:
                body412 = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code>'
                           b"<Message>injected by faultproxy</Message></Error>")
                writer.write(b"HTTP/1.1 412 Precondition Failed\r\nContent-Type: application/xml\r\n"
                             b"Content-Length: " + str(len(body412)).encode() + b"\r\n\r\n" + body412)
                await writer.drain()
                continue
            if fault in ("ignore_range", "shift_range") and header(headers, "range") is not None:
                rng = header(headers, "range")
                if fault == "ignore_range":
                    headers = [(n, x) for n, x in headers if n.lower() != "range"]
                else:
                    lo, _, hi = rng[len("bytes="):].partition("-")
                    width = int(hi) - int(lo) if hi else 0
                    headers = [(n, f"bytes=0-{width}" if n.lower() == "range" else x) for n, x in headers]
                m_, target, _ = reqline.split(" ", 2)
                headers = resign(m_, target, headers, os.environ.get("AWS_SECRET_ACCESS_KEY", ""))
                head = (reqline + "\r\n" + "".join(f"{n}: {x}\r\n" for n, x in headers) + "\r\n").encode("latin-1")
            if fault.startswith("if_match_"):
                head = rewrite_if_match(fault, reqline, headers) or head
            if fault == "long_etag":
                head = long_etag_request(reqline, headers, int(control.conf.get("etag_bytes", 200))) or head
            ra = int(control.conf.get("retry_after", 0))
            if fault == "slowdown":
                writer.write(s3_error(503, "Slow Down", "SlowDown", ra, int(control.conf.get("error_pad", 0))))
                await writer.drain()
                continue
            if fault == "throttle":
                writer.write(s3_error(429, "Too Many Requests", "TooManyRequests", ra))
                await writer.drain()
                continue
            if fault == "error500":
                writer.write(s3_error(500, "Internal Server Error", "InternalError", 0))
                await writer.drain()
                continue
            if fault == "lost_then_gone":
                # The first match forwarded, its reply lost (the connection
                # reset); later ones answered 404 NoSuchUpload without
                # forwarding: a store where a completed upload is gone.
                if not control.conf.get("_first_done"):
                    control.conf["_first_done"] = True
                    if up_w is None:
                        up_r, up_w = await asyncio.open_connection(*upstream)
                    up_w.write(head + body)
                    await up_w.drain()
                    await read_head(up_r)
                    hard_reset(writer)
                    return
                writer.write(s3_error(404, "Not Found", "NoSuchUpload", 0))
                await writer.drain()
                continue
            if fault == "fake_reply":
                fake = str(control.conf.get("body", "")).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nContent-Length: " +
                             str(len(fake)).encode() + b"\r\n\r\n" + fake)
                await writer.drain()
                continue
            if fault == "bad_request":
                writer.write(s3_error(400, "Bad Request", "InvalidArgument", 0))
                await writer.drain()
                continue
            if up_w is None:
                host, port = upstream
                up_r, up_w = await asyncio.open_connection(host, port)
                up_w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            up_w.write(head + body)
            await up_w.drain()
            rhead, status_line, rheaders = await read_head(up_r)
            status = int(status_line.split(" ")[1])
            rbody = await read_body(up_r, rheaders, method == "HEAD" or status in (204, 304))
            if fault == "long_etag":
                rhead = long_etag_reply(rhead, rheaders, int(control.conf.get("etag_bytes", 200)))
            if fault == "reset":
                if len(rbody) > 1:
                    writer.write(rhead + rbody[: len(rbody) // 2])
                    await writer.drain()
                hard_reset(writer)
                return
            if fault == "ignore_conditional" and status == 412:
                writer.write(b"HTTP/1.1 200 OK\r\nETag: \"0\"\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
                continue
            if fault == "unframed" and len(rbody) > 1:
                writer.write(edit_head(rhead, drop=("content-length", "connection"), add=("Connection: close",)) +
                             rbody[: len(rbody) // 2])
                await writer.drain()
                writer.close()
                return
            if fault == "short_range" and status == 206 and len(rbody) > 1:
                cr = header(rheaders, "content-range")
                first, _, rest = cr[len("bytes "):].partition("-")
                size = rest.partition("/")[2]
                half = rbody[: len(rbody) // 2]
                rhead = edit_head(rhead, drop=("content-length", "content-range"),
                                  add=(f"Content-Length: {len(half)}",
                                       f"Content-Range: bytes {first}-{int(first) + len(half) - 1}/{size}"))
                writer.write(rhead + half)
                await writer.drain()
                continue
            if fault == "put_status" and method == "PUT" and status == 200:
                rhead = edit_head(rhead, status=str(control.conf.get("status", "201 Created")))
            if fault == "put_error_body" and method == "PUT" and status == 200:
                err = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code>'
                       b"<Message>injected by faultproxy</Message></Error>")
                rhead = edit_head(rhead, drop=("content-length",), add=(f"Content-Length: {len(err)}",))
                rbody = err
            if fault == "chunked_padded" and len(rbody) > 1:
                half = len(rbody) // 2
                pads = tuple(f"X-Pad-{i}: {'x' * 20}" for i in range(40))
                writer.write(edit_head(rhead, drop=("content-length",),
                                       add=pads + ("Transfer-Encoding: chunked",)) +
                             b"%x\r\n" % half + rbody[:half] + b"\r\n" +
                             b"%x\r\n" % (len(rbody) - half) + rbody[half:] + b"\r\n0\r\n\r\n")
                await writer.drain()
                continue
            if fault == "head_no_length" and method == "HEAD":
                rhead = edit_head(rhead, drop=("content-length",))
            if fault == "strip_etag":
                lines = rhead.decode("latin-1").split("\r\n")
                rhead = "\r\n".join(x for x in lines if not x.lower().startswith("etag:")).encode("latin-1")
            if fault == "stall" and len(rbody) > 1:
                writer.write(rhead + rbody[: len(rbody) // 2])
                await writer.drain()
                await reader.read()
                return
            if fault == "slow_reply":
                # A slow but live transfer: the reply at rate_bps bytes/s.
                rate = max(1, int(control.conf.get("rate_bps", 10000)))
                writer.write(rhead)
                for i in range(0, len(rbody), max(1, rate // 10)):
                    writer.write(rbody[i:i + max(1, rate // 10)])
                    await writer.drain()
                    await asyncio.sleep(0.1)
                continue
            if fault == "truncate" and len(rbody) > 1:
                writer.write(rhead + rbody[: len(rbody) // 2])
                await writer.drain()
                writer.close()
                return
            writer.write(rhead + rbody)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        if up_w is not None:
            up_w.close()
        try:
            writer.close()
        except Exception:
            pass


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--control", required=True)
    ap.add_argument("--stats")
    a = ap.parse_args()
    lh, lp = a.listen.rsplit(":", 1)
    uh, up = a.upstream.rsplit(":", 1)
    if not lh.startswith("127.") or not uh.startswith("127."):
        sys.exit("faultproxy: loopback addresses only")
    control = Control(a.control)
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, (uh, int(up)), control, a.stats), lh, int(lp))
    port = server.sockets[0].getsockname()[1]
    with open(a.port_file + ".tmp", "w") as f:
        f.write(str(port))
    os.replace(a.port_file + ".tmp", a.port_file)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
