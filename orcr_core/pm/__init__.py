"""The plugin manager: loading plugins through the ``orcr`` entry-point group
(``plugins``: the registry of drivers, providers and commands), holding every
provider to its contract (``provider_guard``) and choosing the multiplexer driver
(``drivers``). Importing the package imports none of them (nor pluggy)."""
