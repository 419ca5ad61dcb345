"""kvgate_core: the kvgate routing index (libkvgate, the WASM core compiled to C) from Python over ctypes."""
from .errors import KvgateError, STATUS
from .index import Index, Match

__all__ = ["Index", "Match", "KvgateError", "STATUS"]
