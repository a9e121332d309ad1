"""Loops: durable cron for any command (seed 003).

``cadence`` turns a cron expression and a time zone into UTC fire times (with
cronie's DST rules); ``defs`` creates and pauses loop definitions
(``control`` resumes and removes them); ``runs`` allocates, starts and stops runs; ``supervisor`` is the
tiny process that waits on a run's command and records its exit durably;
``scheduler`` is the server thread that fires loops on a timer; ``recovery``
reconciles loops and runs when the server starts.

This package's ``__init__`` imports nothing: ``zone`` is used on the CLI's
client path and must stay light.
"""
