"""receiver.py: a loopback HTTP receiver that stands in for Pyroscope, Parca and OTLP
endpoints in prowl's end-to-end tests; it records every request and answers as told.

As a module (pytest):

    with Receiver() as rx:                 # 127.0.0.1, ephemeral port
        run prowl with --pyroscope-url rx.url ...
        reqs = rx.wait_for(1, path="/ingest")
        rx.set_status(503)                 # outage: answer 503 from now on
        rx.set_status(429, count=1, retry_after=1)   # only the next request
        rx.down(); ...; rx.up()            # stop listening, then come back (same port)
        rx.set_delay(30)                   # a hung backend

As a CLI:

    python3 tests/e2e/receiver.py --port 0 --port-file /tmp/port --dir /tmp/bodies -v

and steer it over HTTP (control requests are not recorded):
    POST /_receiver/status?code=503[&count=N][&retry_after=S][&body=text]
    POST /_receiver/delay?seconds=S
    POST /_receiver/down?seconds=S        (stops listening for S seconds)
    POST /_receiver/clear
    GET  /_receiver/requests              (JSON; bodies base64)
"""
import argparse
import base64
import gzip
import json
import os
import re
import signal
import socket
import sys
import threading
import time
import zlib

import pbwire
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

CONTROL_PREFIX = "/_receiver/"


@dataclass
class Request:
    """One recorded request. body is decompressed when Content-Encoding was gzip
    (or deflate); raw_body is what came over the wire."""
    seq: int
    method: str
    path: str        # without the query string
    raw_query: str   # as sent, still percent-encoded
    query: dict      # name -> list of decoded values
    headers: dict    # lower-case name -> value (last one wins)
    raw_body: bytes
    body: bytes
    status: int      # what the receiver answered
    time: float      # time.time() on arrival
    answer_sent: int = 0  # bytes of the answer's body the client took before it hung up

    def header(self, name, default=None):
        return self.headers.get(name.lower(), default)

    def arg(self, name, default=None):
        """First decoded value of a query parameter."""
        v = self.query.get(name)
        return v[0] if v else default

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def parca(self):
        """A Parca WriteRaw call, decoded (parca_write_raw); raises ValueError when it is not one."""
        return parca_write_raw(self.path, self.headers, self.body)

    def to_dict(self, with_body=True):
        d = {
            "seq": self.seq, "method": self.method, "path": self.path,
            "raw_query": self.raw_query, "query": self.query, "headers": self.headers,
            "status": self.status, "time": self.time, "body_len": len(self.body),
        }
        if with_body:
            d["body_b64"] = base64.b64encode(self.body).decode("ascii")
        return d


@dataclass
class _Answer:
    status: int
    body: bytes = b""
    retry_after: int = None


PARCA_WRITERAW = "/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw"
GRPC_WEB = "application/grpc-web+proto"


def _pb_fields(b):
    """[(field, wire type, value)] of one protobuf message; ValueError when malformed."""
    try:
        return pbwire.fields(b)
    except (AssertionError, IndexError) as e:
        raise ValueError(f"malformed protobuf: {e}") from None


def _pb_str(v, what):
    if not isinstance(v, bytes):
        raise ValueError(f"{what}: not a string field")
    return v.decode("utf-8")  # UnicodeDecodeError is a ValueError


def parca_write_raw(path, headers, body):
    """Checks a Parca WriteRaw call as Parca takes it over gRPC-web, strictly: the path, the
    content type, one uncompressed gRPC frame as long as the body, a WriteRawRequest with
    series (2) of labels (1: LabelSet of Label name/value) and samples (2: raw_profile,
    gzip'ed pprof), __name__ first; returns {"series": [{"labels": {name: value},
    "names": [names in order], "profiles": [pprof bytes]}], "normalized": bool}."""
    if path != PARCA_WRITERAW:
        raise ValueError(f"path {path!r}, want {PARCA_WRITERAW}")
    if headers.get("content-type") != GRPC_WEB:
        raise ValueError(f"content type {headers.get('content-type')!r}, want {GRPC_WEB}")
    if len(body) < 5 or body[0] != 0 or int.from_bytes(body[1:5], "big") != len(body) - 5:
        raise ValueError(f"not one uncompressed gRPC frame as long as the body ({len(body)} bytes: {body[:5]!r})")
    out = {"series": [], "normalized": False}
    for f, wt, v in _pb_fields(body[5:]):
        if f == 3 and wt == 0:
            out["normalized"] = bool(v)
        elif f == 2 and wt == 2:
            ser = {"labels": {}, "names": [], "profiles": []}
            for g, _, w in _pb_fields(v):
                if g == 1:
                    for h, _, lab in _pb_fields(w):
                        if h != 1:
                            raise ValueError(f"LabelSet field {h}")
                        kv = {k: _pb_str(x, "label") for k, _, x in _pb_fields(lab)}
                        if set(kv) != {1, 2} or not kv[1] or kv[1] in ser["labels"]:
                            raise ValueError(f"label {kv}")
                        ser["labels"][kv[1]] = kv[2]
                        ser["names"].append(kv[1])
                elif g == 2:
                    raw = dict((k, x) for k, _, x in _pb_fields(w)).get(1)
                    if not isinstance(raw, bytes):
                        raise ValueError("RawSample without raw_profile")
                    try:
                        _pb_fields(gzip.decompress(raw))
                    except (OSError, EOFError) as e:
                        raise ValueError(f"raw_profile is not gzip'ed pprof: {e}") from None
                    ser["profiles"].append(raw)
                else:
                    raise ValueError(f"RawProfileSeries field {g}")
            if not ser["names"] or ser["names"][0] != "__name__" or not ser["profiles"]:
                raise ValueError(f"series without __name__ first or without samples: {ser['names']}")
            out["series"].append(ser)
        else:
            raise ValueError(f"WriteRawRequest field {f} (wire type {wt})")
    if not out["series"]:
        raise ValueError("WriteRawRequest without series")
    return out


def _grpc_web_answer(err):
    """Parca's answer over gRPC-web: the reply frame (an empty WriteRawResponse) and the
    trailer frame with grpc-status 0; or, for a call it cannot take, a trailers-only
    answer with grpc-status 3 (INVALID_ARGUMENT) and the reason."""
    if err:
        return b"", {"grpc-status": "3", "grpc-message": re.sub(r"[^ -~]|%", lambda m: "%%%02X" % ord(m[0]), err)}
    trailer = b"grpc-status: 0\r\ngrpc-message: \r\n"
    return b"\0\0\0\0\0" + b"\x80" + len(trailer).to_bytes(4, "big") + trailer, {}


def _decode_body(raw, encoding):
    enc = (encoding or "").strip().lower()
    try:
        if enc in ("gzip", "x-gzip"):
            return gzip.decompress(raw)
        if enc == "deflate":
            return zlib.decompress(raw)
    except (OSError, zlib.error, EOFError):
        pass  # keep the raw bytes; the test will see they are not valid
    return raw


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, receiver):
        self.receiver = receiver
        self.conns = set()
        self.conns_lock = threading.Lock()
        super().__init__(addr, _Handler)

    def process_request(self, request, client_address):
        with self.conns_lock:
            self.conns.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self.conns_lock:
            self.conns.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], OSError):
            return  # a client went away or down() cut it off: expected here
        super().handle_error(request, client_address)

    def drop_connections(self):
        """Closes kept-alive connections too, so 'down' really means unreachable."""
        with self.conns_lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the real backends
    server_version = "prowl-test-receiver"

    def log_message(self, fmt, *args):
        pass

    def _read_body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            out = bytearray()
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline(65537)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _send(self, status, body=b"", ctype="text/plain", extra=None):
        """Answers; returns how many body bytes went out before the client hung up."""
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        sent = 0
        if self.command != "HEAD":
            view = memoryview(body)
            try:
                while sent < len(body):
                    sent += self.wfile.write(view[sent:sent + (1 << 20)])
            except OSError:
                self.close_connection = True
        return sent

    def _handle(self):
        rx = self.server.receiver
        raw = self._read_body()
        url = urlsplit(self.path)
        if url.path.startswith(CONTROL_PREFIX):
            status, body = rx._control(url.path[len(CONTROL_PREFIX):], parse_qs(url.query))
            self._send(status, body, "application/json")
            return
        if self.command == "GET" and url.path in ("/ready", "/healthz", "/-/ready"):
            self._send(200, b"ready\n")
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        ans, req = rx._record(self.command, url, headers, raw)
        rx._wait_delay()
        extra, body, ctype = {}, ans.body, "text/plain"
        if ans.retry_after is not None:
            extra["Retry-After"] = str(ans.retry_after)
        if url.path == PARCA_WRITERAW and ans.status == 200 and not ans.body:
            try:
                parca_write_raw(url.path, headers, req.body)
                err = None
            except ValueError as e:
                err = str(e)
            body, grpc = _grpc_web_answer(err)
            extra.update(grpc)
            ctype = GRPC_WEB
        req.answer_sent = self._send(ans.status, body, ctype, extra=extra)

    do_POST = do_PUT = do_GET = do_HEAD = do_DELETE = do_PATCH = _handle


class Receiver:
    """The recording server. Thread-safe; start() returns self."""

    def __init__(self, port=0, host="127.0.0.1", out_dir=None, status=200, verbose=False):
        self.host = host
        self.port = port
        self.out_dir = out_dir
        self.verbose = verbose
        self._lock = threading.Condition()
        self._requests = []
        self._seq = 0
        self._default = _Answer(status)
        self._once = []          # one-shot answers, used first
        self._delay = 0.0
        self._stopping = threading.Event()
        self._srv = None
        self._thread = None
        if out_dir:
            os.makedirs(out_dir, exist_ok=True)

    # -- lifecycle --
    def start(self):
        if self._srv:
            return self
        self._stopping.clear()
        self._srv = _Server((self.host, self.port), self)
        self.port = self._srv.server_address[1]
        self._thread = threading.Thread(target=self._srv.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="receiver", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Stops listening and closes open connections; the records stay."""
        srv, self._srv = self._srv, None
        if not srv:
            return
        self._stopping.set()
        with self._lock:
            self._lock.notify_all()
        srv.shutdown()
        srv.drop_connections()
        srv.server_close()
        self._thread.join(timeout=5)

    def down(self):
        """Backend outage: connections are refused until up()."""
        self.stop()

    def up(self):
        """Back on the same port."""
        deadline = time.time() + 5
        while True:
            try:
                return self.start()
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def url(self):
        return f"http://{self.host}:{self.port}"

    @property
    def running(self):
        return self._srv is not None

    # -- behaviour --
    def set_status(self, status, body=b"", retry_after=None, count=None):
        """Answer `status` (with body and an optional Retry-After) from now on, or
        only for the next `count` requests when count is given."""
        if isinstance(body, str):
            body = body.encode()
        ans = _Answer(int(status), body, retry_after)
        with self._lock:
            if count is None:
                self._default = ans
                self._once.clear()
            else:
                self._once.extend([ans] * int(count))

    def set_delay(self, seconds):
        """Hold every answer this long (a hung backend). stop() cuts it short."""
        with self._lock:
            self._delay = float(seconds)
            self._lock.notify_all()

    # -- records --
    @property
    def requests(self):
        with self._lock:
            return list(self._requests)

    def clear(self):
        with self._lock:
            self._requests.clear()

    def wait_for(self, n=1, timeout=10.0, path=None, status=None):
        """Waits until at least n requests (to `path`, answered `status`, when given)
        were recorded; returns them. Raises TimeoutError otherwise."""
        def match():
            return [r for r in self._requests
                    if (path is None or r.path == path) and (status is None or r.status == status)]
        deadline = time.time() + timeout
        with self._lock:
            while True:
                got = match()
                if len(got) >= n:
                    return got
                left = deadline - time.time()
                if left <= 0:
                    raise TimeoutError(f"{len(got)} of {n} requests after {timeout}s "
                                       f"(all: {[r.path for r in self._requests]})")
                self._lock.wait(min(left, 0.2))

    # -- internals, called from handler threads --
    def _record(self, method, url, headers, raw):
        body = _decode_body(raw, headers.get("content-encoding"))
        with self._lock:
            ans = self._once.pop(0) if self._once else self._default
            self._seq += 1
            req = Request(self._seq, method, url.path, url.query, parse_qs(url.query, keep_blank_values=True),
                          headers, raw, body, ans.status, time.time())
            self._requests.append(req)
            self._lock.notify_all()
        if self.out_dir:
            self._write(req)
        if self.verbose:
            print(f"receiver: {method} {url.path} {len(body)} bytes -> {ans.status}", file=sys.stderr, flush=True)
        return ans, req

    def _write(self, req):
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", req.path.strip("/")) or "root"
        base = os.path.join(self.out_dir, f"{req.seq:05d}-{req.method}-{name}")
        with open(base + ".body", "wb") as f:
            f.write(req.body)
        with open(base + ".json", "w") as f:
            json.dump(req.to_dict(with_body=False), f, indent=1)

    def _wait_delay(self):
        with self._lock:
            end = time.time() + self._delay
            while not self._stopping.is_set() and time.time() < end:
                self._lock.wait(min(end - time.time(), 0.2))
                end = min(end, time.time() + self._delay)

    def _control(self, cmd, args):
        def one(name, conv=str, default=None):
            v = args.get(name)
            return conv(v[0]) if v else default
        try:
            if cmd == "status":
                ra = one("retry_after", int)
                self.set_status(one("code", int, 200), one("body", str, ""), ra, one("count", int))
            elif cmd == "delay":
                self.set_delay(one("seconds", float, 0.0))
            elif cmd == "clear":
                self.clear()
            elif cmd == "down":
                secs = one("seconds", float, 1.0)
                # Answer first, then go down from another thread.
                threading.Thread(target=self._outage, args=(secs,), daemon=True).start()
            elif cmd == "requests":
                return 200, json.dumps([r.to_dict() for r in self.requests]).encode()
            else:
                return 404, json.dumps({"error": f"unknown command {cmd}"}).encode()
        except (TypeError, ValueError) as e:
            return 400, json.dumps({"error": str(e)}).encode()
        return 200, b"{}"

    def _outage(self, secs):
        time.sleep(0.1)
        self.down()
        time.sleep(secs)
        self.up()


def main(argv=None):
    ap = argparse.ArgumentParser(description="Loopback HTTP receiver for prowl's export tests.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 = ephemeral (default)")
    ap.add_argument("--port-file", help="write the bound port here once listening")
    ap.add_argument("--dir", help="write each request body (and a .json description) here")
    ap.add_argument("--status", type=int, default=200, help="HTTP status to answer with")
    ap.add_argument("--delay", type=float, default=0.0, help="seconds to hold each answer")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per request on stderr")
    a = ap.parse_args(argv)

    rx = Receiver(a.port, a.host, a.dir, a.status, a.verbose).start()
    rx.set_delay(a.delay)
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{rx.port}\n")
        os.replace(tmp, a.port_file)
    print(f"receiver: listening on {rx.url}", flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    rx.stop()
    print(f"receiver: {len(rx.requests)} requests", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
