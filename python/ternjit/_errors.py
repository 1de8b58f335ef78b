# SPDX-License-Identifier: Apache-2.0
# _errors.py - ternjit.Error and the status checks every module of the package uses.
"""ternjit.Error, and turning a ternjit_status into it (the last-error rule: the message is
the calling thread's ternjit_last_error())."""
from . import _capi


class Error(Exception):
    """A failed ternjit call: ``status`` (a ternjit_status int) and ``message``."""

    def __init__(self, status, message):
        super().__init__(status, message)
        self.status = int(status)
        self.message = message

    @property
    def status_name(self):
        """The status as words ("invalid input", "not found", ...)."""
        return _capi.STATUS_NAMES.get(self.status, "status %d" % self.status)

    def __str__(self):
        return self.message

    def __repr__(self):
        return "ternjit.Error(%s, %r)" % (self.status_name, self.message)


Error.__module__ = "ternjit"  # its public name (the package re-exports it)


def _lib():
    try:
        return _capi.library()
    except OSError as e:
        raise Error(_capi.UNAVAILABLE, str(e)) from None


def _last_error(lib, status):
    raw = lib.ternjit_last_error()
    text = raw.decode("utf-8", "replace") if raw else ""
    return text or "ternjit call failed (%s)" % _capi.STATUS_NAMES.get(status, "status %d" % status)


def _check(lib, status):
    if status != _capi.OK:
        raise Error(status, _last_error(lib, status))


def _misuse(message):
    return Error(_capi.INVALID_ARGUMENT, message)
