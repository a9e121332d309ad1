"""Workspaces: a checkout of its own for each writing agent (issue 22).

``orcr agent run --worktree`` gives the agent a git worktree on a new branch, or
a jj workspace when the repository is a jj repo. The checkout is recorded in the
row (and launch.json) at admission, made by the spawn pipeline as a step with its
own intent/applied events (:mod:`.step`), and kept or removed when the agent
ends (:mod:`.finish`): kept whenever it holds anything that is not on another
branch, so no commit is ever lost. :mod:`.vcs` hides git and jj behind one
interface; :mod:`.plan` is what admission knows without running either.
"""
