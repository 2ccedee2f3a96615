"""Does the path UCX took match what the memory modes imply? The field's most common wrong number is
a plausible figure over the wrong path: shared memory falling back to TCP, device memory staged
through host memory although GPUDirect was expected."""

from __future__ import annotations

from typing import Any

from ..modes import mode_named

SHARED_MEMORY = ("sysv", "posix", "cma", "xpmem", "knem")
NO_GPUDIRECT = "GPUDirect"  # every warning about a device path contains this word


def path_warnings(entry: dict[str, Any], same_host: bool) -> list[str]:
    transport = entry.get("transport")
    if entry.get("ucx_locality") == "this process":  # an offload within one process: no UCX in its path
        return []
    if transport is None:
        return ["UCX did not report the transport it used (UCX_PROTO_INFO disabled, or UCX_LOG_FILE set by the user)"]
    name = transport.split("/")[0]
    protocol = entry.get("protocol") or ""
    decided_by = (entry.get("ucx_report") or {}).get("decided_by") or ""
    # Bulk bytes: a rendezvous, or one-sided remote memory access (always zero-copy or staged).
    rendezvous = "rendezvous" in protocol or decided_by.startswith(("rendezvous", "remote memory"))
    # GPU memory handed to UCX (device, managed); staged modes hand it host memory.
    modes = [mode_named(entry.get(f"{end}_mode")) for end in ("src", "dst")]
    device = any(mode is not None and mode.ucx_memory != "host" for mode in modes)
    warnings = []
    if same_host and not device and name not in SHARED_MEMORY:
        warnings.append(
            f"host memory between ranks of one host went over {transport}, not shared memory "
            f"({', '.join(SHARED_MEMORY)}): check UCX_TLS and the endpoint settings"
        )
    if device and same_host and rendezvous and name != "cuda_ipc":
        warnings.append(
            f"device memory between ranks of one host went over {transport} without CUDA IPC: staged through "
            f"host memory, no {NO_GPUDIRECT} path"
        )
    if device and not same_host and rendezvous and (name == "tcp" or "cuda_copy" in protocol or "frag" in protocol):
        warnings.append(
            f"device memory between nodes was staged through host memory over {transport} ({protocol}): "
            f"{NO_GPUDIRECT} RDMA not used"
        )
    return warnings


def is_device_path_warning(warning: str) -> bool:
    return NO_GPUDIRECT in warning
