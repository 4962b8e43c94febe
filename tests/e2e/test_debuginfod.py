"""test_debuginfod.py: debug files fetched by build id (issue 8, item 6), from a real
debuginfod server (Debian's `debuginfod`) on loopback serving the debug file of a
stripped test program: the frames gain function names and the file:line eu-addr2line
reads from the unstripped build; a stopped, silent or lying server costs the capture
nothing but names, with one warning. record and the agent alike."""
import http.server
import os
import random
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.request

import pytest

from agentlib import Agent, free_port
from conftest import pprof_raw, run_prowl, start, stop

pytestmark = pytest.mark.skipif(not shutil.which("debuginfod"), reason="no debuginfod server (Debian package debuginfod)")

PROG = r"""
#include <stdlib.h>
#include <time.h>
static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}
static volatile double sink = %d;
__attribute__((noinline)) static void dbg_alpha(double until)
{
	while (now() < until)
		for (int i = 0; i < 5000; i++)
			sink = sink * 1.0000001 + i;
}
__attribute__((noinline)) static void dbg_beta(double until)
{
	while (now() < until)
		for (int i = 0; i < 5000; i++)
			sink = sink * 0.9999999 + i;
}
int main(int argc, char **argv)
{
	double end = now() + atof(argv[1]);
	while (now() < end) {
		double t = now();
		dbg_alpha(t + 0.06);
		dbg_beta(t + 0.1);
	}
	return 0;
}
"""


def build(tmp_path, name):
    """A program, its debug file and its stripped copy; a fresh build id each time
    (a random constant), so no cache of an earlier run answers for it."""
    d = tmp_path / name
    d.mkdir()
    (d / "p.c").write_text(PROG % random.randrange(1 << 30))
    subprocess.run(["cc", "-O1", "-g", "-o", str(d / "full"), str(d / "p.c")], check=True)
    subprocess.run(["objcopy", "--only-keep-debug", str(d / "full"), str(d / "full.debug")], check=True)
    subprocess.run(["strip", "--strip-all", "-o", str(d / "prog"), str(d / "full")], check=True)
    out = subprocess.run(["eu-readelf", "-n", str(d / "prog")], capture_output=True, text=True, check=True).stdout
    build_id = re.search(r"Build ID: ([0-9a-f]+)", out).group(1)
    return d, build_id


class Server:
    """Debian's debuginfod serving the debug files under a directory."""

    def __init__(self, tmp_path, srcdir):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(tmp_path / "debuginfod.log", "w")
        self.p = subprocess.Popen(["debuginfod", "-p", str(self.port), "-d", str(tmp_path / "debuginfod.sqlite"),
                                   "-F", "-t", "1", str(srcdir)], stdout=self.log, stderr=subprocess.STDOUT)

    def wait_for(self, build_id, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/buildid/{build_id}/debuginfo", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise AssertionError(f"debuginfod did not index {build_id} in {timeout} s")

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
        self.log.close()


def record(tmp_path, d, url, extra=(), secs=3):
    p = start([str(d / "prog"), str(secs + 15)])
    try:
        time.sleep(0.3)
        out = d / "out.pb.gz"
        t0 = time.time()
        res = run_prowl(["record", "-p", str(p.pid), "-d", str(secs), "-q", "-o", str(out)] + list(extra),
                        env={"DEBUGINFOD_URLS": url})
        took = time.time() - t0
        assert res.returncode == 0, res.stderr
    finally:
        stop(p)
    return pprof_raw(str(out)), res.stderr, took


def prog_locations(raw, d):
    """[(vaddr, [(func, file, line)])] of the locations in the stripped program."""
    out = []
    for loc in raw.locations.values():
        m = raw.mappings.get(loc["mapping"])
        if m and m["file"] == str(d / "prog"):
            out.append((loc["addr"] - m["start"] + m["offset"], loc["lines"]))
    return out


@pytest.mark.trusted
def test_frames_gain_names_and_lines(tmp_path):
    d, build_id = build(tmp_path, "a")
    srv = Server(tmp_path, d)
    try:
        srv.wait_for(build_id)
        raw, err, _ = record(tmp_path, d, srv.url)
    finally:
        srv.stop()
    locs = prog_locations(raw, d)
    assert locs, "no frame in the program"
    named = {f for _, lines in locs for f, _, _ in lines}
    assert {"dbg_alpha", "dbg_beta", "main"} <= named, named
    # file:line as eu-addr2line reads them from the unstripped build (PIE: the text is
    # mapped at file offset == ELF address).
    checked = 0
    for vaddr, lines in locs:
        func, file, line = lines[-1]
        if func not in ("dbg_alpha", "dbg_beta") or len(lines) > 1:
            continue
        a2l = subprocess.run(["eu-addr2line", "-f", "-e", str(d / "full"), hex(vaddr)], capture_output=True,
                             text=True, check=True).stdout.split("\n")
        assert a2l[0] == func, (hex(vaddr), func, a2l)
        want = re.search(r"/p\.c:(\d+)", a2l[1])
        assert want and int(want.group(1)) == line and file.endswith("/p.c"), (hex(vaddr), file, line, a2l)
        checked += 1
    assert checked >= 2, checked
    assert "debuginfod" not in err, err
    assert os.path.exists(f"/var/cache/prowl/debuginfod/{build_id}/debuginfo")


def test_stopped_server_costs_only_names(tmp_path):
    """No server on the port: the capture ends on time, frames stay addresses, and one
    line says why."""
    d, _ = build(tmp_path, "b")
    raw, err, took = record(tmp_path, d, f"http://127.0.0.1:{free_port()}", ["--debuginfod-timeout", "5s"])
    named = {f for _, lines in prog_locations(raw, d) for f, _, _ in lines}
    assert not named & {"dbg_alpha", "dbg_beta"}, named
    assert [f for f in named if f.startswith("prog+0x")], named
    warnings = [l for l in err.splitlines() if "debuginfod" in l]
    assert len(warnings) == 1, err
    assert took < 3 + 8, f"the capture took {took:.1f} s"


class Liar(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"\x7fELF this is not the debug file you asked for" * 100
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_lying_and_silent_servers(tmp_path):
    """A server that answers garbage with 200: nothing of it is used or kept, one
    warning. A server that never answers: record waits --debuginfod-timeout at most."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Liar)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        d, build_id = build(tmp_path, "c")
        raw, err, _ = record(tmp_path, d, f"http://127.0.0.1:{srv.server_address[1]}")
    finally:
        srv.shutdown()
    named = {f for _, lines in prog_locations(raw, d) for f, _, _ in lines}
    assert not named & {"dbg_alpha", "dbg_beta"}, named
    assert len([l for l in err.splitlines() if "not the debug file" in l]) == 1, err
    assert not os.path.exists(f"/var/cache/prowl/debuginfod/{build_id}/debuginfo")

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts, never answers
    try:
        d, _ = build(tmp_path, "d")
        raw, err, took = record(tmp_path, d, f"http://127.0.0.1:{silent.getsockname()[1]}",
                                ["--debuginfod-timeout", "2s"])
    finally:
        silent.close()
    assert took < 3 + 2 + 4, f"the capture took {took:.1f} s"
    assert "did not arrive within --debuginfod-timeout" in err, err


@pytest.mark.trusted
def test_agent_names_frames_in_later_windows(tmp_path):
    d, build_id = build(tmp_path, "e")
    srv = Server(tmp_path, d)
    out = tmp_path / "prof"
    agent = Agent(tmp_path, ["--dir", str(out), "--interval", "1s", "-F", "99"],
                  env={"DEBUGINFOD_URLS": srv.url})
    p = None
    try:
        srv.wait_for(build_id)
        agent.start()
        p = start([str(d / "prog"), "20"])
        deadline = time.time() + 20
        named = set()
        while time.time() < deadline and not {"dbg_alpha", "dbg_beta"} <= named:
            time.sleep(1)
            files = sorted((out / "prog").glob("*.pb.gz")) if (out / "prog").is_dir() else []
            if files:
                raw = pprof_raw(str(files[-1]))
                named = {f for _, lines in prog_locations(raw, d) for f, _, _ in lines}
        m = agent.metrics()
        assert agent.alive(), agent.log()
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
        if p:
            stop(p)
        srv.stop()
    assert {"dbg_alpha", "dbg_beta"} <= named, named
    assert m.sum("prowl_debuginfod_fetches_total", result="fetched") >= 1, m.text
    assert os.path.exists(agent.state / "debuginfod" / build_id / "debuginfo")
