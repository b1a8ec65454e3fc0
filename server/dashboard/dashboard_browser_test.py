#!/usr/bin/python3
"""The node dashboard in a real browser (issue 25 point 2): three estuaryd
processes form a cluster; headless Debian Chromium, driven through
chromedriver's W3C WebDriver HTTP API (standard library only), opens node
1's admin listener at "/" and checks that
  - the page loads with no console errors (the browser log, level SEVERE,
    and errors the page's own window.onerror saw),
  - it shows three nodes, all up,
  - node 3 killed with kill -9 is shown down within 2 seconds,
  - disconnecting a client from the Clients tab disconnects it: a paho MQTT
    5 client connected to node 1 sees the server close it, and node 1 no
    longer lists it (the 0x98 reason byte is checked by server_test).
Screenshots are written to ARTIFACTS_DIR (CTest passes
BUILD/artifacts/dashboard_browser/): 1-loaded.png, 2-node-down.png,
3-client-found.png, 4-client-disconnected.png.

Usage: dashboard_browser_test.py BUILD/bin/estuaryd ARTIFACTS_DIR
Exit 77 (CTest: skipped) with the reason when chromium or chromedriver is
missing. As root, Chromium runs with --no-sandbox (it refuses to start
otherwise).
"""
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "conformance", "support"))
from estuary_process import Estuaryd, stop_process, wait_for  # noqa: E402

SKIP = 77
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebDriver:
    """A W3C WebDriver session over chromedriver's HTTP API."""

    def __init__(self):
        self.port = free_port()
        self.process = subprocess.Popen([CHROMEDRIVER, f"--port={self.port}"], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        wait_for("chromedriver", self._ready)
        args = ["--headless=new", "--disable-gpu", "--window-size=1400,1100", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-extensions"]
        if os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
        }}}
        self.session = self._call("POST", "/session", caps)["sessionId"]

    def _ready(self):
        try:
            with urllib.request.urlopen(self.base + "/status", timeout=1) as r:
                return json.load(r)["value"].get("ready", False)
        except (OSError, ValueError):
            return False

    def _call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                return json.load(r)["value"]
        except urllib.error.HTTPError as error:
            raise AssertionError(f"WebDriver {method} {path}: {error.read().decode()[:500]}") from None

    def cmd(self, method, path, body=None):
        return self._call(method, f"/session/{self.session}{path}", body)

    def get(self, url):
        self.cmd("POST", "/url", {"url": url})

    def script(self, source, *args):
        return self.cmd("POST", "/execute/sync", {"script": source, "args": list(args)})

    def element(self, css):
        found = self.cmd("POST", "/element", {"using": "css selector", "value": css})
        return next(iter(found.values()))

    def click(self, css):
        self.cmd("POST", f"/element/{self.element(css)}/click", {})

    def type(self, css, text):
        self.cmd("POST", f"/element/{self.element(css)}/value", {"text": text})

    def screenshot(self, path):
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.cmd("GET", "/screenshot")))
        print("screenshot:", path)

    def browser_log(self):
        """The console since the last call (chromedriver's log endpoint)."""
        try:
            return self.cmd("POST", "/se/log", {"type": "browser"})
        except AssertionError:
            return self._call("POST", f"/session/{self.session}/log", {"type": "browser"})

    def quit(self):
        try:
            self.cmd("DELETE", "")
        except Exception:  # noqa: BLE001 - best effort at the end
            pass
        stop_process(self.process, 10)


class Node(Estuaryd):
    def __init__(self, binary, node_id, secret_file, seeds=()):
        flags = ["--node-id", str(node_id), "--shards", "2", "--cluster-secret-file", secret_file,
                 "--log-level", "warn", "--storage", "memory", "--sys-interval", "0"]
        if seeds:
            flags += ["--seeds", ",".join(seeds)]
        super().__init__(binary, *flags)

    def overview(self):
        with urllib.request.urlopen(f"http://{self.admin}/api/overview", timeout=2) as r:
            return json.load(r)


NODE_ROWS = """return Array.from(document.querySelectorAll('#nodes tbody tr')).map(
    r => [r.dataset.node, r.cells[1].textContent]);"""

# Errors the page itself saw (uncaught exceptions, rejected promises).
CATCH_ERRORS = """window.__errors = window.__errors || [];
window.addEventListener('error', e => window.__errors.push(String(e.message)));
window.addEventListener('unhandledrejection', e => window.__errors.push(String(e.reason)));
return true;"""


def console_errors(driver):
    severe = [entry for entry in driver.browser_log() if entry.get("level") == "SEVERE"]
    own = driver.script("return window.__errors || [];")
    return severe + own


def main():
    estuaryd, artifacts = sys.argv[1], sys.argv[2]
    for program in (CHROMIUM, CHROMEDRIVER):
        if not os.access(program, os.X_OK):
            print(f"SKIPPED: {program} is missing: install Debian's chromium and chromium-driver "
                  "(scripts/install-deps.sh)")
            return SKIP
    import paho.mqtt.client as mqtt
    os.makedirs(artifacts, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        secret = os.path.join(tmp, "secret")
        with open(secret, "w") as f:
            f.write("dashboard browser test\n")
        nodes = [Node(estuaryd, 1, secret)]
        nodes.append(Node(estuaryd, 2, secret, [nodes[0].cluster]))
        nodes.append(Node(estuaryd, 3, secret, [nodes[0].cluster]))
        driver = None
        victim = None
        try:
            wait_for("three members up", lambda: sum(
                1 for n in nodes[0].overview()["nodes"] if n["state"] == "up" and n.get("reachable")) == 3,
                deadline_s=30)
            driver = WebDriver()
            url = f"http://{nodes[0].admin}/"
            driver.get(url)
            driver.script(CATCH_ERRORS)
            rows = wait_for("three nodes shown up", lambda: (lambda r: r if len(r) == 3 and all(
                s == "up" for _, s in r) else None)(driver.script(NODE_ROWS)))
            print("nodes shown:", rows)
            wait_for("the charts drawn", lambda: driver.script(
                "return typeof Chart !== 'undefined' && Chart.getChart(document.getElementById('chart-in')) !== undefined;"))
            driver.screenshot(os.path.join(artifacts, "1-loaded.png"))
            errors = console_errors(driver)
            assert not errors, f"console errors on load: {errors}"

            # kill -9 node 3: shown down within 2 seconds.
            nodes[2].kill()
            killed_at = time.monotonic()
            wait_for("node 3 shown down", lambda: dict(driver.script(NODE_ROWS)).get("3") == "down", deadline_s=2)
            shown_after = time.monotonic() - killed_at
            print(f"node 3 shown down {shown_after:.2f} s after kill -9")
            driver.screenshot(os.path.join(artifacts, "2-node-down.png"))

            # A client on node 1, disconnected from the page.
            disconnects = []
            victim = mqtt.Client(client_id="dashboard-victim", protocol=mqtt.MQTTv5)

            def on_disconnect(c, _userdata, rc, *rest):
                disconnects.append(rc)
                c.disconnect()  # no automatic reconnect by paho's loop thread

            victim.on_disconnect = on_disconnect
            victim.connect("127.0.0.1", nodes[0].mqtt_port)
            victim.loop_start()
            wait_for("the client connected", victim.is_connected)
            driver.click('#tabs button[data-tab="clients"]')
            driver.type('#tab-clients input[name="client_id"]', "dashboard-victim")
            driver.click('#tab-clients button[type="submit"]')
            wait_for("the client listed", lambda: driver.script(
                "return document.querySelector('#clients tr[data-client-id=\"dashboard-victim\"]') !== null;"))
            driver.screenshot(os.path.join(artifacts, "3-client-found.png"))
            kick = '#clients tr[data-client-id="dashboard-victim"] button.kick'
            # The first click arms the button, the second confirms; the list
            # refreshes every 5 s, which may replace an armed button: again.
            for _ in range(5):
                driver.click(kick)
                if driver.script("return document.querySelector(arguments[0]).textContent;", kick) \
                        == "Really disconnect?":
                    driver.click(kick)
                    break
            wait_for("the client disconnected by the server", lambda: disconnects)
            # paho 1.6 reads a DISCONNECT's reason only when properties
            # follow it, so it reports the server's 0x98 as a lost
            # connection (7); node_test checks the reason code byte.
            print("client saw the server disconnect it (paho rc", disconnects[0], ")")
            wait_for("node 1 no longer lists the client", lambda: json.load(urllib.request.urlopen(
                f"http://{nodes[0].admin}/api/clients?client_id=dashboard-victim", timeout=2))["total"] == 0)
            wait_for("the list without the client", lambda: driver.script(
                "return document.querySelector('#clients tr[data-client-id=\"dashboard-victim\"]') === null;"))
            driver.screenshot(os.path.join(artifacts, "4-client-disconnected.png"))
            errors = console_errors(driver)
            assert not errors, f"console errors: {errors}"
            print("dashboard browser test: passed")
            return 0
        finally:
            if victim is not None:
                victim.loop_stop()
            if driver is not None:
                driver.quit()
            for node in nodes:
                if node.process.poll() is None:
                    node.stop()


if __name__ == "__main__":
    sys.exit(main())
