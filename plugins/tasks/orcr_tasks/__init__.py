"""orcr tasks: the crash-safe task queue of the 100-agent playbook (files or PostgreSQL).

A bundled plugin written the way a third party would: it adds the ``orcr tasks``
command group through the ``register_commands`` hook, and starts its agents
through orcr's public SDK. The queue is a directory of Markdown task files, a
task's state the folder it is in, or a PostgreSQL table (docs/tasks.md).
"""

import orcr_core

__version__ = "0.1.0"


@orcr_core.hookimpl
def register_commands(cli):
    from orcr_tasks.cli import tasks
    from orcr_tasks.land.cli import tasks_land

    tasks.add_command(tasks_land)
    cli.add_command(tasks)
