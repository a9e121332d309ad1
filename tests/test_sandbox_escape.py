"""Escape tests: real commands inside a real bubblewrap sandbox, built by the same code
that wraps an agent's argv (orcr_core.sandbox.policy.wrap), each trying one way out.

A fake home (``$HOME`` of the test) holds a planted ``~/.ssh`` key, ``~/.aws``, a
secret file; a fake orcr data dir holds a listening unix socket (orcr's socket), a
store file and another agent's transcript; the agent's cwd is its checkout. Each
escape must fail and each allowed path must still work.

Planted holes (each made in the code, the test run, restored; see docs/internals.md):
- deny list dropped (``DENY_ALWAYS = ()``) with allow_read = ["~"] -> test_ssh_key_hidden_even_when_home_allowed fails
- home not covered (``covers = list(hide)``) -> test_home_secrets_hidden fails
- ``--unshare-net`` dropped -> test_network_refused fails
- orcr's dirs not hidden (``hidden_dirs`` returns []) -> test_orcr_store_and_socket_hidden fails
- ``--unshare-pid`` dropped -> test_signal_outside_refused and test_child_dies_with_sandbox fail
- root bound read-write (``--bind / /``) -> test_writes_confined_to_cwd fails
- no private /tmp -> test_private_tmp fails
- environment not cut (``enter.environment`` keeps all) -> test_env_cut_to_allowlist fails
- orcr's dirs hidden before the binds (the old order) -> test_wide_cwd_does_not_expose_orcr fails
- multiplexer sockets not denied (``mux_sockets`` returns []) -> test_multiplexer_socket_unreachable fails
- proxy allows every host (``allowed`` returns True) -> test_allow_net_hosts_through_the_proxy_only fails
- the launcher exec'ing bubblewrap (no fork) -> test_the_sandbox_outlives_the_thread_that_started_it fails (rc -9)
- ``launch.json`` not kept read-only (``keep`` ignored) -> test_launch_json_cannot_be_changed_from_inside fails
- the socket folder bound read-write -> test_the_short_restore_command_runs_the_same_sandbox fails
"""

from __future__ import annotations

import http.server
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from orcr_core.sandbox import bwrap, policy

pytestmark = pytest.mark.skipif(
    bwrap.unavailable() is not None, reason=f"no sandbox engine: {bwrap.unavailable()}"
)


class _Config:
    def __init__(self, data: dict):
        self.data = data

    def get(self, key: str, default=None):
        node = self.data
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node


@pytest.fixture
def base():
    """Outside /tmp (which the sandbox empties anyway): a hole in the home or orcr
    covers must show, not be hidden by the private /tmp."""
    d = Path(tempfile.mkdtemp(prefix="orcr-sbx-", dir="/var/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def box(base, monkeypatch):
    """A planted world and a runner: ``run(code)`` runs python code sandboxed as an agent."""
    short_tmp = base
    home = short_tmp / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("aws_secret\n")
    (home / "notes.txt").write_text("home secret\n")
    (home / ".netrc").write_text("machine x password y\n")
    orcr = short_tmp / "orcr"
    agents = orcr / "agents"
    mine = agents / "me"
    other = agents / "other"
    for d in (mine, other, orcr / "run"):
        d.mkdir(parents=True)
    (other / "echo.jsonl").write_text('{"secret": "other agent"}\n')
    (orcr / "store.db").write_text("store")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(orcr / "run" / "orcr.sock"))
    sock.listen(8)
    cwd = short_tmp / "work"
    cwd.mkdir()
    outside = short_tmp / "outside"
    outside.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ORCR_HOME", str(orcr))
    monkeypatch.delenv("ORCR_SOCKET", raising=False)
    monkeypatch.setenv("SECRET_TOKEN", "s3cret")
    monkeypatch.setenv("ORCR_ID", "x")  # as the multiplexer sets it in the pane

    def run(code: str, config: dict | None = None, timeout: float = 20, tmux_socket="", at=cwd):
        cfg = _Config({"sandbox": config or {}, "tmux": {"socket": tmux_socket}})
        pol = policy.admission(True, "echo", str(at), str(mine), cfg)
        provider = SimpleNamespace(sandbox_paths=lambda spec: [])
        argv = policy.wrap(pol, provider, None, [sys.executable, "-c", code], {"ORCR_ID": "x"})
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd)

    yield SimpleNamespace(
        run=run, home=home, orcr=orcr, mine=mine, other=other, cwd=cwd, outside=outside
    )
    sock.close()


def _fails(result, *words):
    assert result.returncode != 0, f"escaped: {result.stdout!r}"
    assert any(w in result.stderr for w in words), result.stderr


def test_home_secrets_hidden(box):
    """~/.ssh, ~/.aws, ~/.netrc and the rest of home are not there (planted: home not covered)."""
    for path in ("/.ssh/id_ed25519", "/.aws/credentials", "/notes.txt"):
        _fails(box.run(f"print(open({str(box.home) + path!r}).read())"), "No such file")
    r = box.run(f"print(repr(open({str(box.home / '.netrc')!r}).read()))")
    assert "password" not in r.stdout


def test_ssh_key_hidden_even_when_home_allowed(box):
    """allow_read = ["~"] and allow_write = ["~"] never expose the deny list."""
    r = box.run(
        f"import os; print(os.listdir({str(box.home / '.ssh')!r}));"
        f"print(open({str(box.home / 'notes.txt')!r}).read())",
        {"allow_read": ["~"], "allow_write": ["~"]},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n", 1) == ["[]", "home secret\n\n"]  # the allowed rest still reads


def test_writes_confined_to_cwd(box):
    """Its cwd and data dir are writable; a folder outside, /usr and home are not."""
    r = box.run(
        "open('made.txt', 'w').write('ok');"
        f"open({str(box.mine / 'state')!r}, 'w').write('ok');"
        "open('/tmp/scratch', 'w').write('ok')"
    )
    assert r.returncode == 0, r.stderr
    assert (box.cwd / "made.txt").read_text() == "ok"
    assert (box.mine / "state").read_text() == "ok"
    for target in (box.outside / "x", "/usr/x"):
        _fails(box.run(f"open({str(target)!r}, 'w')"), "Read-only", "No such file")
    assert not (box.outside / "x").exists()
    box.run(f"open({str(box.home / 'dropped')!r}, 'w').write('x')")
    assert not (box.home / "dropped").exists()


def test_private_tmp(box, short_tmp):
    """The host's /tmp (this test's folder there, tmux sockets) is not there."""
    marker = short_tmp / "planted"
    marker.write_text("x")
    _fails(box.run(f"open({str(marker)!r}).read()"), "No such file")


def test_orcr_store_and_socket_hidden(box):
    """orcr's store, its socket and another agent's transcript are not reachable."""
    for path in ("store.db", "agents/other/echo.jsonl"):
        _fails(box.run(f"open({str(box.orcr / path)!r}).read()"), "No such file")
    code = (
        "import socket; s = socket.socket(socket.AF_UNIX);"
        f"s.connect({str(box.orcr / 'run' / 'orcr.sock')!r})"
    )
    _fails(box.run(code), "No such file", "ConnectionRefused")


def test_wide_cwd_does_not_expose_orcr(box, base):
    """A cwd above everything (its checkout holds home and orcr's dirs, as a cwd of ~
    holds ~/.local/share/orcr): orcr's store, socket and other agents stay hidden, the
    deny list holds, its own data dir still writes (planted: orcr's dirs hidden before
    the binds -> the store reads)."""
    for path in ("store.db", "agents/other/echo.jsonl", "run/orcr.sock"):
        r = box.run(f"import os; print(os.path.exists({str(box.orcr / path)!r}))", at=base)
        assert r.stdout.strip() == "False", (path, r.stderr)
    r = box.run(f"import os; print(os.listdir({str(box.home / '.ssh')!r}))", at=base)
    assert r.stdout.strip() == "[]", r.stderr
    r = box.run(f"open({str(box.mine / 'ok')!r}, 'w').write('x')", at=base)
    assert r.returncode == 0 and (box.mine / "ok").exists(), r.stderr


def test_multiplexer_socket_unreachable(box, base):
    """A tmux server socket orcr uses (``tmux.socket`` a path outside /tmp and home) is
    not connectable: through it an agent could type into every pane (planted: no
    mux_sockets in the deny list -> connects)."""
    path = base / "mux.sock"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(path))
    srv.listen(1)
    try:
        code = f"import socket; socket.socket(socket.AF_UNIX).connect({str(path)!r})"
        _fails(box.run(code, tmux_socket=str(path)), "Connection refused", "ConnectionRefused")
    finally:
        srv.close()


def test_network_refused(box):
    """The machine's loopback (a listening port here) and the outside are unreachable."""
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    threading.Thread(target=lambda: srv.accept(), daemon=True).start()
    try:
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)"
        _fails(box.run(code), "ConnectionRefused", "Network is unreachable")
        code = "import socket; socket.create_connection(('1.1.1.1', 443), timeout=3)"
        _fails(box.run(code), "Network is unreachable", "timed out")
    finally:
        srv.close()


def test_env_cut_to_allowlist(box):
    """A credential in the environment does not follow the agent in; its identity does."""
    r = box.run("import os; print(os.environ.get('SECRET_TOKEN'), os.environ.get('ORCR_ID'))")
    assert r.stdout.split() == ["None", "x"], r.stderr
    r = box.run("import os; print(os.environ.get('SECRET_TOKEN'))", {"pass_env": ["SECRET_TOKEN"]})
    assert r.stdout.strip() == "s3cret"


def test_signal_outside_refused(box):
    """A process outside the sandbox (this test) cannot be signalled: it is not visible."""
    _fails(box.run(f"import os; os.kill({os.getpid()}, 0)"), "ProcessLookupError")


def test_child_dies_with_sandbox(box):
    """A detached grandchild (setsid, double fork) ends with the sandbox; none escapes."""
    mark = f"{4000 + os.getpid() % 1000}.{time.time_ns() % 10**6}"  # this run's own
    code = (
        "import subprocess, sys;"
        f"p = subprocess.Popen(['setsid', 'sleep', '{mark}'], start_new_session=True);"
        f"open({str(box.cwd / 'child')!r}, 'w').write('started')"
    )
    r = box.run(code)
    assert r.returncode == 0, r.stderr
    assert (box.cwd / "child").read_text() == "started"
    leftover = subprocess.run(["pgrep", "-f", f"sleep {mark}"], capture_output=True, text=True)
    for pid in leftover.stdout.split():  # a planted hole: end what escaped
        os.kill(int(pid), 9)
    assert leftover.stdout.strip() == "", "a child outlived its sandbox"


def test_unavailable_engine_refused(box):
    """A missing engine is refused at admission with the install line; never unconfined."""
    with pytest.raises(policy.SandboxError) as exc:
        policy.admission(
            True, "echo", str(box.cwd), str(box.mine),
            _Config({"sandbox": {"bwrap": "/nonexistent/bwrap"}}),
        )  # fmt: skip
    assert exc.value.code == "sandbox_unavailable"
    assert "apt-get install bubblewrap" in str(exc.value)


def test_the_sandbox_outlives_the_thread_that_started_it(box):
    """A multiplexer may start a pane from a worker thread that ends soon after (herdr's
    emulator serves each request on one). bubblewrap's ``--die-with-parent`` is
    signalled when that *thread* exits: the agent was SIGKILLed right after its start
    (the herdr legs' "pane is gone before its prompt was pasted", and a resumed agent
    that "exited", at load 30-40); the launcher now runs bubblewrap as its child.
    Planted: enter.py exec'ing bubblewrap (``_exec`` for ``_run``) -> rc -9."""
    pol = policy.admission(True, "echo", str(box.cwd), str(box.mine),
                           _Config({"sandbox": {}, "tmux": {"socket": ""}}))  # fmt: skip
    provider = SimpleNamespace(sandbox_paths=lambda spec: [])
    code = "import time; time.sleep(30)"
    argv = policy.wrap(pol, provider, None, [sys.executable, "-c", code], {"ORCR_ID": "x"})
    started = []

    def start():
        started.append(subprocess.Popen(argv, cwd=box.cwd))
        time.sleep(1.0)  # bubblewrap is up before this thread ends

    worker = threading.Thread(target=start)
    worker.start()
    worker.join()
    time.sleep(0.5)
    proc = started[0]
    try:
        assert proc.poll() is None, f"the sandbox ended with its starting thread: {proc.poll()}"
    finally:
        proc.kill()
        proc.wait()


def test_launch_json_cannot_be_changed_from_inside(box):
    """Its data dir is writable (the CLI's transcript), but ``launch.json`` there is what
    orcr starts the agent with next (its sandbox and argv, at ``agent resume`` or a
    native restore): written or replaced from inside, the resumed agent would run
    unconfined. Found here: it could be.
    Planted: ``keep`` ignored in bwrap.argv -> written and replaced say ESCAPED."""
    launch = box.mine / "launch.json"
    launch.write_text('{"sandbox": {"engine": "bwrap"}}')
    code = (
        f"import os\nlj = {str(launch)!r}\n"
        "try:\n    open(lj, 'w').write('{}'); print('ESCAPED')\nexcept OSError: print('kept')\n"
        "open(lj + '.new', 'w').write('{}')\n"
        "try:\n    os.replace(lj + '.new', lj); print('ESCAPED')\n"
        "except OSError: print('kept')\n"
        "open(os.path.dirname(lj) + '/echo.jsonl', 'w').write('ok')\n"
    )
    out = box.run(code)
    assert out.stdout.split() == ["kept", "kept"], (out.stdout, out.stderr)
    assert launch.read_text() == '{"sandbox": {"engine": "bwrap"}}'
    assert (box.mine / "echo.jsonl").read_text() == "ok"  # the rest of it is writable


def test_the_short_restore_command_runs_the_same_sandbox(box):
    """herdr's native restore takes at most 64 elements (8 KiB): ``restore_argv`` puts
    the launcher's arguments in a file in the agent's socket folder. The short command
    runs the same sandbox (the key still hidden), and the agent cannot change that file
    from inside (it would run unconfined at the next restore).
    Planted: the socket folder bound read-write -> the rewrite says ESCAPED."""
    cfg = _Config({"sandbox": {}, "tmux": {"socket": ""}})
    pol = policy.admission(True, "echo", str(box.cwd), str(box.mine), cfg)
    os.makedirs(pol["socket_dir"])  # the server makes it before the pane starts
    code = (
        "import os\n"
        "try:\n    open(os.environ['HOME'] + '/.ssh/id_ed25519').read(); print('KEY')\n"
        "except OSError: print('hidden')\n"
        "try:\n    open('/run/orcr/launch.args', 'w').write('[]'); print('ESCAPED')\n"
        "except OSError: print('kept')\n"
    )
    provider = SimpleNamespace(sandbox_paths=lambda spec: [])
    argv = policy.wrap(pol, provider, None, [sys.executable, "-c", code], {"ORCR_ID": "x"})
    short = policy.restore_argv(pol, argv)
    assert len(argv) > 64 and len(short) <= 8 and sum(map(len, short)) < 8192, short
    assert oct(os.stat(short[-1]).st_mode & 0o777) == "0o600"
    out = subprocess.run(short, capture_output=True, text=True, timeout=20, cwd=box.cwd)
    assert out.stdout.split() == ["hidden", "kept"], out.stderr
    assert policy.restore_argv(None, argv) == argv  # not sandboxed: unchanged


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello from the allowed host"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def two_servers():
    """Two HTTP servers on the machine's loopback: the first is allowed, the second not."""
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello) for _ in range(2)]
    for srv in servers:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield [srv.server_address[1] for srv in servers]
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def test_allow_net_hosts_through_the_proxy_only(box, two_servers):
    """allow_net = ["127.0.0.1:<first>"]: the first answers through the proxy (HTTP and
    CONNECT); the second is refused with 403 both ways; a direct connection, even to the
    allowed port, reaches nothing (planted: proxy allows all -> the second answers)."""
    ok, other = two_servers
    code = f"""
import socket, urllib.error, urllib.request
print(urllib.request.urlopen("http://127.0.0.1:{ok}/", timeout=10).read().decode())
try:
    urllib.request.urlopen("http://127.0.0.1:{other}/", timeout=10)
    print("other open")
except urllib.error.HTTPError as exc:
    print(exc.code)
for port in ({ok}, {other}):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\\r\\n\\r\\n" % port)
    print(s.recv(100).split()[1].decode())
try:
    socket.create_connection(("127.0.0.1", {ok}), timeout=3)
    print("direct open")
except OSError:
    print("direct refused")
"""
    r = box.run(code, {"allow_net": [f"127.0.0.1:{ok}"]})
    assert r.stdout.split("\n")[:5] == [
        "hello from the allowed host", "403", "200", "403", "direct refused"
    ], r.stderr  # fmt: skip


def test_star_stands_alone(box):
    """allow_net = ["*", "host"] is refused: the whole network or a list, not both."""
    with pytest.raises(policy.SandboxError) as exc:
        box.run("pass", {"allow_net": ["*", "api.anthropic.com"]})
    assert exc.value.code == "invalid_sandbox"


def test_provider_hosts_are_the_default(box):
    """No allow_net in the config: the provider's declared model API hosts."""
    pol = policy.admission(True, "claude", str(box.cwd), str(box.mine), _Config({}),
                           ("api.anthropic.com",))  # fmt: skip
    assert pol["allow_net"] == ["api.anthropic.com"]
    pol = policy.admission(True, "claude", str(box.cwd), str(box.mine),
                           _Config({"sandbox": {"allow_net": []}}), ("api.anthropic.com",))  # fmt: skip
    assert pol["allow_net"] == []


def test_off_unless_asked():
    """No request and no default: no sandbox; a provider's default wins over the global."""
    cfg = _Config({"sandbox": {"default": True, "echo": {"default": False}}})
    assert policy.wanted(None, "echo", cfg) is False
    assert policy.wanted(None, "claude", cfg) is True
    assert policy.wanted(True, "echo", cfg) is True
    assert policy.wanted(None, "echo", _Config({})) is False
    assert Path(policy.__file__).parent.name == "sandbox"


def test_allow_net_entries():
    """A bare host allows 443 and 80; host:port that port only; names match whole."""
    from orcr_core.sandbox.proxy import allowed

    allow = ["api.anthropic.com", "127.0.0.1:8080", "[::1]:9000"]
    assert allowed("API.anthropic.com", 443, allow) and allowed("api.anthropic.com", 80, allow)
    assert not allowed("api.anthropic.com", 22, allow)
    assert not allowed("evil-api.anthropic.com", 443, allow)
    assert not allowed("api.anthropic.com.evil.com", 443, allow)
    assert allowed("127.0.0.1", 8080, allow) and not allowed("127.0.0.1", 8081, allow)
    assert allowed("[::1]", 9000, allow) and not allowed("::1", 443, allow)


def test_doctor_row(tmp_path):
    """doctor's sandbox row: ok with the engine; without it a warning, or a failure when
    the config turns the sandbox on by default, with the install line as the fix."""
    from orcr_core.cli.doctor import Doctor
    from orcr_core.config import DEFAULTS, Config

    def row(data):
        d = Doctor()
        d.config = Config({**DEFAULTS, **data}, tmp_path / "c.toml")
        d.check_sandbox()
        return d.rows[0]

    assert row({}).level == "ok"
    missing = {"bwrap": "/nonexistent/bwrap"}
    assert row({"sandbox": missing}).level == "warn"
    failed = row({"sandbox": {**missing, "claude": {"default": True}}})
    assert failed.level == "fail" and "apt-get install bubblewrap" in failed.fix
