"""test_agent_inputs.py: `prowl agent` facing inputs that others choose: a process that
names itself with invalid UTF-8 and control bytes (the JSON log must stay JSON), and the
metrics endpoint on ":PORT" (every interface: IPv6 and IPv4)."""
import json
import socket
import subprocess
import time

from agentlib import Agent, free_port
from conftest import stop, workload

# A comm an attacker could set with prctl(PR_SET_NAME): bytes that are not UTF-8 (ff fe,
# c3 cut short by '('), a quote, a backslash, a newline, C0 controls, DEL and a C1 control.
HOSTILE = b'\xff\xfe"q\\\n\x01\xc3(\x7f\xc2\x85'
# What a JSON reader must get back: U+FFFD for each invalid byte, everything else as it was.
HOSTILE_DECODED = '\ufffd\ufffd"q\\\n\x01\ufffd(\x7f\x85'


def http_status(family, host, port, path="/healthz"):
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect((host, port))
        s.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
        reply = b""
        while chunk := s.recv(4096):
            reply += chunk
    return int(reply.split()[1])


def test_json_log_and_dual_stack_metrics(tmp_path):
    """One agent, --log-format json -v, metrics on ":PORT": every line it writes parses
    as JSON (the hostile name arrives as U+FFFD and escapes), and /healthz answers over
    ::1 and over 127.0.0.1."""
    port = free_port()
    wl = subprocess.Popen([workload("rename").encode(), HOSTILE, b"20"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    agent = Agent(tmp_path, ["--log-format", "json", "-v", "--interval", "1s", "--metrics-address", f":{port}"])
    agent.metrics_port = port
    try:
        agent.start()
        agent.wait_log(rf'"msg":"process {wl.pid} \(', timeout=20)
        assert http_status(socket.AF_INET6, "::1", port) == 200
        assert http_status(socket.AF_INET, "127.0.0.1", port) == 200
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
        stop(wl)
    raw = agent.log_path.read_bytes()
    records = []
    for n, line in enumerate(raw.split(b"\n")):
        if not line:
            continue
        # Strict: valid UTF-8, and one JSON object per line, nothing else on stderr.
        rec = json.loads(line.decode("utf-8"))
        assert set(rec) == {"ts", "level", "msg"}, (n, rec)
        records.append(rec)
    assert any(r["msg"].startswith("libbpf: ") for r in records), "-v should log libbpf's messages too"
    mine = [r["msg"] for r in records if r["msg"].startswith(f"process {wl.pid} (")]
    assert mine, [r["msg"] for r in records][:40]
    assert mine[0].startswith(f"process {wl.pid} ({HOSTILE_DECODED}) goes to the series of service_name="), mine[0]
