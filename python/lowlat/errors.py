"""The exceptions lowlat raises.

Every one is a :class:`lowlat.Error` carrying the message a Rust user of lowlat reads (it names
the endpoint, the procedure and what went wrong) and :attr:`Error.may_have_executed`: ``False``
only when lowlat knows the procedure did not run, so a caller can tell whether retrying a
non-idempotent call is safe. Where a built-in exception means the same thing, the lowlat class
derives from it too (``except TimeoutError`` catches :class:`lowlat.TimeoutError`).
"""

import builtins

__all__ = [
    "Error",
    "InterfaceError",
    "BindError",
    "ServerNotRunningError",
    "TimeoutError",
    "ConnectionLostError",
    "UnknownProcedureError",
    "BadArgumentsError",
    "ServerError",
]


class Error(Exception):
    """Anything lowlat reports; the base of the classes below."""

    may_have_executed: bool
    """Whether the procedure may have run: ``False`` only when lowlat knows it did not."""

    def __new__(cls, message: str, may_have_executed: bool = False) -> "Error":
        # Only the message reaches the base: OSError's subclasses (TimeoutError,
        # ConnectionError) would read two arguments as (errno, strerror).
        return super().__new__(cls, message)

    def __init__(self, message: str, may_have_executed: bool = False) -> None:
        super().__init__(message)
        self.may_have_executed = may_have_executed


class InterfaceError(Error):
    """The ``.x`` file could not be read or checked, or it has no program or version of the
    name given (or several, and none was named): the message lists the choices."""


class BindError(Error):
    """The endpoint is not a valid URI, or the server refused the binding (unknown program,
    version not served, no room for another session, ...)."""


class ServerNotRunningError(Error, ConnectionRefusedError):
    """Nothing listens at the endpoint: the call was not made."""


class TimeoutError(Error, builtins.TimeoutError):
    """No answer within the deadline (binding or call); the message says whether the server had
    acknowledged the call."""


class ConnectionLostError(Error, ConnectionError):
    """The connection or session broke during the call, or the server restarted."""


class UnknownProcedureError(Error):
    """No procedure of that name in the interface, or the server does not serve it."""


class BadArgumentsError(Error, ValueError):
    """The arguments do not fit the procedure's types (the message gives the path to the value,
    e.g. ``argument.inners[1].tag: opaque longer than 8``), are too large for the binding, or the
    server could not decode them."""


class ServerError(Error):
    """The procedure failed on the server (a Python procedure raised, say), the server shed the
    call, or its answer could not be read."""
