"""``python -m orcr_core.server``: run the server in the foreground."""

import sys

from orcr_core.server.foreground import main_foreground

sys.exit(main_foreground())
