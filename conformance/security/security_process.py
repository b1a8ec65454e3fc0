#!/usr/bin/python3
"""Process test of --password-file and --acl-file (docs/security.md) against a
real estuaryd, with clients the project does not write: mosquitto_passwd
makes the password file, mosquitto_pub/mosquitto_sub and Paho Python
(python3-paho-mqtt 1.6) connect, Proton Python (python3-qpid-proton) checks
AMQP. Checks, each printed as "ok: ..." or "FAIL: ...":

  - a mosquitto_passwd file ($7$ and $6$ lines) is accepted with the right
    password and refused with a wrong one, over MQTT and AMQP SASL PLAIN;
  - a clear-text line stops start-up: exit status 2, one line naming it;
  - a wildcard subscriber receives only the topics it may read, retained
    messages included; SUBACK 0x80 (3.1.1) and 0x87 (5.0) for a denied
    filter, `$SYS/#` only where a rule names it;
  - a denied PUBLISH is answered 0x87 in 5.0 (QoS 1 and 2) and dropped in
    3.1.1; a will on a topic the client may not write refuses the CONNECT,
    an allowed will is published when the client dies;
  - AMQP: a receiver on an unreadable source and a sender to an unwritable
    target are refused with amqp:unauthorized-access, and an anonymous
    relay's message to an unwritable `to` is rejected;
  - SIGHUP under a connected client: new rules apply to its next publish, a
    user added with `estuaryctl passwd` can log in, a broken ACL file keeps
    the rules in force;
  - estuaryctl passwd's file is accepted by Mosquitto's own broker too,
    when /usr/sbin/mosquitto is there; on a terminal (a pty) it asks twice
    without echo and refuses two different answers.

Every wait is on an observed event with a deadline; nothing sleeps.

usage: /usr/bin/python3 security_process.py path/to/estuaryd path/to/estuaryctl
"""

import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import paho.mqtt.client as mqtt

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from estuary_process import DEADLINE, FAILURES, Estuaryd, LineReader, check, wait_for  # noqa: E402
from paho_client import PahoClient  # noqa: E402

ESTUARYD, ESTUARYCTL = sys.argv[1], sys.argv[2]
WORK = tempfile.mkdtemp(prefix="estuary-security-")

ACL = """# anonymous clients: none here (the password file requires a user)
user alice
topic readwrite alice/#
topic read sensors/+/temp
topic deny alice/secret/#
topic write wills/alice
pattern readwrite devices/%c/#

user bob
topic readwrite #

user admin
topic read $SYS/#
topic readwrite #
"""


def path(name):
    return os.path.join(WORK, name)


def run(argv, stdin=None):
    """A client command to completion: (exit status, stdout, stderr)."""
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=DEADLINE)
    return done.returncode, done.stdout, done.stderr


def pub(broker, user, password, topic, message, version="mqttv5", qos=1, extra=()):
    """mosquitto_pub; `message` None sends an empty one (-n: clears a retained message)."""
    body = ["-n"] if message is None else ["-m", message]
    return run(["mosquitto_pub", "-h", broker.host, "-p", str(broker.mqtt_port), "-u", user, "-P", password,
                "-V", version, "-q", str(qos), "-t", topic, *body, *extra])


class Sub:
    """mosquitto_sub -v in the background; lines read with deadlines."""

    def __init__(self, broker, user, password, topic, version="mqttv5", extra=()):
        self.process = subprocess.Popen(
            ["mosquitto_sub", "-h", broker.host, "-p", str(broker.mqtt_port), "-u", user, "-P", password,
             "-V", version, "-q", "1", "-v", "-t", topic, *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.reader = LineReader(self.process)

    def line(self):
        """The next line within DEADLINE, or None."""
        return self.reader.line()

    def stop(self):
        self.process.kill()
        self.process.wait()
        return self.process.stderr.read().decode()


def Paho(broker, client_id, user, password, protocol=mqtt.MQTTv5):
    """A Paho client of `broker` (conformance/support/paho_client.py)."""
    return PahoClient(broker.host, broker.mqtt_port, client_id, user, password, protocol)


def make_password_file():
    file = path("passwords")
    run(["mosquitto_passwd", "-c", "-b", file, "alice", "wonderland"])
    run(["mosquitto_passwd", "-H", "sha512", "-b", file, "bob", "builder"])
    run(["mosquitto_passwd", "-b", file, "admin", "root-of-trust"])
    with open(file) as handle:
        text = handle.read()
    check(text.count("$7$") == 2 and text.count("$6$") == 1, "mosquitto_passwd wrote $7$ and $6$ lines")
    return file


def check_clear_text_refused():
    file = path("clear")
    with open(file, "w") as handle:
        handle.write("# users\ncarol:plain\n")
    process = subprocess.run([ESTUARYD, "--mqtt", "127.0.0.1:0", "--amqp", "127.0.0.1:0", "--admin", "127.0.0.1:0",
                              "--cluster", "127.0.0.1:0", "--password-file", file],
                             capture_output=True, text=True, timeout=DEADLINE)
    lines = process.stderr.strip().splitlines()
    check(process.returncode == 2 and len(lines) == 1 and (file + ":2:") in lines[0],
          "a clear-text password line stops start-up with status 2 and one line naming it (%d, %r)"
          % (process.returncode, process.stderr.strip()))


def check_passwords(broker):
    status, _, _ = pub(broker, "alice", "wonderland", "alice/hello", "hi", "mqttv311")
    check(status == 0, "mosquitto_pub 3.1.1 with alice's $7$ password is accepted")
    status, _, _ = pub(broker, "bob", "builder", "anything", "hi")
    check(status == 0, "mosquitto_pub 5.0 with bob's $6$ password is accepted")
    # (mosquitto_pub 2.0.11 in 5.0 then aborts, status 134, as it does against main before this change.)
    status, _, error = pub(broker, "alice", "wrong", "alice/hello", "hi")
    check(status != 0 and "bad user name or password" in error.lower(),
          "5.0: a wrong password is refused with 0x86 (%d, %r)" % (status, error.strip()))
    status, _, error = pub(broker, "alice", "wrong", "alice/hello", "hi", "mqttv311")
    check(status == 4 and "bad user name or password" in error.lower(),
          "3.1.1: a wrong password is refused with return code 4 (%d, %r)" % (status, error.strip()))
    status, _, error = pub(broker, "mallory", "wonderland", "alice/hello", "hi", "mqttv311")
    check(status != 0, "an unknown user is refused (%d, %r)" % (status, error.strip()))


def check_wildcard_subscriber(broker):
    # Retained messages first: only the readable one may come at subscribe.
    pub(broker, "bob", "builder", "other/retained", "no", extra=("-r",))
    pub(broker, "bob", "builder", "alice/retained", "yes", extra=("-r",))
    sub = Sub(broker, "alice", "wonderland", "#")
    first = sub.line()
    check(first == "alice/retained yes", "a wildcard subscriber gets only the readable retained message (%r)" % first)
    for topic in ("alice/ok", "alice/secret/x", "sensors/kitchen/temp", "sensors/kitchen/humidity", "other/x",
                  "alice/end"):
        pub(broker, "bob", "builder", topic, "m")
    got = []
    while True:
        line = sub.line()
        if line is None:
            break
        got.append(line)
        if line.startswith("alice/end"):
            break
    sub.stop()
    check(got == ["alice/ok m", "sensors/kitchen/temp m", "alice/end m"],
          "a wildcard subscriber receives only the topics it may read (%r)" % got)
    for topic in ("other/retained", "alice/retained"):
        pub(broker, "bob", "builder", topic, None, extra=("-r",))  # later checks expect no retained messages


def check_subscribe_codes(broker):
    v5 = Paho(broker, "alice-v5", "alice", "wonderland")
    check(v5.suback("other/#") == [135], "5.0 SUBACK for a filter with no readable topic: 0x87")
    check(v5.suback("alice/secret/#") == [135], "5.0 SUBACK for a filter a deny covers: 0x87")
    check(v5.suback("$SYS/#") == [135], "5.0 SUBACK for $SYS/# without a $SYS rule: 0x87")
    check(v5.suback("devices/alice-v5/#") == [1], "%c pattern: a client may read its own devices/<id>/#")
    v5.close()
    v3 = Paho(broker, "alice-v3", "alice", "wonderland", mqtt.MQTTv311)
    check(v3.suback("other/#") == [128], "3.1.1 SUBACK for a denied filter: 0x80")
    v3.close()
    admin = Paho(broker, "admin-sys", "admin", "root-of-trust")
    check(admin.suback("$SYS/#") == [1], "$SYS/# is granted where a rule names $SYS")
    message = admin.next_message()
    check(message is not None and message[0].startswith("$SYS/"), "the $SYS reader gets $SYS messages (%r)"
          % (message,))
    admin.close()


def check_denied_publishes(broker):
    watcher = Paho(broker, "bob-watch", "bob", "builder")
    watcher.suback("other/#")
    for qos in (1, 2):
        status, _, error = pub(broker, "alice", "wonderland", "other/v5", "no", qos=qos)
        check("not authorized" in error.lower(), "5.0 QoS %d publish to a denied topic: 0x87 (%r)" % (qos, error.strip()))
    status, _, error = pub(broker, "alice", "wonderland", "other/v311", "no", "mqttv311", qos=1)
    check(status == 0 and error.strip() == "", "3.1.1 publish to a denied topic is acknowledged (%d, %r)"
          % (status, error.strip()))
    pub(broker, "bob", "builder", "other/marker", "m")
    check(watcher.next_message() == ("other/marker", "m"), "denied publishes reach no subscriber")
    watcher.close()


def check_wills(broker):
    status, _, error = run(["mosquitto_sub", "-h", broker.host, "-p", str(broker.mqtt_port), "-u", "alice",
                            "-P", "wonderland", "-t", "alice/x", "-W", "5", "--will-topic", "other/will",
                            "--will-payload", "gone"])
    check(status != 0 and "authori" in error.lower(), "a will on a topic the client may not write refuses CONNECT (%r)"
          % error.strip())
    watcher = Paho(broker, "bob-wills", "bob", "builder")
    watcher.suback("wills/#")
    pub(broker, "bob", "builder", "alice/here", "yes", extra=("-r",))
    sub = Sub(broker, "alice", "wonderland", "alice/here", extra=("--will-topic", "wills/alice",
                                                                  "--will-payload", "alice died"))
    check(sub.line() == "alice/here yes", "a client with an allowed will connects")
    pub(broker, "bob", "builder", "alice/here", None, extra=("-r",))
    sub.stop()  # kill -9: no DISCONNECT, so the will goes
    check(watcher.next_message() == ("wills/alice", "alice died"), "an allowed will is published")
    watcher.close()


def check_amqp(broker):
    try:
        from proton import ConnectionException, LinkException, Message
        from proton.utils import BlockingConnection, SendException
    except ImportError:
        print("skip: python3-qpid-proton is not installed")
        return
    url = "amqp://%s:%d" % (broker.host, broker.amqp_port)
    try:
        BlockingConnection(url, user="alice", password="wrong", allowed_mechs="PLAIN", allow_insecure_mechs=True,
                           timeout=DEADLINE)
        check(False, "AMQP SASL PLAIN with a wrong password is refused")
    except ConnectionException as error:
        check(True, "AMQP SASL PLAIN with a wrong password is refused (%s)" % str(error).splitlines()[0])
    connection = BlockingConnection(url, user="alice", password="wonderland", allowed_mechs="PLAIN",
                                    allow_insecure_mechs=True, timeout=DEADLINE)
    check(True, "AMQP SASL PLAIN with alice's mosquitto_passwd password is accepted")
    for what, attach in (("receiver from an unreadable source", lambda: connection.create_receiver("other/#")),
                         ("sender to an unwritable target", lambda: connection.create_sender("other/x"))):
        try:
            attach()
            check(False, "AMQP %s is refused" % what)
        except LinkException as error:
            check("unauthorized-access" in str(error), "AMQP %s is refused: amqp:unauthorized-access (%s)"
                  % (what, str(error).splitlines()[0]))
    receiver = connection.create_receiver("alice/amqp")
    check(receiver is not None, "AMQP receiver from a readable source is attached")
    relay = connection.create_sender(None)  # anonymous relay: each message's `to` is checked
    try:
        relay.send(Message(address="other/x", body="no"))
        check(False, "AMQP anonymous relay: a message to an unwritable `to` is rejected")
    except SendException as error:
        check(True, "AMQP anonymous relay: a message to an unwritable `to` is rejected (%s)" % error)
    relay.send(Message(address="alice/amqp", body="yes"))
    message = receiver.receive(timeout=DEADLINE)
    receiver.accept()
    check(message.body == "yes", "AMQP anonymous relay: a message to a writable `to` is delivered")
    connection.close()


def log_has(log_file, needle):
    with open(log_file) as handle:
        return needle in handle.read()


def reload_and_wait(broker, log_file, needle):
    """SIGHUP, then wait until estuaryd's log has one more line with `needle`."""
    with open(log_file) as handle:
        before = handle.read().count(needle)
    os.kill(broker.process.pid, signal.SIGHUP)
    try:
        wait_for("'%s' in the log" % needle, lambda: open(log_file).read().count(needle) > before)
        return True
    except AssertionError:
        return False


def check_reload(broker, log_file, acl_file, password_file):
    alice = Paho(broker, "alice-reload", "alice", "wonderland")
    watcher = Paho(broker, "bob-reload", "bob", "builder")
    watcher.suback("#")
    alice.publish("later/x", "before")
    alice.publish("alice/mark", "1")
    check(watcher.next_message() == ("alice/mark", "1"), "before SIGHUP: alice may not publish later/x")
    with open(acl_file, "a") as handle:
        handle.write("\nuser alice\ntopic write later/#\n")
    status, _, error = run([ESTUARYCTL, "passwd", password_file, "carol"], stdin="from-stdin\n")
    check(status == 0, "estuaryctl passwd added carol from stdin (%r)" % error.strip())
    status, _, _ = pub(broker, "carol", "from-stdin", "x", "hi", qos=0)
    check(status != 0, "before SIGHUP carol cannot log in")
    check(reload_and_wait(broker, log_file, "reload: ACL file"), "SIGHUP reloads (logged)")
    # The same connection: its next publish uses the new rules.
    alice.publish("later/x", "after")
    check(watcher.next_message() == ("later/x", "after"),
          "after SIGHUP the connected client's next publish uses the new ACL")
    status, _, error = pub(broker, "carol", "from-stdin", "x", "hi", qos=0)
    check(status == 0, "after SIGHUP a user added by estuaryctl passwd logs in (%d, %r)" % (status, error.strip()))
    # A broken file keeps what is in force, and the node runs on.
    with open(acl_file, "a") as handle:
        handle.write("this is not a rule\n")
    check(reload_and_wait(broker, log_file, "kept as it was"), "a broken ACL on SIGHUP is logged as an error")
    check(log_has(log_file, acl_file + ":"), "the error names the file and line")
    alice.publish("later/x", "still")
    check(watcher.next_message() == ("later/x", "still"), "a broken ACL on SIGHUP keeps the rules in force")
    check(broker.process.poll() is None, "estuaryd survives SIGHUP")
    alice.close()
    watcher.close()


def check_ctl_on_a_terminal():
    """estuaryctl passwd on a terminal: asks twice, echoes nothing, refuses a mismatch."""
    import pty
    file = path("tty-passwords")

    def converse(answers):
        pid, fd = pty.fork()
        if pid == 0:
            os.execv(ESTUARYCTL, [ESTUARYCTL, "passwd", file, "tina"])
        seen = b""
        for prompt, answer in answers:
            deadline = time.monotonic() + DEADLINE
            while prompt not in seen and time.monotonic() < deadline:
                if select_readable(fd, deadline - time.monotonic()):
                    try:
                        seen += os.read(fd, 1024)
                    except OSError:
                        break
            os.write(fd, answer)
        deadline = time.monotonic() + DEADLINE
        while select_readable(fd, deadline - time.monotonic()):
            try:
                chunk = os.read(fd, 1024)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        status = None

        def reaped():
            nonlocal status
            done, code = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                status = os.waitstatus_to_exitcode(code)
            return status is not None
        try:
            wait_for("estuaryctl passwd to exit", reaped)
        except AssertionError:  # never a hang: killed after DEADLINE
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            status = -9
        return status, seen.decode(errors="replace")

    status, seen = converse([(b"Password: ", b"tty-secret\n"), (b"Reenter password: ", b"tty-secret\n")])
    check(status == 0 and "tty-secret" not in seen and os.path.exists(file),
          "estuaryctl passwd on a terminal asks twice without echo (%d, %r)" % (status, seen))
    status, seen = converse([(b"Password: ", b"one\n"), (b"Reenter password: ", b"two\n")])
    check(status == 1 and "do not match" in seen, "estuaryctl passwd refuses two different answers (%r)" % seen)


def select_readable(fd, timeout):
    if timeout <= 0:
        return False
    selector = selectors.DefaultSelector()
    selector.register(fd, selectors.EVENT_READ)
    return bool(selector.select(timeout))


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def check_mosquitto_reads_our_file(password_file):
    mosquitto = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if os.path.exists("/usr/sbin/mosquitto") else None)
    if mosquitto is None:
        print("skip: no mosquitto broker to read estuaryctl's file")
        return
    port = free_port()  # mosquitto needs a number in its file; free when picked
    config = path("mosquitto.conf")
    with open(config, "w") as handle:
        # As root mosquitto would switch to its own user, who cannot read our temporary folder.
        handle.write("listener %d 127.0.0.1\npassword_file %s\n%s" % (port, password_file,
                                                                    "user root\n" if os.geteuid() == 0 else ""))
    process = subprocess.Popen([mosquitto, "-c", config], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def connects(password):
            status, _, error = run(["mosquitto_pub", "-p", str(port), "-u", "carol", "-P", password, "-t", "x",
                                    "-m", "y"])
            return status, error

        def listening():
            with socket.socket() as probe:
                return probe.connect_ex(("127.0.0.1", port)) == 0 or process.poll() is not None
        wait_for("mosquitto listening", listening)
        status, error = connects("from-stdin")
        check(status == 0, "Mosquitto accepts the $7$ line estuaryctl passwd wrote (%r%s)"
              % (error.strip(), "" if process.poll() is None else "; mosquitto: " + process.stderr.read().decode()))
        status, error = connects("not-it")
        check(status != 0, "Mosquitto refuses a wrong password for it")
    finally:
        process.kill()
        process.wait()


def main():
    password_file = make_password_file()
    acl_file = path("acl")
    with open(acl_file, "w") as handle:
        handle.write(ACL)
    check_clear_text_refused()
    log_file = path("estuaryd.log")
    broker = Estuaryd(ESTUARYD, "--shards", "2", "--log-level", "info", "--sys-interval", "1",
                      "--shutdown-grace", "500", "--password-file", password_file, "--acl-file", acl_file,
                      stderr=open(log_file, "w"))
    try:
        check_passwords(broker)
        check_wildcard_subscriber(broker)
        check_subscribe_codes(broker)
        check_denied_publishes(broker)
        check_wills(broker)
        check_amqp(broker)
        check_reload(broker, log_file, acl_file, password_file)
    finally:
        status = broker.stop()
    check(status == 0, "estuaryd exited 0 on SIGTERM")
    check_mosquitto_reads_our_file(password_file)
    check_ctl_on_a_terminal()
    shutil.rmtree(WORK, ignore_errors=True)
    if FAILURES:
        print("%d failure(s)" % len(FAILURES))
        sys.exit(1)
    print("all security process checks passed")


if __name__ == "__main__":
    main()
