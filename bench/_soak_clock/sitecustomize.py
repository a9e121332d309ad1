"""The soak's wall clock (bench/soak.py, fault ``clock_jump``): every Python process of
the instance under soak runs with this folder on ``PYTHONPATH`` and
``ORCR_SOAK_CLOCK`` naming a file that holds a number of seconds, the offset of its
wall clock from the real one. The soak raises it to make the machine "sleep": the wall
clock jumps forward while the monotonic clock does not (Linux's ``CLOCK_MONOTONIC``
stops during a suspend), as after a real sleep.

Faked: ``time.time``, ``time.time_ns``, ``time.localtime``/``gmtime``/``ctime``/
``asctime``/``strftime`` without a time given, ``datetime.datetime.now``/``utcnow``/
``today``; and files' times, which the kernel keeps in real time: ``os.stat``/``lstat``/
``fstat`` (so ``Path.stat``) report them plus the offset, ``os.utime`` given times
stores them minus it (``os.scandir`` entries' ``stat()`` are not faked). A file's age
is so its real age: a heartbeat written just now is fresh, as after a real resume, but
one written before a jump does not age by the jump as it would across a real sleep.
The file is read at most every 0.1 s (monotonic).
libfaketime (Debian's ``faketime`` 0.9.10) would fake the clock below Python, but with
Python 3.11 its ``clock_nanosleep`` makes every ``time.sleep`` fail with EINVAL.
"""

import datetime as _dt
import os
import time

_PATH = os.environ.get("ORCR_SOAK_CLOCK")

if _PATH:
    _real_time, _real_ns, _mono = time.time, time.time_ns, time.monotonic
    _state = [0.0, float("-inf")]  # offset, when it was read (monotonic)

    def _offset() -> float:
        now = _mono()
        if now - _state[1] >= 0.1:
            try:
                with open(_PATH) as f:
                    _state[0] = float(f.read().strip() or 0)
            except (OSError, ValueError):
                pass
            _state[1] = now
        return _state[0]

    def _time() -> float:
        return _real_time() + _offset()

    def _time_ns() -> int:
        return _real_ns() + int(_offset() * 1e9)

    class _Call:
        """A stand-in that, like the builtin it replaces, never binds as a method
        (``logging.Formatter.converter = time.localtime`` is a class attribute)."""

        __slots__ = ("fn",)

        def __init__(self, fn):
            self.fn = fn

        def __call__(self, *args, **kwargs):
            return self.fn(*args, **kwargs)

    def _at(real):
        return _Call(lambda t=None: real(_time() if t is None else t))

    def _fmt(real):
        return _Call(lambda fmt, t=None: real(fmt, _localtime(_time()) if t is None else t))

    _localtime, _gmtime, _ctime, _asctime, _strftime = (
        time.localtime, time.gmtime, time.ctime, time.asctime, time.strftime)  # fmt: skip
    time.time, time.time_ns = _Call(_time), _Call(_time_ns)
    time.localtime, time.gmtime, time.ctime = _at(_localtime), _at(_gmtime), _at(_ctime)
    time.asctime = _Call(lambda t=None: _asctime(_localtime(_time()) if t is None else t))
    time.strftime = _fmt(_strftime)

    _Real = _dt.datetime

    class _Meta(type):
        def __instancecheck__(cls, obj):
            return isinstance(obj, _Real)

        def __subclasscheck__(cls, sub):
            return issubclass(sub, _Real)

    class datetime(_Real, metaclass=_Meta):  # noqa: N801 - stands in for datetime.datetime
        @classmethod
        def now(cls, tz=None):
            return _Real.fromtimestamp(_time(), tz)

        @classmethod
        def utcnow(cls):
            return _Real.utcfromtimestamp(_time())

        @classmethod
        def today(cls):
            return _Real.fromtimestamp(_time())

    _dt.datetime = datetime

    _TIMES = ("st_atime", "st_mtime", "st_ctime")
    _EXTRA = ("st_blksize", "st_blocks", "st_rdev", "st_flags", "st_gen", "st_birthtime")

    def _shift(st):
        off = _offset()
        if not off:
            return st
        seq = list(st[:10])  # 7, 8, 9: the times in whole seconds
        for i in (7, 8, 9):
            seq[i] += int(off)
        extra = {k: getattr(st, k) for k in _EXTRA if hasattr(st, k)}
        for k in _TIMES:
            extra[k] = getattr(st, k) + off
            extra[k + "_ns"] = getattr(st, k + "_ns") + int(off * 1e9)
        return os.stat_result(seq, extra)

    def _stat(real):
        return _Call(lambda *a, **kw: _shift(real(*a, **kw)))

    def _utime(path, times=None, *, ns=None, **kw):
        off = _offset()
        if times is not None:
            times = (times[0] - off, times[1] - off)
        if ns is not None:
            ns = (ns[0] - int(off * 1e9), ns[1] - int(off * 1e9))
            return _real_utime(path, ns=ns, **kw)
        return _real_utime(path, times, **kw)

    _real_utime = os.utime
    os.stat, os.lstat, os.fstat = _stat(os.stat), _stat(os.lstat), _stat(os.fstat)
    os.utime = _Call(_utime)
