"""The socket's one route table (issue 34 item 7): every handler module registers
through ``orcr_core.server.routes.route`` and the listener dispatches from that table."""

from __future__ import annotations

import ast
import pathlib

import pytest

from orcr_core.loops.defs import LoopError
from orcr_core.protocol import ProtocolError
from orcr_core.server import handlers, routes

SERVER = pathlib.Path(handlers.__file__).parent


@pytest.fixture
def scratch():
    """Names added by a test are taken out again: the table is process-wide."""
    before = dict(routes.ROUTES)
    yield
    routes.ROUTES.clear()
    routes.ROUTES.update(before)


class _Conn:
    caller = None  # not a sandboxed agent's socket: no guard


def test_a_method_registered_twice_is_refused(scratch):
    """A second handler for a name is refused when its module is imported, so the
    server never starts with a method silently taken over. Planted: the `if name
    in ROUTES` refusal removed -> fails (the second registration took ``hello``
    over). Planted: a duplicate ``@route("agent.list")`` in usage_handlers ->
    ``import orcr_core.server.handlers`` raises RouteError naming both handlers."""
    with pytest.raises(
        routes.RouteError, match=r"'hello' is registered twice: by .*handlers\.hello"
    ):

        @routes.route("hello")
        def hello(server, conn, rid, params):
            return {}

    assert routes.ROUTES["hello"] is handlers.hello


def test_dispatch_serves_the_route_table(scratch):
    """A method registered with the decorator is answered by ``dispatch``; a
    ``short`` one gets ``(server, params)`` and its ``errors`` become protocol
    errors with their code. Planted: `dispatch` reading a copy of the table taken
    before this registration -> fails (unknown_method)."""

    @routes.route("test.echo", short=True, errors=(LoopError,))
    def echo(server, params):
        if params.get("bad"):
            raise LoopError("loop_not_found", "no loop named x")
        return {"server": server, "params": params}

    got = handlers.dispatch("S", _Conn(), 7, "test.echo", {"a": 1})
    assert got == {"server": "S", "params": {"a": 1}}
    with pytest.raises(ProtocolError) as exc:
        handlers.dispatch("S", _Conn(), 7, "test.echo", {"bad": True})
    assert (exc.value.code, str(exc.value)) == ("loop_not_found", "no loop named x")
    with pytest.raises(ProtocolError, match="unknown method 'test.nope'"):
        handlers.dispatch("S", _Conn(), 7, "test.nope", {})


def test_every_handler_module_registers_through_the_one_decorator():
    """No module of the server keeps a table or a ``method`` decorator of its own,
    and every ``@route`` name in the sources is in the table the listener serves."""
    named = set()
    for path in sorted(SERVER.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "method":
                pytest.fail(f"{path.name} defines its own `method` decorator")
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id.endswith("_HANDLERS") for t in node.targets
            ):
                pytest.fail(f"{path.name} keeps a handler table of its own")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "route"
            ):
                named.add(node.args[0].value)
    assert handlers.HANDLERS is routes.ROUTES
    assert named and named <= set(routes.ROUTES), named - set(routes.ROUTES)
    assert {"hello", "agent.run", "loop.create", "usage.sum", "watch.open"} <= named
