"""Exceptions: a CUDA outcome as a Python exception."""
from __future__ import annotations

import asyncio

from . import _native

__all__ = ["CudaError", "error_for"]


class CudaError(RuntimeError):
    """A CUDA error reached a future (or a submission failed).

    Attributes: ``code`` (the ``cudaError_t`` value, an int), ``name``
    (``"cudaErrorIllegalAddress"``...) and ``message`` (the runtime's one-line
    description). Sticky errors (the context died, e.g. a kernel trapped)
    reach every pending ``wait`` of that context; the process must then
    stop using the GPU.
    """

    def __init__(self, code: int, name: str | None = None, message: str | None = None) -> None:
        self.code = int(code)
        self.name = name if name is not None else _native.error_name(self.code)
        self.message = message if message is not None else _native.error_string(self.code)
        super().__init__(f"{self.name} ({self.code}): {self.message}")

    def __reduce__(self):
        return (CudaError, (self.code, self.name, self.message))


def error_for(code: int) -> BaseException:
    """The exception for a cudaError_t outcome: TimeoutError for the library's
    deadline, CancelledError for a cancelled future, CudaError otherwise."""
    if code == _native.ERROR_TIMEOUT:
        return TimeoutError("cudaev: the deadline passed before the work completed")
    if code == _native.ERROR_CANCELLED:
        return asyncio.CancelledError()
    return CudaError(code)
