"""``orcr notify``: the notification rules and sinks (docs/notifications.md)."""

from __future__ import annotations

import json as jsonlib
import time

import click

from orcr_core.cli.errors import OrcrCliError


@click.group()
def notify():
    """Notifications: which events are worth one (rules) and where they go (sinks).
    Configure them under [notify]; docs/notifications.md."""


def _call(method: str, **params) -> dict:
    from orcr_core.sdk.client import Client

    with Client() as c:
        return c.call(method, **params)


@notify.command(name="ls")
@click.option("--json", "json_", is_flag=True)
def notify_ls(json_):
    """The rules (on/off, match, longer_than) and the sinks: on or off and why,
    notifications waiting, and the last delivery of each."""
    r = _call("notify.ls")
    if json_:
        click.echo(jsonlib.dumps(r))
        return
    for rule in r["rules"]:
        extra = ""
        if rule["match"]:
            extra += f"  match {','.join(rule['match'])}"
        if rule["longer_than"] not in (0, "0"):
            extra += f"  longer_than {rule['longer_than']}"
        state = "on " if rule["enabled"] else "off"
        click.echo(f"rule {rule['name']:<13} {state}{extra}  ({rule['about']})")
    for s in r["sinks"]:
        if not s["on"]:
            click.echo(f"sink {s['name']:<13} off ({s['off_because']})")
            continue
        last = s["last"]
        if last is None:
            seen = "nothing sent yet"
        else:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last["at"]))
            seen = f"last {last['state']} {when} {last['rule']} key {last['key']}"
            if last["detail"]:
                seen += f" ({last['detail']})"
        test = s.get("last_test")
        if test is not None:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(test["at"]))
            outcome = "ok" if test["ok"] else "FAILED"
            seen += f"; last test {outcome} {when} ({test['detail']})"
        click.echo(f"sink {s['name']:<13} on   waiting {s['waiting']}  {seen}")


@notify.command(name="test")
@click.argument("sink", required=False)
def notify_test(sink):
    """Send a test notification through each sink that is on (or SINK) and say
    what happened. Exits 1 when one failed."""
    r = _call("notify.test", **({"sink": sink} if sink else {}))
    failed = 0
    for res in r["results"]:
        ok = "ok " if res["ok"] else ("" if res["detail"].startswith("off:") else "FAILED ")
        click.echo(f"{res['sink']}: {ok}{res['detail']}")
        failed += not res["ok"] and not res["detail"].startswith("off:")
    if not r["results"]:
        click.echo("no sink is registered")
    if sink and r["results"] and not r["results"][0]["ok"]:
        raise OrcrCliError(f"sink {sink} did not deliver")
    if failed:
        raise OrcrCliError(f"{failed} sink(s) did not deliver")
