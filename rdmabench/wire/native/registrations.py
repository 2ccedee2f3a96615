"""Memory lent to one-sided peers through the hot loop's library (ucp_mem_map, packed remote keys) and
the peers' keys held, all given back together."""

from __future__ import annotations

import ctypes
from typing import Any

from ...errors import TransportError
from .mirror import OK


class Registrations:
    """Memory this rank lends to one-sided peers (ucp_mem_map, a packed remote key per buffer) and the
    peers' keys it holds; everything is given back by release(), keys before the memory."""

    def __init__(self, library: Any, context: int):
        self._lib = library
        self._context = ctypes.c_void_p(context)
        self._maps: list[Any] = []
        self._keys: list[Any] = []
        self._allocated: dict[int, bytes] = {}  # address -> packed key of memory UCX allocated
        self._handles: dict[int, int] = {}  # address -> ucp_mem_h of memory mapped here

    def _check(self, rc: int, status: Any, what: str) -> None:
        if rc != OK:
            text = self._lib.rb_status_string(status.value).decode(errors="replace")
            raise TransportError(f"UCX could not {what}: {text}")

    def lend(self, address: int, length: int, memory: int) -> bytes:
        """Map `length` bytes at `address` for remote access; returns the packed remote key (memory
        UCX allocated here is mapped already: its key)."""
        if address in self._allocated:
            return self._allocated[address]
        return self._map(address, length, memory, f"map {length} bytes for remote access")[1]

    def memory_handle(self, address: int, length: int, memory: int) -> int:
        """The ucp_mem_h of the memory at `address` (mapped now if it is not yet): what UCX's device
        descriptor lists need for local memory."""
        if address not in self._handles:
            self._map(address, length, memory, f"map {length} bytes for the GPU's own transfers")
        return self._handles[address]

    def allocate(self, length: int) -> tuple[int, bytes]:
        """`length` bytes of host memory allocated by UCX and lent for remote access: (address, key).
        The memory lives until release()."""
        address, key = self._map(0, length, -1, f"allocate {length} bytes of host memory")
        self._allocated[address] = key
        return address, key

    def _map(self, address: int, length: int, memory: int, what: str) -> tuple[int, bytes]:
        """rb_mem_map: the program's memory at `address`, or (0) memory UCX allocates; (address, key)."""
        where, memh, packed = ctypes.c_void_p(address or None), ctypes.c_void_p(), ctypes.c_void_p()
        size, status = ctypes.c_size_t(), ctypes.c_int()
        rc = self._lib.rb_mem_map(
            self._context, ctypes.byref(where), length, memory, ctypes.byref(memh), ctypes.byref(packed),
            ctypes.byref(size), ctypes.byref(status),
        )  # fmt: skip
        self._check(rc, status, what)
        self._maps.append(memh)
        self._handles[int(where.value or 0)] = int(memh.value or 0)
        key = ctypes.string_at(packed, size.value)
        self._lib.rb_rkey_buffer_release(packed)
        return int(where.value or 0), key

    def borrow(self, endpoint: int, key: bytes) -> int:
        """The peer's packed key unpacked for `endpoint`: a ucp_rkey_h."""
        rkey, status = ctypes.c_void_p(), ctypes.c_int()
        rc = self._lib.rb_rkey_unpack(endpoint, key, ctypes.byref(rkey), ctypes.byref(status))
        self._check(rc, status, "unpack a peer's remote key")
        self._keys.append(rkey)
        return int(rkey.value or 0)

    def release(self) -> None:
        for rkey in self._keys:
            self._lib.rb_rkey_destroy(rkey)
        for memh in self._maps:
            self._lib.rb_mem_unmap(self._context, memh)
        self._keys.clear()
        self._maps.clear()
        self._handles.clear()
        self._allocated.clear()
