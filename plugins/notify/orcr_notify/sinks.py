"""The four bundled sinks. Each is a class: ``Sink(options, context)`` raises
``ValueError`` on a bad option; :meth:`make` returns None when the options
leave the sink off. ``send(note)`` delivers or raises."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

TIMEOUT = 10.0  # seconds for one delivery attempt


def _bool(options: dict, key: str, name: str, default: bool) -> bool:
    value = options.get(key, default)
    if not isinstance(value, bool):
        raise ValueError(f"notify.{name}.{key} = {value!r}: use true or false")
    return value


def _timeout(options: dict, name: str, default: float = TIMEOUT) -> float:
    value = options.get("timeout", default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 60:
        raise ValueError(f"notify.{name}.timeout = {value!r}: use seconds from 1 to 60")
    return float(value)


def _unknown(options: dict, name: str, known: tuple[str, ...]) -> None:
    extra = sorted(set(options) - set(known))
    if extra:
        raise ValueError(f"notify.{name}: unknown option {extra[0]!r}; known: {', '.join(known)}")


class Webhook:
    """An HTTP POST of the notification as JSON (``format = "orcr"``), or a Slack
    (``"slack"``: ``{"text": ...}``) or ntfy (``"ntfy"``: the text as the body, the
    title in a header) compatible body. ``Idempotency-Key`` carries the key."""

    name = "webhook"
    FORMATS = ("orcr", "slack", "ntfy")

    def __new__(cls, options: dict, context):
        _unknown(options, cls.name, ("url", "format", "timeout"))
        url = options.get("url")
        if not url:
            return None
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"notify.webhook.url = {url!r}: use an http:// or https:// URL")
        fmt = options.get("format", "orcr")
        if fmt not in cls.FORMATS:
            raise ValueError(
                f"notify.webhook.format = {fmt!r}: use one of {', '.join(cls.FORMATS)}"
            )
        self = super().__new__(cls)
        self.url, self.format, self.timeout = url, fmt, _timeout(options, cls.name)
        return self

    def body(self, note: dict) -> tuple[bytes, dict]:
        headers = {"Idempotency-Key": note["key"], "User-Agent": "orcr-notify"}
        if self.format == "slack":
            text = f"*{note['title']}*\n{note['text']}\n`{note['action']}`"
            return json.dumps({"text": text}).encode(), {
                **headers,
                "Content-Type": "application/json",
            }
        if self.format == "ntfy":
            return f"{note['text']}\n{note['action']}".encode(), {
                **headers,
                "Title": note["title"].encode("ascii", "replace").decode(),
                "Tags": note["rule"],
                "Content-Type": "text/plain; charset=utf-8",
            }
        return json.dumps(note).encode(), {**headers, "Content-Type": "application/json"}

    def send(self, note: dict) -> str:
        # here, not at the top: urllib.request pulls http.client and ssl (~1.3 MiB of
        # an idle server's memory, bench/idle.py) into every server, webhook or not
        import urllib.error
        import urllib.request

        data, headers = self.body(note)
        req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return f"HTTP {resp.status}"
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"{self.url} answered HTTP {exc.code}") from None


class Command:
    """Runs ``argv`` (no shell) with the notification as JSON on stdin; exit 0 is
    delivered."""

    name = "command"

    def __new__(cls, options: dict, context):
        _unknown(options, cls.name, ("argv", "timeout"))
        argv = options.get("argv")
        if argv is None:
            return None
        if (
            not isinstance(argv, list)
            or not argv
            or not all(isinstance(a, str) and a for a in argv)
        ):
            raise ValueError(f"notify.command.argv = {argv!r}: use a non-empty list of strings")
        self = super().__new__(cls)
        self.argv, self.timeout = argv, _timeout(options, cls.name, 30.0)
        return self

    def send(self, note: dict) -> str:
        try:
            r = subprocess.run(
                self.argv,
                input=json.dumps(note),
                capture_output=True,
                text=True,
                timeout=self.timeout,
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{self.argv[0]} did not exit within {self.timeout:g}s") from None
        if r.returncode != 0:
            tail = (r.stderr or r.stdout).strip()[-200:]
            raise RuntimeError(f"{self.argv[0]} exited {r.returncode}: {tail}")
        return f"{self.argv[0]} exited 0"


def gvariant_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


class Desktop:
    """A desktop notification: the freedesktop notification service over the
    session D-Bus (``gdbus``, else ``notify-send``); ``osascript`` on macOS. Off
    unless ``notify.desktop.enabled = true`` (a server is often headless)."""

    name = "desktop"

    def __new__(cls, options: dict, context):
        _unknown(options, cls.name, ("enabled", "timeout"))
        if not _bool(options, "enabled", cls.name, False):
            return None
        self = super().__new__(cls)
        self.timeout = _timeout(options, cls.name)
        return self

    def argv(self, note: dict) -> list[str]:
        title, body = note["title"], f"{note['text']}\n{note['action']}"
        if sys.platform == "darwin":
            script = f"display notification {json.dumps(body)} with title {json.dumps(title)}"
            return ["osascript", "-e", script]
        if shutil.which("gdbus"):
            return [
                "gdbus", "call", "--session",
                "--dest", "org.freedesktop.Notifications",
                "--object-path", "/org/freedesktop/Notifications",
                "--method", "org.freedesktop.Notifications.Notify",
                "'orcr'", "uint32 0", "''",
                gvariant_string(title), gvariant_string(body),
                "@as []", "@a{sv} {}", "int32 -1",
            ]  # fmt: skip
        if shutil.which("notify-send"):
            return ["notify-send", "--app-name=orcr", title, body]
        raise RuntimeError("no gdbus or notify-send on PATH (apt-get install libglib2.0-bin)")

    def send(self, note: dict) -> str:
        argv = self.argv(note)
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{argv[0]} did not answer within {self.timeout:g}s") from None
        if r.returncode != 0:
            raise RuntimeError(f"{argv[0]} exited {r.returncode}: {r.stderr.strip()[-200:]}")
        return r.stdout.strip() or f"{argv[0]} exited 0"


class Herdr:
    """herdr's own notification (socket method ``notification.show``) through
    orcr's herdr driver; on unless ``notify.herdr.enabled = false``, and only
    when the driver is herdr."""

    name = "herdr"
    TITLE, BODY = 80, 240  # herdr trims to these

    def __new__(cls, options: dict, context):
        _unknown(options, cls.name, ("enabled", "sound"))
        if not _bool(options, "enabled", cls.name, True):
            return None
        sound = options.get("sound", "request")
        if sound not in ("none", "done", "request"):
            raise ValueError(f"notify.herdr.sound = {sound!r}: use none, done or request")
        wanted = context.config.get("driver.name", "auto")
        if wanted == "auto":
            try:
                from orcr_herdr.driver import HerdrDriver
            except ImportError:  # the herdr plugin is not installed
                return None
            if not HerdrDriver.available(context.config)[0]:
                return None
        elif wanted != "herdr":
            return None
        self = super().__new__(cls)
        self.context, self.sound = context, sound
        return self

    def send(self, note: dict) -> str:
        drv = self.context.driver()
        if drv is None or drv.name != "herdr":
            raise RuntimeError("orcr's herdr driver is not running")
        params = {
            "title": note["title"][: self.TITLE],
            "body": f"{note['text']} · {note['action']}"[: self.BODY],
            "sound": self.sound,
        }
        result = drv.request("notification.show", params)
        return f"herdr: {result.get('reason', 'shown')}"
