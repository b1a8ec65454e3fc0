#!/usr/bin/python3
"""Process test of --admin-token-file (docs/security.md "Admin API") against a
real estuaryd, estuaryctl and estuary-lb. Checks, each printed as "ok: ..." or
"FAIL: ...":

  - without the token every admin request but GET /healthz gets 401 with
    `WWW-Authenticate: Bearer` and a JSON error; a wrong token too; the right
    one gets the page; estuary_admin_refused_total counts the refusals;
  - estuaryctl --token-file reaches the API, estuaryctl without it exits 1
    with the 401 named;
  - start-up refused (exit 2, one line naming --admin) for a non-loopback
    --admin without a token, and for a token file readable by others or
    empty;
  - SIGHUP reads the file again: the new token works, the old one is
    refused;
  - estuary-lb --admin-token-file probes the node's /api/load with the token
    (the node becomes eligible) and its own /api/nodes needs the token;
  - --admin-tls: the admin listener speaks HTTPS with the --tls-cert pair
    (Python's ssl verifying it against the CA: 401 without the token, 200
    with it); estuaryctl --admin-ca reaches it, estuaryctl without it or with
    another CA's file does not; plain HTTP gets no answer.

Every wait is on an observed event with a deadline; nothing sleeps.

usage: /usr/bin/python3 admin_process.py estuaryd estuaryctl estuary-lb
"""

import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from estuary_process import DEADLINE, FAILURES, SINGLE_NODE_FLAGS, EstuaryLb, Estuaryd, check, wait_for  # noqa: E402
from tls_certs import TlsCerts  # noqa: E402

ESTUARYD, ESTUARYCTL, ESTUARY_LB = sys.argv[1], sys.argv[2], sys.argv[3]
WORK = tempfile.mkdtemp(prefix="estuary-admin-")
TOKEN = "first-token-0123456789abcdef"
TOKEN2 = "second-token-abcdef0123456789"


def write_token(name, text, mode=0o600):
    path = os.path.join(WORK, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def request(address, method, path, token=None):
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=DEADLINE)
    headers = {"Authorization": "Bearer " + token} if token else {}
    connection.request(method, path, headers=headers)
    response = connection.getresponse()
    body = response.read().decode()
    result = (response.status, dict(response.getheaders()), body)
    connection.close()
    return result


def refused_total(node):
    status, _, body = request(node.admin, "GET", "/metrics", TOKEN)
    for line in body.splitlines():
        if line.startswith("estuary_admin_refused_total{"):
            return int(line.rsplit(" ", 1)[1])
    return None


def start_up_error(*flags):
    done = subprocess.run([ESTUARYD, *SINGLE_NODE_FLAGS, "--mqtt", "127.0.0.1:0", "--amqp", "127.0.0.1:0",
                           *flags], capture_output=True, text=True, timeout=DEADLINE)
    return done.returncode, done.stderr.strip()


def check_requests(node):
    status, headers, body = request(node.admin, "GET", "/metrics")
    check(status == 401 and headers.get("WWW-Authenticate", "").startswith("Bearer")
          and json.loads(body).get("error") == "unauthorized",
          "GET /metrics without a token: 401, WWW-Authenticate: Bearer, JSON error (%d %r)" % (status, body))
    status, _, _ = request(node.admin, "POST", "/api/drain")
    check(status == 401, "POST /api/drain without a token: 401 (%d)" % status)
    status, _, _ = request(node.admin, "GET", "/api/load", "wrong-token-0123456789abcdef")
    check(status == 401, "a wrong token: 401 (%d)" % status)
    status, _, body = request(node.admin, "GET", "/healthz")
    check(status == 200 and body.startswith("ok"), "GET /healthz without a token: 200 (%d)" % status)
    status, _, body = request(node.admin, "GET", "/api/load", TOKEN)
    check(status == 200 and "connections" in body, "GET /api/load with the token: 200 (%d)" % status)
    check(refused_total(node) == 3, "estuary_admin_refused_total counts the 3 refusals (%r)" % refused_total(node))


def check_ctl(node, token_file):
    done = subprocess.run([ESTUARYCTL, "--admin", node.admin, "--token-file", token_file, "--json", "load"],
                          capture_output=True, text=True, timeout=DEADLINE)
    check(done.returncode == 0 and "connections" in done.stdout,
          "estuaryctl --token-file load: exit 0 (%d %r)" % (done.returncode, done.stderr))
    done = subprocess.run([ESTUARYCTL, "--admin", node.admin, "load"], capture_output=True, text=True,
                          timeout=DEADLINE)
    check(done.returncode == 1 and "401" in done.stderr,
          "estuaryctl without --token-file: exit 1 naming the 401 (%d %r)" % (done.returncode, done.stderr))


def check_start_up_refusals():
    code, error = start_up_error("--admin", "0.0.0.0:0")
    check(code == 2 and "--admin" in error and "--admin-token-file" in error and "\n" not in error,
          "--admin 0.0.0.0:0 without a token: exit 2, one line naming it (%d %r)" % (code, error))
    open_file = write_token("open.token", TOKEN + "\n", 0o644)
    code, error = start_up_error("--admin", "127.0.0.1:0", "--admin-token-file", open_file)
    check(code == 2 and "chmod 600" in error, "a token file readable by others: exit 2 (%d %r)" % (code, error))
    empty = write_token("empty.token", "\n")
    code, error = start_up_error("--admin", "127.0.0.1:0", "--admin-token-file", empty)
    check(code == 2 and "no token" in error, "an empty token file: exit 2 (%d %r)" % (code, error))
    good = write_token("ok.token", TOKEN + "\n")
    node = Estuaryd(ESTUARYD, *SINGLE_NODE_FLAGS, "--admin", "0.0.0.0:0", "--admin-token-file", good)
    status, _, _ = request("127.0.0.1:" + node.admin.rsplit(":", 1)[1], "GET", "/metrics")
    check(status == 401, "--admin 0.0.0.0 with a token starts, and asks for it (%d)" % status)
    node.stop()


def check_reload(node, token_file):
    write_token(os.path.basename(token_file), TOKEN2 + "\n")
    node.process.send_signal(signal.SIGHUP)
    wait_for("the new token to be accepted", lambda: request(node.admin, "GET", "/api/load", TOKEN2)[0] == 200)
    check(request(node.admin, "GET", "/api/load", TOKEN)[0] == 401, "after SIGHUP the old token is refused")
    write_token(os.path.basename(token_file), TOKEN + "\n")
    node.process.send_signal(signal.SIGHUP)
    wait_for("the first token again", lambda: request(node.admin, "GET", "/api/load", TOKEN)[0] == 200)
    check(True, "after SIGHUP the new token is accepted")


def check_balancer(node, token_file):
    lb = EstuaryLb(ESTUARY_LB, "--nodes", node.admin, "--role", "active", "--startup-wait", "0",
                   "--poll-interval", "50", "--admin-token-file", token_file, "--log-level", "warn")
    try:
        check(lb.ready_line.startswith("estuary-lb ready"), "estuary-lb ready (%r)" % lb.ready_line)
        admin = lb.fields["admin"]
        check(request(admin, "GET", "/api/nodes")[0] == 401, "estuary-lb /api/nodes without the token: 401")
        check(request(admin, "GET", "/healthz")[0] == 200, "estuary-lb /healthz without the token: 200")

        def eligible():
            status, _, body = request(admin, "GET", "/api/nodes", TOKEN)
            return status == 200 and any(n.get("eligible") for n in json.loads(body)["nodes"])
        wait_for("the balancer to judge the node eligible through its token", eligible)
        check(True, "estuary-lb probes /api/load with --admin-token-file: the node is eligible")
    finally:
        lb.stop()


def https_request(address, path, ca, token=None):
    host, port = address.rsplit(":", 1)
    context = ssl.create_default_context(cafile=ca)
    connection = http.client.HTTPSConnection(host, int(port), timeout=DEADLINE, context=context)
    connection.request("GET", path, headers={"Authorization": "Bearer " + token} if token else {})
    response = connection.getresponse()
    result = (response.status, response.read().decode())
    connection.close()
    return result


def check_balancer_https(node, token_file, certs, other):
    """estuary-lb --admin-ca probes a node's HTTPS admin: eligible with the
    node's CA; with another CA the probe fails and the log names the
    certificate; without --admin-ca (plain HTTP) it fails too."""
    def balancer(*flags):
        return EstuaryLb(ESTUARY_LB, "--nodes", node.admin, "--role", "active", "--startup-wait", "0",
                         "--poll-interval", "50", "--admin-token-file", token_file, "--log-level", "info", *flags)

    def eligible(lb):
        status, _, body = request(lb.fields["admin"], "GET", "/api/nodes", TOKEN)
        return status == 200 and any(n.get("eligible") for n in json.loads(body)["nodes"])

    lb = balancer("--admin-ca", certs.ca)
    try:
        wait_for("estuary-lb --admin-ca to judge the HTTPS node eligible", lambda: eligible(lb))
        check(True, "estuary-lb --admin-ca probes the --admin-tls node over HTTPS: eligible")
    finally:
        lb.stop()
    ca_file = os.path.join(WORK, "lb-admin-ca.pem")
    shutil.copyfile(other.ca, ca_file)
    for flags, what in ((["--admin-ca", ca_file], "with another CA"), ([], "without --admin-ca")):
        lb = balancer(*flags)
        try:
            def probed_and_failed():
                status, _, body = request(lb.fields["admin"], "GET", "/api/nodes", TOKEN)
                nodes = json.loads(body)["nodes"] if status == 200 else []
                return any(n.get("last_error") for n in nodes), nodes
            wait_for("estuary-lb %s to report a failed probe" % what, lambda: probed_and_failed()[0])
            _, nodes = probed_and_failed()
            check(not any(n.get("eligible") for n in nodes),
                  "estuary-lb %s: the HTTPS node is not eligible (%r)" % (what, [n.get("last_error") for n in nodes]))
            if flags:
                errors = " ".join(str(n.get("last_error")) for n in nodes)
                check("certificate" in errors, "estuary-lb with another CA names the certificate (%r)" % errors)
                # The right CA in the same file: SIGHUP reads it again.
                shutil.copyfile(certs.ca, ca_file)
                lb.process.send_signal(signal.SIGHUP)
                wait_for("estuary-lb to judge the node eligible with the CA read again on SIGHUP",
                         lambda: eligible(lb))
                check(True, "estuary-lb reads --admin-ca again on SIGHUP: the node is eligible")
        finally:
            lb.stop()


def check_admin_tls(token_file):
    certs = TlsCerts(os.path.join(WORK, "tls"))
    other = TlsCerts(os.path.join(WORK, "other"), ca_name="Another CA")
    node = Estuaryd(ESTUARYD, *SINGLE_NODE_FLAGS, "--admin-tls", "--tls-cert", certs.server_cert, "--tls-key",
                    certs.server_key, "--admin-token-file", token_file)
    try:
        status, _ = https_request(node.admin, "/api/load", certs.ca)
        check(status == 401, "--admin-tls: HTTPS without the token: 401 (%d)" % status)
        status, body = https_request(node.admin, "/api/load", certs.ca, TOKEN)
        check(status == 200 and "connections" in body, "--admin-tls: HTTPS with the token: 200 (%d)" % status)
        host, port = node.admin.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=DEADLINE) as plain:
            plain.sendall(b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n")
            answer = b""
            try:
                while chunk := plain.recv(4096):
                    answer += chunk
            except OSError:
                pass
        check(not answer.startswith(b"HTTP/"), "--admin-tls: plain HTTP gets no HTTP answer (%r)" % answer[:40])
        ctl = [ESTUARYCTL, "--admin", node.admin, "--token-file", token_file, "--json"]
        done = subprocess.run(ctl + ["--admin-ca", certs.ca, "load"], capture_output=True, text=True,
                              timeout=DEADLINE)
        check(done.returncode == 0 and "connections" in done.stdout,
              "estuaryctl --admin-ca reaches the HTTPS admin (%d %r)" % (done.returncode, done.stderr))
        done = subprocess.run(ctl + ["--admin-ca", other.ca, "load"], capture_output=True, text=True,
                              timeout=DEADLINE)
        check(done.returncode == 1 and "certificate" in done.stderr,
              "estuaryctl --admin-ca with another CA: exit 1 naming the certificate (%d %r)"
              % (done.returncode, done.stderr))
        done = subprocess.run(ctl + ["--timeout-ms", "2000", "load"], capture_output=True, text=True,
                              timeout=DEADLINE)
        check(done.returncode == 1, "estuaryctl without --admin-ca: exit 1 (%d %r)" % (done.returncode, done.stderr))
        check_balancer_https(node, token_file, certs, other)
    finally:
        check(node.stop() == 0, "the --admin-tls node stops with status 0")
    code, error = start_up_error("--admin", "127.0.0.1:0", "--admin-tls")
    check(code == 2 and "--admin-tls" in error, "--admin-tls without --tls-cert: exit 2 (%d %r)" % (code, error))


def main():
    token_file = write_token("admin.token", "  " + TOKEN + "  \n")
    node = Estuaryd(ESTUARYD, *SINGLE_NODE_FLAGS, "--admin-token-file", token_file)
    try:
        check_requests(node)
        check_ctl(node, token_file)
        check_balancer(node, token_file)
        check_reload(node, token_file)
    finally:
        check(node.stop() == 0, "estuaryd stops with status 0")
    check_start_up_refusals()
    check_admin_tls(token_file)
    shutil.rmtree(WORK, ignore_errors=True)
    if FAILURES:
        print("%d check(s) failed" % len(FAILURES))
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
