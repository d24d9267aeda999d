"""Type hints of lowlat's extension module (documented in lowlat/__init__.py)."""

from os import PathLike
from typing import Any, Callable, Optional, Sequence, TypeVar, Union

_F = TypeVar("_F", bound=Callable[..., Any])
_Path = Union[str, PathLike[str]]
_Choice = Union[int, str]

class Client:
    """A binding to one version of one program of a ``.x`` interface at one endpoint.

    ``program`` and ``version`` (by name or number) may be left out when the file has only one;
    the error lists them otherwise. ``deadline``: seconds a call may take (default 10).
    ``spin``: how long to spin before blocking while a call waits: ``"adaptive"`` (default),
    ``"forever"`` (busy-poll) or microseconds (``0``: always block). ``psk_file``: a pre-shared
    key file, as ``lowlat serve --psk-file`` (binds prove it, every frame carries a tag under
    it); ``encrypt=True`` with it encrypts every frame's body as well (not over shm:// or ONC
    RPC). ``slots``: calls that may be in flight at once (default 64; the server grants up to
    its limit, 64 by default): threads or :meth:`call_many` calls beyond them wait for one.
    Share one client between threads: their calls proceed in parallel.
    """

    def __init__(
        self,
        uri: str,
        idl: _Path,
        program: Optional[_Choice] = None,
        version: Optional[_Choice] = None,
        deadline: Optional[float] = None,
        spin: Optional[_Choice] = None,
        psk_file: Optional[_Path] = None,
        encrypt: bool = False,
        slots: Optional[int] = None,
    ) -> None: ...
    def call(self, proc: str, arg: Any = None, *, deadline: Optional[float] = None) -> Any:
        """Calls ``proc`` (case-insensitive) with ``arg``: nothing for a procedure without
        arguments, the value for one argument, a list in order or a dict by name for several.
        Returns the result (``None`` for ``void``). The GIL is released while the call waits."""
    def call_many(
        self,
        calls: Sequence[Union[tuple[str, Any], tuple[str], str]],
        *,
        deadline: Optional[float] = None,
    ) -> list[Any]:
        """Makes every call at once from this thread and returns their results in order. Each
        call is ``(proc, arg)`` as :meth:`call` takes them, or ``(proc,)`` or ``proc`` for a
        procedure without arguments. All are in flight together, up to the client's ``slots``
        (the rest are sent as slots free); the GIL is released while they run. A call that
        fails has its exception (a :class:`lowlat.Error`, never raised) in its place in the
        list, so check with ``isinstance(r, lowlat.Error)``; the others' results stand. An item
        of another shape raises ``TypeError`` before any call is sent. ``deadline`` (seconds)
        overrides the client's for each call."""
    @property
    def uri(self) -> str: ...
    @property
    def procedures(self) -> list[str]: ...

class Server:
    """A server of one version of one program of a ``.x`` interface, its procedures Python
    functions. A procedure runs on the thread that received the call (one per endpoint), holding
    the GIL; one that raises is logged on the ``lowlat`` logger and answered as a server error.
    A server serves until :meth:`stop` (or the interpreter exits), referenced or not, as a
    running thread does. Use it as a context manager to stop it on leaving the block.
    """

    def __init__(self, idl: _Path, program: Optional[_Choice] = None, version: Optional[_Choice] = None) -> None: ...
    def procedure(self, name: str, *, long_running: bool = False) -> Callable[[_F], _F]:
        """Decorator: the function serves procedure ``name``, taking its arguments positionally
        and returning its result. ``long_running``: run it on the worker pool, not on the thread
        that received the call."""
    def serve(self, uris: list[str], *, register: bool = True) -> list[str]:
        """Serves on every URI; returns them with real ports where 0 was asked for.
        ``register``: announce ONC RPC endpoints to rpcbind, if it runs."""
    def stop(self) -> None:
        """Stops serving, waiting for calls in progress (so not from inside a procedure of this
        server); registering and serving again is allowed."""
    @property
    def serving(self) -> bool: ...
    def __enter__(self) -> "Server": ...
    def __exit__(self, *exc: Any) -> bool: ...

def bench(
    uri: str,
    proc: str = "null",
    calls: int = 10000,
    size: int = 0,
    *,
    threads: int = 1,
    warmup: int = 1000,
    spin: Optional[_Choice] = None,
    deadline: float = 10.0,
) -> dict[str, Any]:
    """``lowlat bench`` against a server of the lab interface (``lowlat serve URI``): the fields
    of ``lowlat bench --json`` (kind, transport, proc, size, calls, threads, spin, p50_ns, p90_ns,
    p99_ns, p999_ns, max_ns, mean_ns, mean99_ns, calls_per_s, mbit_s, errors). The calls are made
    by lowlat's Rust client with the GIL released."""

def load_results(path: _Path) -> dict[str, Any]:
    """A ``results.json`` written by ``lowlat lab``, checked against lowlat's results model."""

def _stop_all_servers() -> None: ...
