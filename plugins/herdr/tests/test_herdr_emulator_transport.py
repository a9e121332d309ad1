"""The emulator's socket listener."""

from __future__ import annotations


def test_a_late_stop_leaves_a_newer_servers_socket_file(tmp_path):
    """An emulator that stops after another one took its path (a restart) removes only
    the socket file it bound, never the newer server's."""
    import os
    import socket as _socket

    from orcr_testing.herdr.transport import Listener

    path = str(tmp_path / "herdr.sock")
    old = Listener(path, lambda conn: None)
    old.start()
    old.stopping.set()
    old.sock.shutdown(_socket.SHUT_RDWR)  # it went away without cleaning up (a crash)
    old.sock.close()
    new = Listener(path, lambda conn: None)
    new.start()
    old.stop()  # late
    assert os.path.exists(path)
    probe = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    probe.connect(path)  # the newer server still answers on its file
    probe.close()
    new.stop()
    assert not os.path.exists(path)
