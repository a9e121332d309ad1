"""A freedesktop notification service for tests: owns org.freedesktop.Notifications
on the session bus in DBUS_SESSION_BUS_ADDRESS and appends each Notify call, as a
JSON line, to the file named by argv[1]. Runs under the system python3 with
python3-dbus and python3-gi (Debian), not the venv."""

import json
import sys

import dbus
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

OUT = sys.argv[1]


class Notifications(dbus.service.Object):
    def __init__(self, bus):
        super().__init__(bus, "/org/freedesktop/Notifications")
        self.next_id = 0

    @dbus.service.method(
        "org.freedesktop.Notifications", in_signature="susssasa{sv}i", out_signature="u"
    )
    def Notify(self, app, replaces, icon, summary, body, actions, hints, timeout):
        self.next_id += 1
        with open(OUT, "a") as f:
            f.write(
                json.dumps({"app": str(app), "summary": str(summary), "body": str(body)}) + "\n"
            )
        return dbus.UInt32(self.next_id)

    @dbus.service.method("org.freedesktop.Notifications", out_signature="as")
    def GetCapabilities(self):
        return ["body"]


DBusGMainLoop(set_as_default=True)
bus = dbus.SessionBus()
name = dbus.service.BusName("org.freedesktop.Notifications", bus)
service = Notifications(bus)
print("ready", flush=True)
GLib.MainLoop().run()
