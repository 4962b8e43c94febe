"""kubelib.py: a real Kubernetes API server for the e2e tests: Debian's etcd and
kube-apiserver (tests/tools/kube-apiserver, `make servers`) on loopback, HTTPS from a CA
the test makes, RBAC on, an admin token for the test itself, and packaging/kubernetes/
applied as `kubectl apply` would; the agent gets its ServiceAccount's token (TokenRequest)."""
import glob
import json
import os
import shutil
import subprocess
import time

import pytest

from agentlib import free_port
from conftest import ROOT
from kube_apiserver import make_ca
from serverlib import Server, call, tool

yaml = pytest.importorskip("yaml")  # Debian python3-yaml

ADMIN_TOKEN = "i9-admin-token"
# Where each kind of packaging/kubernetes/ is created (apiVersion prefix, plural, namespaced).
KINDS = {"Namespace": ("api/v1", "namespaces", False), "ServiceAccount": ("api/v1", "serviceaccounts", True),
         "ConfigMap": ("api/v1", "configmaps", True), "Secret": ("api/v1", "secrets", True),
         "ClusterRole": ("apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
         "ClusterRoleBinding": ("apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
         "DaemonSet": ("apis/apps/v1", "daemonsets", True)}


class Etcd(Server):
    def __init__(self, d):
        etcd = shutil.which("etcd")
        if not etcd:
            pytest.fail("etcd is missing: packaging/install-deps.sh installs Debian's etcd-server")
        self.url = f"http://127.0.0.1:{free_port()}"
        peer = f"http://127.0.0.1:{free_port()}"
        argv = [etcd, "--name=i9", f"--data-dir={d}/etcd", f"--listen-client-urls={self.url}",
                f"--advertise-client-urls={self.url}", f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}", f"--initial-cluster=i9={peer}"]
        super().__init__(d, "etcd", argv, lambda: call(self.url + "/health", timeout=2)[0] == 200)


class KubeApi(Server):
    """kube-apiserver over etcd: RBAC, ServiceAccount tokens signed by a key of the test,
    the admin's static token; no controllers, so the test makes what they would."""

    def __init__(self, d, etcd):
        self.d = d
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.ca_file, crt, key = make_ca(d, "i9-kube")
        sa_key = str(d / "sa.key")
        subprocess.run(["openssl", "genrsa", "-out", sa_key, "2048"], check=True, capture_output=True, timeout=60)
        tokens = d / "admin-tokens.csv"
        tokens.write_text(f'{ADMIN_TOKEN},i9-admin,i9-admin,"system:masters"\n')
        argv = [tool("kube-apiserver"), f"--etcd-servers={etcd.url}", "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1", f"--secure-port={self.port}", f"--tls-cert-file={crt}",
                f"--tls-private-key-file={key}", f"--cert-dir={d}/certs", f"--token-auth-file={tokens}",
                f"--service-account-key-file={sa_key}", f"--service-account-signing-key-file={sa_key}",
                "--service-account-issuer=https://kubernetes.default.svc", "--authorization-mode=RBAC",
                "--service-cluster-ip-range=10.96.0.0/24", "--disable-admission-plugins=ServiceAccount",
                "--etcd-compaction-interval=0", "--watch-cache=false", "--enable-priority-and-fairness=false", "--profiling=false"]
        super().__init__(d, "kube-apiserver", argv, lambda: self.api("GET", "/readyz")[0] == 200)

    def api(self, method, path, body=None, token=ADMIN_TOKEN, ctype="application/json"):
        """(status, parsed JSON or text) of one request as the admin (or token)."""
        import ssl
        import urllib.request
        import urllib.error
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": ctype})
        ctx = ssl.create_default_context(cafile=self.ca_file)
        try:
            with urllib.request.urlopen(req, timeout=20, context=ctx) as r:
                st, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            st, raw = e.code, e.read()
        try:
            return st, json.loads(raw)
        except ValueError:
            return st, raw.decode(errors="replace")

    def create(self, obj):
        prefix, plural, namespaced = KINDS[obj["kind"]]
        ns = f"/namespaces/{obj['metadata'].get('namespace', 'default')}" if namespaced else ""
        st, out = self.api("POST", f"/{prefix}{ns}/{plural}", obj)
        assert st in (200, 201), (obj["kind"], obj["metadata"]["name"], st, out)
        return out

    def apply_packaging(self):
        """Every object of packaging/kubernetes/, in file order (the namespace first)."""
        for path in sorted(glob.glob(os.path.join(ROOT, "packaging", "kubernetes", "*.yaml"))):
            for obj in yaml.safe_load_all(open(path)):
                if obj:
                    self.create(obj)

    def token(self, ns, sa, seconds=3600):
        st, out = self.api("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token",
                           {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                            "spec": {"expirationSeconds": seconds}})
        assert st == 201, (st, out)
        return out["status"]["token"]

    def add_pod(self, pod):
        """Creates pod (kube_apiserver.make_pod's shape) and sets its status as a kubelet
        would (the container ids); returns it as the server has it."""
        ns = pod["metadata"]["namespace"]
        if self.api("GET", f"/api/v1/namespaces/{ns}")[0] == 404:
            self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        meta = {k: v for k, v in pod["metadata"].items() if k in ("name", "namespace", "labels")}
        st, out = self.api("POST", f"/api/v1/namespaces/{ns}/pods",
                           {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod["spec"]})
        assert st == 201, (st, out)
        out["status"] = {**out.get("status", {}), **pod["status"]}
        st, out = self.api("PUT", f"/api/v1/namespaces/{ns}/pods/{meta['name']}/status", out)
        assert st == 200, (st, out)
        return out

    def delete_pod(self, ns, name):
        st, out = self.api("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}?gracePeriodSeconds=0")
        assert st == 200, (st, out)

    def resource_version(self):
        st, out = self.api("GET", "/api/v1/pods?limit=1")
        assert st == 200, (st, out)
        return int(out["metadata"]["resourceVersion"])


def etcd_compact(etcd):
    """Compacts etcd's history up to its current revision (its JSON gateway); returns it."""
    import base64
    st, out = call(etcd.url + "/v3/kv/range", {"key": base64.b64encode(b"/").decode()})
    assert st == 200, (st, out)
    rev = int(json.loads(out)["header"]["revision"])
    st, out = call(etcd.url + "/v3/kv/compaction", {"revision": str(rev), "physical": True})
    assert st == 200, (st, out)
    return rev
