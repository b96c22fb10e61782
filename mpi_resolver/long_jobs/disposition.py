"""Who handles a signal in this process: the C-level handler's address, and the library it
belongs to (the edge: libc's sigaction and dladdr through ctypes; Linux and glibc)."""

from __future__ import annotations

import ctypes
from typing import Optional

__all__ = ["handler_address", "library_of", "DEFAULT", "IGNORED"]

#: handler_address's answers for SIG_DFL and SIG_IGN.
DEFAULT, IGNORED = 0, 1
_SIGACTION_SIZE = 512  # more than struct sigaction's 152 bytes (x86_64, aarch64)


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _libc() -> Optional[ctypes.CDLL]:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - a Python without a C library to load
        return None


_LIBC = _libc()


def handler_address(signum: int) -> Optional[int]:
    """Returns the address of the C-level handler of ``signum`` in this process (DEFAULT,
    IGNORED, or a function's address), or None where it cannot be read."""
    if _LIBC is None or not hasattr(_LIBC, "sigaction"):
        return None  # pragma: no cover - not glibc
    action = ctypes.create_string_buffer(_SIGACTION_SIZE)
    if _LIBC.sigaction(int(signum), None, action) != 0:
        return None
    return ctypes.c_void_p.from_buffer(action).value or DEFAULT


def library_of(address: int) -> Optional[str]:
    """Returns the path of the shared object (or program) that holds code at ``address``, or
    None where dladdr does not know it."""
    if _LIBC is None or not hasattr(_LIBC, "dladdr") or address in (DEFAULT, IGNORED):
        return None
    info = _DlInfo()
    if not _LIBC.dladdr(ctypes.c_void_p(address), ctypes.byref(info)) or not info.dli_fname:
        return None
    return info.dli_fname.decode(errors="replace")
