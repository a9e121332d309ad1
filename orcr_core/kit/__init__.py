"""The provider kit: what a provider (or driver) plugin builds on, besides the contracts.

A third party imports these modules directly (docs/plugins/kit.md says what each
offers): :mod:`~orcr_core.kit.adapter_helpers` (``JsonlAdapter`` and the argv and
usage helpers), :mod:`~orcr_core.kit.jsonl_tail` (incremental JSONL reading),
:mod:`~orcr_core.kit.screens` (menus and the trust question on a TUI's screen),
:mod:`~orcr_core.kit.versions` (version pinning), :mod:`~orcr_core.kit.argv` (the
program behind ``env``/``nice``) and :mod:`~orcr_core.kit.testing` (test helpers).
Importing the package imports none of them.
"""
