"""orcr's bundled generic providers: ``echo`` (a tiny real agent) and ``command`` (any argv)."""

import orcr_core

__version__ = "0.1.0"


@orcr_core.hookimpl
def register_providers(register):
    from orcr_providers.command import CommandProvider
    from orcr_providers.echo import EchoProvider

    register(EchoProvider())
    register(CommandProvider())
