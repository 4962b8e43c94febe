"""test_kubernetes.py: every object in packaging/kubernetes/ against Kubernetes' own
OpenAPI schema (npm package kubernetes-models, pinned in tests/e2e/k8s/, installed into
build/npm-k8s on first use), unknown fields included; namespaces exist before use in
the documented apply order; the minimum Kubernetes version is stated."""
import copy
import filecmp
import glob
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT

yaml = pytest.importorskip("yaml")  # Debian python3-yaml

K8S = os.path.join(ROOT, "packaging", "kubernetes")
SRC = os.path.join(ROOT, "tests", "e2e", "k8s")
CACHE = os.path.join(ROOT, "build", "npm-k8s")


@pytest.fixture(scope="module")
def validate():
    """A function: [(where, object)] -> {where: [errors]}, by tests/e2e/k8s/validate.mjs."""
    for tool in ("node", "npm"):
        assert shutil.which(tool), f"{tool} is missing: packaging/install-deps.sh installs Debian's nodejs and npm"
    os.makedirs(CACHE, exist_ok=True)
    for f in ("package.json", "package-lock.json", "validate.mjs"):
        shutil.copy2(os.path.join(SRC, f), CACHE)
    stamp = os.path.join(CACHE, "node_modules", ".package-lock.json")
    if not os.path.exists(stamp) or not filecmp.cmp(os.path.join(SRC, "package-lock.json"),
                                                    os.path.join(CACHE, "installed-lock.json"), shallow=False):
        res = subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
                             cwd=CACHE, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, f"npm ci of {SRC}/package-lock.json failed:\n{res.stderr}"
        shutil.copy2(os.path.join(SRC, "package-lock.json"), os.path.join(CACHE, "installed-lock.json"))

    def run(items):
        data = json.dumps([{"where": w, "object": o} for w, o in items])
        res = subprocess.run(["node", os.path.join(CACHE, "validate.mjs")], input=data, capture_output=True,
                             text=True, timeout=120, cwd=CACHE)
        assert res.returncode == 0, res.stderr
        return {r["where"]: r["errors"] for r in json.loads(res.stdout)}
    return run


def manifests():
    """[(file:index, object)] of every YAML document in packaging/kubernetes/."""
    out = []
    for path in sorted(glob.glob(os.path.join(K8S, "*.yaml"))):
        for i, doc in enumerate(yaml.safe_load_all(open(path))):
            if doc is not None:
                out.append((f"{os.path.basename(path)}:{i}", doc))
    return out


def test_manifests_match_the_kubernetes_schema(validate):
    items = manifests()
    assert {o["kind"] for _, o in items} >= {"Namespace", "ConfigMap", "DaemonSet", "ServiceAccount"}
    bad = {w: e for w, e in validate(items).items() if e}
    assert not bad, json.dumps(bad, indent=1)


def test_validator_catches_mistakes(validate):
    """The check can fail: typos, unknown values, wrong types and missing fields."""
    ds = next(o for _, o in manifests() if o["kind"] == "DaemonSet")

    def broken(change):
        o = copy.deepcopy(ds)
        change(o["spec"]["template"]["spec"]["containers"][0])
        return o
    cases = {
        "typo": broken(lambda c: c["securityContext"].update(appArmorProfle={"type": "Unconfined"})),
        "enum": broken(lambda c: c["securityContext"]["seccompProfile"].update(type="Open")),
        "type": broken(lambda c: c["ports"][0].update(containerPort="metrics")),
        "required": broken(lambda c: c.pop("name")),
        "quantity": broken(lambda c: c["resources"]["limits"].update(memory="lots")),
        "kind": dict(ds, kind="DaemonSett"),
    }
    got = validate(list(cases.items()))
    for name, errors in got.items():
        assert errors, f"the validator accepted a DaemonSet with a {name} mistake"
    assert any("appArmorProfle" in e for e in got["typo"]), got["typo"]


def apply_order(args):
    """The objects `kubectl apply -f A -f B ...` sends, in order (a directory: its
    .yaml/.yml/.json files sorted by name, as kubectl reads them)."""
    out = []
    for a in args:
        path = os.path.join(ROOT, a)
        files = sorted(f for f in glob.glob(os.path.join(path, "*")) if re.search(r"\.(ya?ml|json)$", f)) \
            if os.path.isdir(path) else [path]
        for f in files:
            out += [d for d in yaml.safe_load_all(open(f)) if d]
    return out


def test_documented_apply_creates_the_namespace_first():
    doc = open(os.path.join(ROOT, "docs", "agent.md")).read()
    cmds = re.findall(r"^kubectl apply ((?:-f \S+\s*)+)$", doc, re.M)
    assert cmds, "docs/agent.md shows no kubectl apply"
    for cmd in cmds:
        objs = apply_order(re.findall(r"-f (\S+)", cmd))
        assert objs, cmd
        made = set()
        for o in objs:
            ns = o["metadata"].get("namespace")
            assert ns is None or ns in made, f"`kubectl apply {cmd}` applies {o['kind']} before namespace {ns}"
            if o["kind"] == "Namespace":
                made.add(o["metadata"]["name"])


def test_minimum_kubernetes_version_is_stated():
    ds = open(os.path.join(K8S, "daemonset.yaml")).read()
    assert "appArmorProfile" in ds
    for text in (ds, open(os.path.join(ROOT, "docs", "agent.md")).read()):
        assert re.search(r"Kubernetes 1\.30 or newer", text)
