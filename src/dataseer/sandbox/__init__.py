"""Isolated Python over the datalayer's frames: the engine behind ``run_python``.

``SandboxPool.run(thread, code)`` runs a snippet in a worker process bound to
that thread, with the thread's frames preloaded as pandas DataFrames, and
returns stdout, the last value, new frames and figures. See ``mechanism`` for
the isolation, ``worker`` for what runs inside, ``pool`` for the server side.
"""

from dataseer.sandbox.mechanism import Mechanism, detect_mechanism
from dataseer.sandbox.pool import (
    Figure,
    PythonResult,
    SandboxConfig,
    SandboxError,
    SandboxPool,
    close_pools,
    get_pool,
)

__all__ = [
    "Figure",
    "Mechanism",
    "PythonResult",
    "SandboxConfig",
    "SandboxError",
    "SandboxPool",
    "close_pools",
    "detect_mechanism",
    "get_pool",
]
