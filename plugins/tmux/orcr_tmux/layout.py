"""The names orcr gives things on its tmux server (see :mod:`orcr_tmux.driver`):
the session prefixes, the pane and window options that mark orcr's panes, the
placeholder's argv and a detached window's size."""

from __future__ import annotations

SESSION_PREFIX = "orcr-"
#: The parking session is ``orcr-parked-<instance id>``: the ``-`` after
#: ``parked`` never occurs in a level-1 segment, so it cannot be a workspace.
PARKING_PREFIX = "orcr-parked-"
NOT_MINE = "orcr-not-mine"
LABEL_OPTION = "@orcr_path"
ROLE_OPTION = "@orcr_role"
INSTANCE_OPTION = "@orcr_instance"
TOKEN_OPTION = "@orcr_token"
PLACEHOLDER_ARGV = ("sleep", "2147483647")  # ~68 years; no "infinity" on BSD sleep
#: Detached windows get this size (tmux's own default is 80x24, cramped for TUIs);
#: an attaching client resizes them to its terminal.
WIDTH, HEIGHT = "200", "50"
