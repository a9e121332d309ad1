"""The ``providers`` plugin's hook: the ``echo`` and ``command`` providers.

Kept out of the package's ``__init__``: the echo agent runs as
``python -m orcr_providers.echo_agent``, which imports the package first, and a hook
implementation there would load pluggy (~15 ms) into every echo agent's start."""

import orcr_core


@orcr_core.hookimpl
def register_providers(register):
    from orcr_providers.command import CommandProvider
    from orcr_providers.echo import EchoProvider

    register(EchoProvider())
    register(CommandProvider())
