"""Landing: ``orcr tasks land``, a merge queue over a queue's done/ tasks
(docs/tasks.md, "Landing"). :mod:`.lander` is the loop, :mod:`.git` the repository
side (scratch checkouts, the compare-and-swap, intent refs), :mod:`.batch` the
``--batch K`` landings (one check for K tasks, bisection on red), :mod:`.moves` the
queue moves that end a lander's claim, :mod:`.cli` the command."""
