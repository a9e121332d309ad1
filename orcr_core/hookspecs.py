"""Every orcr hook, in one place.

Plugins implement these with ``@orcr_core.hookimpl``. Hooks grow by new optional
arguments only (pluggy matches implementations by argument name), so an older
plugin keeps working when a hook gains an argument.

Registration hooks take a ``register`` callback instead of returning values:
the core validates what is registered and refuses a duplicate name loudly,
naming both plugins (see :mod:`orcr_core.plugins`).
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
