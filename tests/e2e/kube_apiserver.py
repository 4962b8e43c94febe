"""kube_apiserver.py: a loopback stand-in for the Kubernetes API server in prowl's tests:
HTTPS from a CA the test makes (openssl CLI), bearer tokens, the pods of one node by
list (pages, continue) and watch (chunked events, bookmarks, 410 Gone), checked strictly.

    with KubeApiServer(tmp_path, node="node-1") as api:   # 127.0.0.1, ephemeral port
        api.url, api.ca_file, api.token_file           # for the agent's kubernetes.* keys
        api.add_pod(make_pod("web-1", "shop", containers={"app": CID}))
        api.delete_pod(uid); api.set_tokens(["new"]); api.close_watches()
        api.compact()                                  # older resourceVersions get 410 Gone
        api.down(); api.up()                           # stop / start listening, same port
        api.requests                                   # every request: (time, method, path, query, token, status)
        assert not api.violations                      # anything a real client must not send

Only GET /api/v1/pods?fieldSelector=spec.nodeName=<node> is served: with limit
(and continue) it lists, with watch=1 and resourceVersion it watches.
"""
import copy
import json
import os
import socket
import ssl
import subprocess
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

LIST_PARAMS = {"fieldSelector", "limit", "continue"}
WATCH_PARAMS = {"fieldSelector", "watch", "resourceVersion", "timeoutSeconds", "allowWatchBookmarks"}


def make_ca(dirpath, name="i9-test"):
    """A CA and a server certificate for 127.0.0.1 (IP SAN), made with the openssl CLI.
    Returns (ca_file, cert_file, key_file)."""
    d = str(dirpath)
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True, timeout=60)
    ca_key, ca_crt = os.path.join(d, "ca.key"), os.path.join(d, "ca.crt")
    key, csr, crt = os.path.join(d, "server.key"), os.path.join(d, "server.csr"), os.path.join(d, "server.crt")
    ext = os.path.join(d, "san.ext")
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
        "-subj", f"/CN={name}-ca", "-keyout", ca_key, "-out", ca_crt)
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", f"/CN={name}-apiserver",
        "-keyout", key, "-out", csr)
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    run("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial", "-days", "2",
        "-extfile", ext, "-out", crt)
    return ca_crt, crt, key


def make_pod(name, namespace, node="node-1", containers=None, labels=None, uid=None, bulk=0, init=()):
    """A Pod object as the API server sends it. containers: {name: container id or None
    (not started: no containerID)}. bulk: bytes of managedFields, as real pods carry."""
    containers = containers or {"app": None}
    uid = uid or str(uuid.uuid4())
    statuses = []
    for cname, cid in containers.items():
        st = {"name": cname, "ready": cid is not None, "restartCount": 0, "image": f"registry.example/{cname}:1",
              "imageID": "", "started": cid is not None,
              "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}} if cid else {"waiting": {"reason": "ContainerCreating"}}}
        if cid:
            st["containerID"] = f"containerd://{cid}"
        statuses.append(st)
    spec = {
        "nodeName": node, "serviceAccountName": "default", "restartPolicy": "Always",
        "containers": [{"name": c, "image": f"registry.example/{c}:1",
                        "resources": {"requests": {"cpu": "100m"}}} for c in containers],
    }
    if init:
        spec["initContainers"] = [{"name": n, "image": "busybox"} for n in init]
    return {
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": name, "namespace": namespace, "uid": uid, "resourceVersion": "0",
            "creationTimestamp": "2026-01-01T00:00:00Z", "labels": dict(labels or {}),
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{name}-rs",
                                 "uid": str(uuid.uuid4()), "controller": True}],
            "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"x" * 8: "y" * max(0, bulk)}}}],
        },
        "spec": spec,
        "status": {"phase": "Running", "podIP": "10.0.0.1", "containerStatuses": statuses},
    }


def set_container(pod, cname, cid):
    """A copy of pod whose container cname runs with id cid (a status update)."""
    p = copy.deepcopy(pod)
    for st in p["status"]["containerStatuses"]:
        if st["name"] == cname:
            st["containerID"] = f"containerd://{cid}"
            st["ready"] = st["started"] = True
            st["state"] = {"running": {"startedAt": "2026-01-01T00:00:01Z"}}
    return p


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _status(self, code, reason, message):
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": message, "reason": reason, "code": code}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        return code

    def _violation(self, what):
        self.server.api.violations.append(f"{self.command} {self.path}: {what}")
        return self._status(400, "BadRequest", what)

    def do_POST(self):
        self._record(self._violation("only GET is expected"))

    do_PUT = do_DELETE = do_PATCH = do_POST

    def _record(self, status, token=None):
        u = urlsplit(self.path)
        self.server.api._log(self.command, u.path, parse_qs(u.query, keep_blank_values=True), token, status)

    def do_GET(self):
        api = self.server.api
        u = urlsplit(self.path)
        q = parse_qs(u.query, keep_blank_values=True)
        auth = self.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else None
        if u.path != "/api/v1/pods":
            return self._record(self._violation("only /api/v1/pods is served"), token)
        if any(len(v) != 1 for v in q.values()):
            return self._record(self._violation("a query parameter given twice"), token)
        q = {k: v[0] for k, v in q.items()}
        if "application/json" not in self.headers.get("Accept", ""):
            return self._record(self._violation("Accept: application/json missing"), token)
        if q.get("fieldSelector") != f"spec.nodeName={api.node}":
            return self._record(self._violation(f"fieldSelector must be spec.nodeName={api.node}"), token)
        if token not in api.tokens:
            api.unauthorized += 1
            return self._record(self._status(401, "Unauthorized", "Unauthorized"), token)
        if q.get("watch") in ("1", "true"):
            if set(q) - WATCH_PARAMS or "resourceVersion" not in q:
                return self._record(self._violation(f"watch parameters {sorted(q)}"), token)
            self._record(200, token)
            return self._watch(q)
        if set(q) - LIST_PARAMS:
            return self._record(self._violation(f"list parameters {sorted(q)}"), token)
        return self._record(self._list(q), token)

    def _list(self, q):
        api = self.server.api
        try:
            limit = int(q.get("limit", "0"))
        except ValueError:
            return self._violation("limit is not a number")
        if limit < 0 or limit > 500:
            return self._violation("limit out of range")
        with api.lock:
            if api.fail_lists:
                api.fail_lists -= 1
                return self._status(500, "InternalError", "the stand-in was told to fail")
            if "continue" in q:
                snap = api.continues.get(q["continue"])
                if snap is None:
                    return self._status(410, "Expired", "the continue token has expired")
                rv, pods = snap
            else:
                rv, pods = api.rv, [copy.deepcopy(p) for p in api.pods.values()]
            page, rest = (pods[:limit], pods[limit:]) if limit else (pods, [])
            cont = ""
            if rest:
                cont = uuid.uuid4().hex
                api.continues[cont] = (rv, rest)
        body = json.dumps({"kind": "PodList", "apiVersion": "v1",
                           "metadata": {"resourceVersion": str(rv), **({"continue": cont} if cont else {})},
                           "items": page}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        return 200

    def _chunk(self, obj):
        data = json.dumps(obj).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _watch(self, q):
        api = self.server.api
        try:
            since = int(q["resourceVersion"])
            timeout = int(q.get("timeoutSeconds", "1800"))
        except ValueError:
            self.server.api.violations.append(f"watch resourceVersion {q['resourceVersion']!r} is not a number")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        deadline = time.time() + timeout
        with api.lock:
            gen = api.watch_gen
            api.open_watches += 1
        try:
            if since < api.compacted:
                self._chunk({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                                          "message": f"too old resource version: {since}",
                                                          "reason": "Expired", "code": 410}})
                return
            sent = since
            while time.time() < deadline:
                with api.lock:
                    if api.watch_gen != gen or api.stopping:
                        return
                    events = [e for e in api.events if e[0] > sent]
                    if not events:
                        api.cond.wait(0.2)
                        continue
                for rv, typ, obj in events:
                    self._chunk({"type": typ, "object": obj})
                    sent = rv
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            return
        finally:
            with api.lock:
                api.open_watches -= 1
            try:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                pass
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class KubeApiServer:
    def __init__(self, tmp_path, node="node-1", tokens=("token-a",), port=0, start=True):
        self.dir = tmp_path
        self.node = node
        self.ca_file, self.cert_file, self.key_file = make_ca(tmp_path)
        self.token_file = str(tmp_path / "token")
        self.write_token(tokens[0])
        self.tokens = set(tokens)
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.pods = {}              # uid -> pod
        self.events = []            # (rv, type, pod)
        self.rv = 100
        self.compacted = 0          # watches from before this get 410
        self.continues = {}
        self.watch_gen = 0
        self.open_watches = 0
        self.stopping = False
        self.fail_lists = 0
        self.unauthorized = 0
        self.requests = []          # dicts: time, method, path, query, token, status
        self.violations = []
        self.port = port or self._free_port()
        self.srv = None
        if start:
            self.up()

    @staticmethod
    def _free_port():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    @property
    def url(self):
        return f"https://127.0.0.1:{self.port}"

    def write_token(self, token):
        """Replaces the token file the way the kubelet does: a new file renamed over."""
        tmp = self.token_file + ".new"
        with open(tmp, "w") as f:
            f.write(token + "\n")
        os.rename(tmp, self.token_file)

    def _log(self, method, path, query, token, status):
        with self.lock:
            self.requests.append({"time": time.time(), "method": method, "path": path, "query": query,
                                  "token": token, "status": status})

    def up(self):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert_file, self.key_file)
        self.srv = _Server(("127.0.0.1", self.port), _Handler)
        self.srv.socket = ctx.wrap_socket(self.srv.socket, server_side=True)
        self.srv.api = self
        self.stopping = False
        self.thread = threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    def down(self):
        if not self.srv:
            return
        with self.lock:
            self.stopping = True
            self.cond.notify_all()
        self.srv.shutdown()
        self.srv.server_close()
        self.srv = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.down()

    # -- the pods --
    def _event(self, typ, pod):
        self.rv += 1
        pod["metadata"]["resourceVersion"] = str(self.rv)
        self.events.append((self.rv, typ, copy.deepcopy(pod)))
        self.cond.notify_all()

    def add_pod(self, pod):
        """Adds or replaces (ADDED / MODIFIED) a pod; returns its uid."""
        with self.lock:
            uid = pod["metadata"]["uid"]
            typ = "MODIFIED" if uid in self.pods else "ADDED"
            self.pods[uid] = copy.deepcopy(pod)
            self._event(typ, self.pods[uid])
        return uid

    def delete_pod(self, uid):
        with self.lock:
            pod = self.pods.pop(uid)
            self._event("DELETED", pod)

    def bookmark(self):
        with self.lock:
            self.rv += 1
            self.events.append((self.rv, "BOOKMARK", {"kind": "Pod", "apiVersion": "v1",
                                                      "metadata": {"resourceVersion": str(self.rv)}}))
            self.cond.notify_all()

    def compact(self):
        """Moves on (as other objects change) and forgets the event history: a watch from
        a resourceVersion before now gets 410 Gone; a new list gives one that works."""
        with self.lock:
            self.rv += 1
            self.compacted = self.rv
            self.events = []
            self.continues = {}

    def close_watches(self):
        with self.lock:
            self.watch_gen += 1
            self.cond.notify_all()

    def set_tokens(self, tokens):
        with self.lock:
            self.tokens = set(tokens)

    def count(self, kind=None, since=0.0, status=None):
        """Requests since a time: kind 'list' or 'watch' (None: all)."""
        with self.lock:
            reqs = list(self.requests)
        out = 0
        for r in reqs:
            watch = r["query"].get("watch", [""])[0] in ("1", "true")
            if r["time"] < since or (kind == "watch" and not watch) or (kind == "list" and watch):
                continue
            if status is not None and r["status"] != status:
                continue
            out += 1
        return out
