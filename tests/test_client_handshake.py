"""A server that dies between accepting a connection and answering its hello.

``orcr agent wait`` started just as the server was SIGKILLed exited 6 with "the orcr
server closed the connection (Broken pipe)": the kill landed in the SDK's handshake,
which, unlike the watch it then opens, did not look for the next server
(test_watch_restart.py's ``test_cli_wait_survives_a_server_sigkill`` failed so, once
in a few runs on a loaded machine). A dropped hello now connects again, and a verb
autostarts the server that replaces the dead one.
"""

from __future__ import annotations

import socket
import threading


def test_a_verb_whose_hello_the_server_dropped_reaches_the_next_server(orcr_home):
    orcr_home.socket.parent.mkdir(parents=True, exist_ok=True)
    dying = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dying.bind(str(orcr_home.socket))
    dying.listen(1)
    accepted = threading.Event()

    def accept_then_die():
        conn, _ = dying.accept()
        accepted.set()
        conn.close()  # killed before it answered: the hello gets EOF or EPIPE
        dying.close()  # its socket file stays behind, as after a SIGKILL

    t = threading.Thread(target=accept_then_die, daemon=True)
    t.start()
    try:
        r = orcr_home.run("agent", "ls", timeout=90)
        assert accepted.is_set()
        assert r.returncode == 0, r.stderr
        assert orcr_home.run("server", "status", check=True).returncode == 0
    finally:
        orcr_home.run("server", "stop")
        t.join(5)
