"""lowlat from Python: call and serve the procedures of any ONC RPC interface (a ``.x`` file)
over lowlat's transports and ONC RPC, with Python values, and run lowlat's benchmark.

.. code-block:: python

    import lowlat
    client = lowlat.Client("udp://127.0.0.1:7000", idl="idl/lab.x")
    client.call("MINUS", {"a": 7, "b": 3})          # 4

Values follow docs/json-mapping.md with Python's own types: ``int`` for every integer type,
``float``, ``bool``, ``str`` for strings and enumeration members (by name), ``bytes`` for opaque
data, ``dict`` for structs and unions (the discriminant under its name, the arm under its
name), ``list`` for arrays, ``None`` for ``void`` and absent optional data.

Errors are :class:`lowlat.Error` and its subclasses (:mod:`lowlat.errors`), with the message a
Rust user reads and ``may_have_executed``. Calls, binding, benchmarks and stopping a server
release the GIL while they wait.
"""

import atexit

from . import errors
from ._lowlat import Client, Server, _stop_all_servers, bench, load_results
from .errors import *  # noqa: F403 (the exception classes, listed in errors.__all__)

# A server's threads take the GIL to run procedures: stop them before the interpreter goes.
atexit.register(_stop_all_servers)

__all__ = ["Client", "Server", "bench", "load_results", *errors.__all__]
