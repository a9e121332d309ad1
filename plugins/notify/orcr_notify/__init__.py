"""Notification sinks for orcr: webhook, command, desktop, herdr.

Loaded through the ``orcr`` entry-point group like any pip-installed plugin;
each sink reads its options from ``notify.<name>.<option>`` (docs/notifications.md).
"""

import orcr_core
from orcr_notify.sinks import Command, Desktop, Herdr, Webhook


@orcr_core.hookimpl
def register_notify_sinks(register):
    for sink in (Webhook, Command, Desktop, Herdr):
        register(sink)
