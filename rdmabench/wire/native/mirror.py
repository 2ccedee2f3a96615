"""The ctypes mirror of hotloop.h: the structs Python fills, the functions' signatures, the status and
operation codes, and the check that a loaded library was compiled with this very layout (rb_abi)."""

from __future__ import annotations

import ctypes
from typing import Any

from ...modes import UcxMemory

STATUS_NAMES = ("RB_OK", "RB_TIMEOUT", "RB_PEER_GONE", "RB_UCX_ERROR", "RB_NO_MEMORY", "RB_INTERRUPTED")
OK, TIMEOUT, PEER_GONE, UCX_ERROR, NO_MEMORY, INTERRUPTED = range(len(STATUS_NAMES))

_ptr, _size, _int, _tag, _double = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint64, ctypes.c_double
_out_seconds, _out_int = ctypes.POINTER(_double), ctypes.POINTER(_int)


class LinkEnd(ctypes.Structure):
    """rb_link: one end of a link in a round, as the native loop reads it (hotloop.h)."""

    _fields_ = [
        ("ep", _ptr),
        ("peer_pid", _int),
        ("count", _int),
        ("slots", _int),
        ("memory_type", _int),
        ("size", _size),
        ("buffers", ctypes.POINTER(_ptr)),
        ("data_tag", _tag),
        ("ready_tag", _tag),
        ("ack_tag", _tag),
    ]


class RmaLinkEnd(ctypes.Structure):
    """rb_rma_link: one end of a one-sided link, as the native loop reads it (hotloop.h)."""

    _fields_ = [
        ("ep", _ptr),
        ("peer_pid", _int),
        ("count", _int),
        ("memory_type", _int),
        ("size", _size),
        ("buffers", ctypes.POINTER(_ptr)),
        ("remote", ctypes.POINTER(_tag)),
        ("rkeys", ctypes.POINTER(_ptr)),
        ("ready_tag", _tag),
        ("done_tag", _tag),
    ]


class BlocksLinkEnd(ctypes.Structure):
    """rb_blocks_link: one end of a link moving block lists, as the native loop reads it (hotloop.h): a step's requests
    (descriptors: blocks, or blocks adjacent at both ends merged), transfer by transfer."""

    _fields_ = [
        ("ep", _ptr),
        ("peer_pid", _int),
        ("memory_type", _int),
        ("batch", _int),
        ("first", ctypes.POINTER(_int)),
        ("pool", _ptr),
        ("offsets", ctypes.POINTER(_tag)),
        ("lengths", ctypes.POINTER(_tag)),
        ("remote_pool", _tag),
        ("remote_offsets", ctypes.POINTER(_tag)),
        ("rkey", _ptr),
        ("ready_tag", _tag),
        ("done_tag", _tag),
        ("data_tag", _tag),
    ]


_links = ctypes.POINTER(LinkEnd)
_rma_links = ctypes.POINTER(RmaLinkEnd)
# What both ends of lat take: worker, endpoint, out, in, size, memory type, out/in/ready tags, the READY
# buffer, count, timeout, peer pid (the timing end then adds its seconds).
_LAT_END = [_ptr, _ptr, _ptr, _ptr, _size, _int, _tag, _tag, _tag, _ptr, _int, _double, _int]
# (worker, ...buffers and tags..., timeout, [peer pid,] outputs)
_SIGNATURES: dict[str, list[Any]] = {
    "rb_round": [_ptr, _links, _int, _links, _int, _ptr, _ptr, _double, _out_seconds, _out_int, _out_int],
    "rb_lat_ping": [*_LAT_END, _out_seconds, _out_int, _out_int],
    "rb_lat_pong": [*_LAT_END, _out_int, _out_int],
    "rb_rma_round": [
        _ptr,
        _int,
        _rma_links,
        _int,
        _rma_links,
        _int,
        _ptr,
        _ptr,
        _double,
        _out_seconds,
        _out_int,
        _out_int,
    ],
    "rb_put_pingpong": [_ptr, _int, _rma_links, _ptr, ctypes.c_uint8, _ptr, _double, _out_seconds, _out_int, _out_int],
    "rb_blocks_active": [
        _ptr,
        _int,
        ctypes.POINTER(BlocksLinkEnd),
        _ptr,
        _ptr,
        _double,
        _double,
        _out_seconds,
        _out_seconds,
        _out_seconds,
        _out_int,
        _out_int,
    ],
    "rb_blocks_passive": [_ptr, _int, ctypes.POINTER(BlocksLinkEnd), _ptr, _ptr, _double, _out_int, _out_int],
    "rb_blocks_ready": [_ptr, ctypes.POINTER(BlocksLinkEnd), _ptr, _double, _out_int, _out_int],
    "rb_blocks_done": [_ptr, ctypes.POINTER(BlocksLinkEnd), _ptr, _double, _out_int, _out_int],
    "rb_mem_map": [
        _ptr,
        ctypes.POINTER(_ptr),
        _size,
        _int,
        ctypes.POINTER(_ptr),
        ctypes.POINTER(_ptr),
        ctypes.POINTER(_size),
        _out_int,
    ],
    "rb_rkey_unpack": [_ptr, _ptr, ctypes.POINTER(_ptr), _out_int],
}
# Functions that return nothing: (name, argument types).
_VOIDS: dict[str, list[Any]] = {
    "rb_rkey_buffer_release": [_ptr],
    "rb_mem_unmap": [_ptr, _ptr],
    "rb_rkey_destroy": [_ptr],
}  # fmt: skip
# ucs_memory_type_t of the memory types MemoryMode.ucx_memory names.
UCS_MEMORY_TYPES: dict[UcxMemory, int] = {"host": 0, "cuda": 1, "cuda-managed": 2}
RMA_PUT, RMA_GET, TAGGED = 0, 1, 2  # the operations of one-sided and block-list steps


def configure(library: Any) -> Any:
    library.rb_init.argtypes = [ctypes.c_void_p]
    library.rb_init.restype = None
    library.rb_init(ctypes.cast(ctypes.pythonapi.PyErr_CheckSignals, ctypes.c_void_p))
    for name, argtypes in _SIGNATURES.items():
        function = getattr(library, name)
        function.argtypes = argtypes
        function.restype = _int
    for name, argtypes in _VOIDS.items():
        function = getattr(library, name)
        function.argtypes = argtypes
        function.restype = None
    library.rb_status_string.argtypes = [_int]
    library.rb_status_string.restype = ctypes.c_char_p
    check_abi(library)
    return library


def mirror_abi() -> dict[str, int]:
    """The interface as this module's ctypes mirror lays it out, in rb_abi()'s terms (hotloop.h)."""
    items = {name: value for name, value in zip(STATUS_NAMES, range(len(STATUS_NAMES)), strict=True)}
    items.update(RB_PUT=RMA_PUT, RB_GET=RMA_GET, RB_TAG=TAGGED)
    for cname, struct in (("rb_link", LinkEnd), ("rb_rma_link", RmaLinkEnd), ("rb_blocks_link", BlocksLinkEnd)):
        items[cname] = ctypes.sizeof(struct)
        for field, *_ in struct._fields_:
            items[f"{cname}.{field}"] = getattr(struct, field).offset
    return items


def library_abi(library: Any) -> dict[str, int]:
    """The interface as the library was compiled (rb_abi: "name=value;" items)."""
    library.rb_abi.restype = ctypes.c_char_p
    return parse_abi((library.rb_abi() or b"").decode())


def parse_abi(text: str) -> dict[str, int]:
    """A native library's description of itself: "name=value;" items (rb_abi, rb_dev_abi)."""
    return {name: int(value) for name, _, value in (item.partition("=") for item in text.split(";") if item)}


def check_abi(library: Any) -> None:
    """Refuse a library whose structs or codes differ from the ctypes mirror: a field added to
    hotloop.h and not here would otherwise shift every field after it, silently."""
    try:
        theirs = library_abi(library)
    except (AttributeError, ValueError) as exc:
        raise OSError(f"the native loop does not describe its interface (rb_abi: {exc})") from None
    ours = mirror_abi()
    differ = sorted(name for name in ours.keys() | theirs.keys() if ours.get(name) != theirs.get(name))
    if differ:
        shown = ", ".join(
            f"{name} {theirs.get(name, 'absent')} in C, {ours.get(name, 'absent')} in Python" for name in differ[:3]
        )
        raise OSError(f"hotloop.h and its ctypes mirror disagree: {shown}")


def memory_type(ucx_memory: UcxMemory) -> int:
    """The ucs_memory_type_t declared to UCX for buffers of this kind (MemoryMode.ucx_memory). A name
    it does not know is a bug, refused here: declaring a wrong type (or none) to UCX would measure
    another path without a word."""
    try:
        return UCS_MEMORY_TYPES[ucx_memory]
    except KeyError:
        raise ValueError(
            f"no ucs_memory_type_t for UCX memory {ucx_memory!r}: one of {', '.join(UCS_MEMORY_TYPES)}"
        ) from None
