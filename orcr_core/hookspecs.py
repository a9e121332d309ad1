"""Every orcr hook, in one place.

Plugins implement these with ``@orcr_core.hookimpl``. Hooks grow by new optional
arguments only (pluggy matches implementations by argument name), so an older
plugin keeps working when a hook gains an argument.

Registration hooks take a ``register`` callback instead of returning values:
the core validates what is registered and refuses a duplicate name loudly,
naming both plugins (see :mod:`orcr_core.pm.plugins`).
"""

from pluggy import HookimplMarker, HookspecMarker

hookspec = HookspecMarker("orcr")
hookimpl = HookimplMarker("orcr")


@hookspec
def register_drivers(register):
    """Register multiplexer drivers.

    Called once when the plugin manager's registries are built (server start,
    ``orcr doctor``, ``orcr plugins``). Call ``register(factory)`` once per
    driver, where ``factory`` is a class or callable with a ``name`` attribute
    (``[a-z0-9_]+``) that, called as ``factory(config)`` with the loaded
    :class:`orcr_core.config.Config`, returns an object implementing
    :class:`orcr_core.contracts.Driver`. A factory may also carry
    ``available() -> tuple[bool, str]`` telling whether it can run on this
    machine and why; ``[driver] name = "auto"`` uses it.

    Returns nothing. A name registered twice is an error naming both plugins.

    versionadded: 0.1
    """


@hookspec
def register_providers(register):
    """Register provider adapters.

    Called like :func:`register_drivers`. Call ``register(provider)`` once per
    provider with an object implementing
    :class:`orcr_core.contracts.Provider` (its ``name`` is the value of
    ``orcr agent run --provider`` and a valid ``[concurrency]`` key).

    Returns nothing. A name registered twice is an error naming both plugins.

    versionadded: 0.1
    """


@hookspec
def register_commands(cli):
    """Add commands to the ``orcr`` command line.

    ``cli`` is the top-level :class:`click.Group`; add a command or a group with
    ``cli.add_command(...)`` or the ``@cli.command()`` / ``@cli.group()``
    decorators, as llm and datasette plugins do. Called the first time the
    command line needs a name it does not know (``orcr tasks ...``) or lists its
    commands (``orcr --help``), never on the client path (``orcr agent run``
    loads no plugin). Import heavy modules inside the command, not at the top.

    Returns nothing. A name that is already a built-in command or was added by
    another plugin is an error naming both, never a silent override.

    versionadded: 0.1
    """


@hookspec
def register_notify_sinks(register):
    """Register notification sinks (where ``[notify]`` notifications go).

    Called like :func:`register_drivers`, in the server and in ``orcr notify``.
    Call ``register(factory)`` once per sink, where ``factory`` has a ``name``
    (``[a-z0-9_]+``; its options are the config keys ``notify.<name>.<option>``)
    and, called as ``factory(options, context)``, returns a sink or ``None`` when
    ``options`` (a dict, ``{}`` when the user set none) leave it off. A bad
    option raises ``ValueError`` naming the key and what is allowed: the sink is
    then reported off with that message (``orcr notify ls``), the others run.
    ``context`` has ``config`` (the loaded config) and ``driver()`` (the server's
    multiplexer driver, or None).

    A sink has one method, ``send(note) -> str | None``: deliver one
    notification (the JSON object documented in docs/notifications.md; its
    ``key`` is the idempotency key) and return a short receipt, or raise any
    exception when it was not delivered. Each sink runs in a thread of its own,
    so a slow sink delays only itself; it must still give up within about 30
    seconds. A raise is retried with backoff until ``notify.retry_for``, so a
    receiver may see a notification twice (after a crash between the send and
    its record): it drops the second by ``key``.

    Returns nothing. A name registered twice is an error naming both plugins.

    versionadded: 0.2
    """
