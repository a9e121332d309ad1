"""``orcr service``: run the server under the user's service manager.

A systemd user unit on Linux, a launchd agent on macOS. Both run
``orcr server start --foreground`` with the absolute path of the orcr this
command belongs to, ``ORCR_HOME`` when it is set, and the ``PATH`` of the shell
that installed it (so loop runs and agents find their commands). The text of
each file is made in :mod:`orcr_core.service.units`; writing, enabling and
reporting live in :mod:`orcr_core.service.manage`.

Import-light: no peewee, pluggy or croniter.
"""
