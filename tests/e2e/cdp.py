"""cdp.py: a small Chrome DevTools Protocol client for the browser tests: starts Debian's
headless Chromium with no network, opens pages, evaluates JS, clicks, types, screenshots."""
import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time

import websocket  # Debian's python3-websocket

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")

# Root needs --no-sandbox; the background-networking flags keep Chromium from calling
# home (this machine's network is closed, and the tests assert no request at all).
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
         "--remote-debugging-port=0", "--window-size=1400,900", "--force-device-scale-factor=1"]


class Browser:
    def __init__(self):
        self.profile = tempfile.mkdtemp(prefix="i10-prowl-chromium-")
        self.proc = subprocess.Popen([CHROMIUM] + FLAGS + [f"--user-data-dir={self.profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        url = None
        deadline = time.time() + 30
        while time.time() < deadline and url is None:
            line = self.proc.stderr.readline()
            if not line:
                if self.proc.poll() is not None:
                    break
                continue
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                url = m.group(1)
        if url is None:
            self.close()
            raise RuntimeError("chromium did not start its DevTools endpoint")
        # Keep draining stderr so Chromium never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        self.ws = websocket.create_connection(url, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.events = []

    def send(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        mid = self.next_id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        deadline = time.time() + timeout
        while time.time() < deadline:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == mid:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)
        raise TimeoutError(method)

    def wait_event(self, method, session, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for i, e in enumerate(self.events):
                if e.get("method") == method and e.get("sessionId") == session:
                    return self.events.pop(i)
            self.events.append(json.loads(self.ws.recv()))
        raise TimeoutError(method)

    def new_page(self, width=1400, height=900):
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.send(f"{domain}.enable")
        page.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        return page

    def close(self):
        try:
            if getattr(self, "ws", None):
                self.ws.close()
        finally:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    def __init__(self, browser, session):
        self.b = browser
        self.session = session

    def send(self, method, params=None, timeout=30):
        return self.b.send(method, params, session=self.session, timeout=timeout)

    def goto(self, url, timeout=30):
        self.b.events = [e for e in self.b.events if e.get("sessionId") != self.session]
        self.send("Page.navigate", {"url": url})
        self.b.wait_event("Page.loadEventFired", self.session, timeout)

    def eval(self, expr):
        res = self.send("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expr}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def wait_for(self, expr, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            v = self.eval(expr)
            if v:
                return v
            time.sleep(0.05)
        raise TimeoutError(expr)

    def click(self, x, y):
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left",
                                                   "clickCount": 0 if kind == "mouseMoved" else 1})

    def type_into(self, selector, text):
        self.eval(f"document.querySelector({json.dumps(selector)}).focus()")
        self.send("Input.insertText", {"text": text})

    def screenshot(self, path):
        # Let pending events arrive; then capture the whole page.
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def drain(self):
        """Pulls in the events that have arrived so far (console, network)."""
        self.b.ws.settimeout(0.2)
        try:
            while True:
                self.b.events.append(json.loads(self.b.ws.recv()))
        except websocket.WebSocketTimeoutException:
            pass
        finally:
            self.b.ws.settimeout(30)

    def problems(self):
        """Console errors, uncaught exceptions and every network request but the page itself."""
        self.drain()
        errors, requests = [], []
        for e in self.b.events:
            if e.get("sessionId") != self.session:
                continue
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                errors.append(p["exceptionDetails"].get("text", "exception"))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                errors.append(" ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p["entry"].get("level") in ("error", "warning"):
                errors.append(p["entry"].get("text"))
            elif m == "Network.requestWillBeSent":
                requests.append(p["request"]["url"])
        return errors, requests
