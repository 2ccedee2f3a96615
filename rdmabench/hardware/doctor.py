"""`rdmabench doctor`: what on this machine helps or hurts a transfer, each with a verdict and advice.

Verdicts: ok, warn (works, but a figure may suffer), fail (blocks a device-direct run), n/a (does not
apply here, e.g. GPU checks on a machine without GPUs). The exit status is 1 when any check fails,
so a cluster's CI can gate on it.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

from ..escape import visible
from . import devstack, storage, topology
from .gpu import driver_version, import_cupy, visible_gpu_count
from .memlock import can_lock_beyond_limit, memlock_limit_text

OK, WARN, FAIL, NA = "ok", "warn", "fail", "n/a"


@dataclass(frozen=True)
class Finding:
    check: str
    verdict: str
    detail: str
    advice: str = ""

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def nvml_gpus() -> list[str]:
    """The GPUs NVML sees (nvidia-ml-py, declared with the cu12/cu13 extras), without CUDA or CuPy."""
    nvml = topology.nvml()
    if nvml is None:
        return []
    try:
        names = [nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(nvml.nvmlDeviceGetCount())]
    except Exception:
        return []
    return [name.decode() if isinstance(name, bytes) else str(name) for name in names]


def check_gpus() -> list[Finding]:
    count = visible_gpu_count()
    if count == 0 and import_cupy() is None:
        seen = nvml_gpus()
        if seen:  # a GPU node without CuPy: NVML still sees the GPUs
            return [
                Finding(
                    "GPUs",
                    WARN,
                    f"NVML sees {len(seen)}: {', '.join(seen)}; CuPy is not installed, so no device mode can run",
                    "install the gpu extra (CuPy) for device, managed, mapped, staged and bounce modes",
                )
            ]
    if count == 0:
        reason = "CuPy is not installed" if import_cupy() is None else "no CUDA GPU is visible"
        return [
            Finding(
                "GPUs",
                NA,
                f"{reason}: host-memory modes only",
                "install the gpu extra on a GPU machine for device modes",
            )
        ]
    cupy = import_cupy()
    assert cupy is not None
    names = []
    for index in range(count):
        name = cupy.cuda.runtime.getDeviceProperties(index)["name"]
        names.append(name.decode() if isinstance(name, bytes) else str(name))
    findings = [Finding("GPUs", OK, f"{count} visible: {', '.join(names)}; CUDA driver {driver_version()}")]
    findings.extend(_gpu_pairs(cupy, count))
    return findings


def _gpu_pairs(cupy: ModuleType, count: int) -> list[Finding]:
    findings = []
    bus_ids = [cupy.cuda.runtime.deviceGetPCIBusId(i) for i in range(count)]
    for index in range(count):
        topo = topology.gpu_topology(index, bus_ids[index], [b for j, b in enumerate(bus_ids) if j != index])
        pcie = (
            topo.pcie.describe() + f" = {topo.pcie.gbps:.1f} GB/s per direction" if topo.pcie else "PCIe link unknown"
        )
        verdict = WARN if topo.pcie and "below its best" in pcie else OK
        advice = (
            "reseat the card or check the slot/BIOS: the link trained below its capability" if verdict == WARN else ""
        )
        numa = f"; NUMA node {topo.numa_node}" if topo.numa_node is not None else ""
        findings.append(Finding(f"GPU {index} link", verdict, f"{topo.pci_bus_id}: {pcie}{numa}", advice))
        for peer in range(index + 1, count):
            nvlink = topo.nvlinks.get(topology.normalize_bus_id(bus_ids[peer]))
            can_peer = bool(cupy.cuda.runtime.deviceCanAccessPeer(index, peer))
            if nvlink:
                via = " via NVSwitch (the GPU's links, shared by all its peers)" if topo.nvswitch else ", direct links"
                findings.append(
                    Finding(
                        f"GPU {index} <-> {peer}",
                        OK,
                        f"{nvlink.describe()} = {nvlink.gbps:.1f} GB/s per direction{via}",
                    )
                )
            elif can_peer:
                findings.append(Finding(f"GPU {index} <-> {peer}", OK, "peer access over PCIe (no NVLink)"))
            else:
                findings.append(
                    Finding(
                        f"GPU {index} <-> {peer}",
                        FAIL,
                        "no peer access: device-to-device transfers are staged through host memory",
                        "check IOMMU/ACS settings and that both GPUs sit under a common PCIe switch or root",
                    )
                )
    return findings


def check_gpudirect(have_gpu: bool) -> list[Finding]:
    nics = topology.nic_ports()
    ib = [n for n in nics if n.kind == "infiniband"]
    findings = []
    if not ib:
        findings.append(Finding("RDMA NICs", NA, "no active InfiniBand/RoCE port: inter-node traffic goes over TCP"))
    else:
        findings.append(Finding("RDMA NICs", OK, ", ".join(f"{n.name} {n.rate_text}" for n in ib)))
    if not have_gpu or not ib:
        findings.append(Finding("GPUDirect RDMA", NA, "needs both a GPU and an RDMA NIC"))
    elif os.path.isdir("/sys/module/nvidia_peermem"):
        findings.append(Finding("GPUDirect RDMA", OK, "nvidia_peermem is loaded"))
    else:
        findings.append(
            Finding(
                "GPUDirect RDMA",
                FAIL,
                "nvidia_peermem is not loaded, so the NIC can reach GPU memory only through dma-buf, if the kernel and UCX support it",
                "modprobe nvidia_peermem (or use a kernel >= 5.12 with an open GPU driver for dma-buf), then rerun doctor",
            )
        )
    if have_gpu:
        present = os.path.exists("/dev/gdrdrv")
        findings.append(
            Finding(
                "gdrcopy",
                OK if present else WARN,
                "gdrdrv loaded" if present else "gdrdrv not loaded: small GPU messages go through cudaMemcpy",
                "" if present else "install and load gdrcopy for lower small-message latency",
            )
        )
    return findings


def check_memlock() -> Finding:
    limit = memlock_limit_text()
    if limit == "unlimited" or can_lock_beyond_limit():
        return Finding("memlock limit", OK, f"ulimit -l: {limit}" + ("" if limit == "unlimited" else " (CAP_IPC_LOCK)"))
    return Finding(
        "memlock limit",
        WARN,
        f"ulimit -l: {limit}: RDMA registration and mlock-pinned buffers beyond it fail",
        "set 'ulimit -l unlimited' (limits.conf, or the batch system's memlock setting)",
    )


def _transports_in(ucx_info_d: str) -> list[str]:
    return sorted(set(re.findall(r"#\s+Transport:\s+(\S+)", ucx_info_d)))


def _ucx_root() -> str | None:
    try:
        import libucx
    except ImportError:
        return None
    return os.path.dirname(libucx.__file__)


@functools.lru_cache(maxsize=2)
def _ucx_info(env: tuple[tuple[str, str], ...]) -> str:
    """`ucx_info -v -d` under `env`, one call and once a process: every run's rank 0 asks (doctor's
    findings go in the metadata), and each start of ucx_info used to cost 0.4 s (see _ucx_env)."""
    root = _ucx_root()
    assert root is not None
    command = [os.path.join(root, "bin", "ucx_info"), "-v", "-d"]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=dict(env)).stdout


def _ucx_env(root: str, keep_tls: bool) -> tuple[tuple[str, str], ...]:
    env = {k: v for k, v in os.environ.items() if keep_tls or k != "UCX_TLS"}
    env["LD_LIBRARY_PATH"] = os.path.join(root, "lib")
    # Installing UCX's memory hooks spins for 0.4 s (a yield loop, 0.3 s of CPU) and changes nothing
    # that ucx_info lists: left out, it answers in 0.03 s.
    env["UCX_MEM_EVENTS"] = "no"
    return tuple(sorted(env.items()))


def ucx_transports() -> list[str] | None:
    """The transports `ucx_info -d` lists (UCX_TLS left out: it would filter them), or None."""
    root = _ucx_root()
    if root is None:
        return None
    try:
        return _transports_in(_ucx_info(_ucx_env(root, keep_tls=False))) or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def check_ucx() -> list[Finding]:
    root = _ucx_root()
    if root is None:
        return [
            Finding("UCX", FAIL, "the libucx wheel is not installed", "install rdmabench with the cu12 or cu13 extra")
        ]
    try:
        report = _ucx_info(_ucx_env(root, keep_tls=True))
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [Finding("UCX", FAIL, f"ucx_info failed: {exc}")]
    found = re.search(r"Library version:\s*(\S+)", report) or re.search(r"Version\s+(\S+)", report)
    transports = _transports_in(report)
    findings = [
        Finding("UCX", OK, f"version {found.group(1) if found else 'unknown'}; transports: {', '.join(transports)}")
    ]
    host = [t for t in transports if t in ("sysv", "posix", "cma", "xpmem", "knem")]
    findings.append(
        Finding(
            "UCX host memory",
            OK if host else WARN,
            f"shared memory: {', '.join(host) or 'none'}",
            "" if host else "ranks of one node will fall back to TCP",
        )
    )
    cuda = [t for t in transports if t.startswith(("cuda", "gdr"))]
    if visible_gpu_count():
        findings.append(
            Finding(
                "UCX CUDA memory",
                OK if "cuda_ipc" in cuda else FAIL,
                f"CUDA transports: {', '.join(cuda) or 'none'}",
                "" if "cuda_ipc" in cuda else "this UCX cannot move GPU memory between processes directly",
            )
        )
    else:
        findings.append(
            Finding("UCX CUDA memory", NA, f"no GPU (CUDA transports built in: {', '.join(cuda) or 'none'})")
        )
    return findings


# UCX_TLS names that stand for groups of transports, not transports (ucx_info -d lists those).
_TLS_ALIASES = frozenset(
    ("all", "sm", "shm", "mm", "ib", "rc", "ud", "dc", "rc_v", "rc_x", "rc_mlx5", "ud_v", "ud_x", "ud_mlx5", "dc_x",
     "dc_mlx5", "cuda", "rocm", "ze", "ugni", "self", "tcp", "cma", "knem", "xpmem", "sysv", "posix", "gdr_copy")
)  # fmt: skip


def unknown_transports(tls: str, transports: list[str]) -> list[str]:
    """The names in a UCX_TLS value that are neither a transport of this UCX nor one of UCX's aliases."""
    names = [part.split(":")[0].strip() for part in tls.lstrip("^").split(",")]
    return [name for name in names if name and name not in transports and name not in _TLS_ALIASES]


def check_ucx_settings(transports: list[str] | None = None) -> list[Finding]:
    findings = []
    tls = os.environ.get("UCX_TLS")
    unknown = unknown_transports(tls, transports) if tls and transports else []
    if unknown:
        names = [part for part in (tls or "").lstrip("^").split(",") if part.strip()]
        fatal = len(unknown) == len(names) and not (tls or "").startswith("^")
        findings.append(
            Finding(
                "UCX_TLS",
                FAIL if fatal else WARN,
                f"UCX_TLS={tls} names {', '.join(unknown)}, not a transport of this UCX"
                + (": UCX will not start" if fatal else ""),
                f"choose among {', '.join(transports or [])} (or unset UCX_TLS)",
            )
        )
    if tls and not tls.startswith("^") and not any(t in tls for t in ("sm", "shm", "posix", "sysv", "cma", "all")):
        findings.append(
            Finding(
                "UCX_TLS",
                WARN,
                f"UCX_TLS={tls} leaves out shared memory",
                "ranks of one node will use a network transport",
            )
        )
    if tls and not tls.startswith("^") and visible_gpu_count() and not any(t in tls for t in ("cuda", "all")):
        findings.append(
            Finding(
                "UCX_TLS",
                FAIL,
                f"UCX_TLS={tls} leaves out the CUDA transports",
                "add cuda_copy,cuda_ipc (or unset UCX_TLS)",
            )
        )
    if os.environ.get("UCX_PROTO_ENABLE", "y").lower() in ("n", "no", "0"):
        findings.append(
            Finding(
                "UCX_PROTO_ENABLE",
                WARN,
                "the v1 protocols print no selection report",
                "unset UCX_PROTO_ENABLE so rdmabench can record the transport",
            )
        )
    if "UCX_LOG_FILE" in os.environ:
        findings.append(
            Finding(
                "UCX_LOG_FILE",
                WARN,
                "set by you: rdmabench cannot read UCX's protocol report",
                "unset it, or use RDMABENCH_UCX_LOG_DIR",
            )
        )
    if not findings:
        others = sorted(k for k in os.environ if k.startswith("UCX_"))
        findings.append(
            Finding("UCX settings", OK, f"no conflicting UCX_* settings ({', '.join(others) or 'none set'})")
        )
    return findings


def check_mpi() -> Finding:
    try:
        import mpi4py

        # The library's name and version need no MPI_Init (which would start a singleton job).
        if "mpi4py.MPI" not in __import__("sys").modules:
            mpi4py.rc.initialize = False
            mpi4py.rc.finalize = False
        from mpi4py import MPI
    except Exception as exc:
        return Finding(
            "MPI",
            FAIL,
            f"mpi4py cannot load an MPI library: {exc}",
            "install the mpi extra or build mpi4py against your MPI",
        )
    library = MPI.Get_library_version().replace("\x00", "").strip().splitlines()[0]
    cuda_aware = "unknown"
    query = getattr(MPI, "Query_cuda_support", None)
    if query is not None:
        try:
            cuda_aware = "yes" if query() else "no"
        except Exception:
            pass
    return Finding("MPI", OK, f"{library}; CUDA-aware: {cuda_aware} (rdmabench moves data over UCX, not MPI)")


def check_numa(have_gpu: bool) -> Finding:
    nodes = topology.cpu_numa_nodes()
    if not nodes:
        return Finding("NUMA placement", NA, "NUMA layout not readable")
    if not have_gpu:
        return Finding("NUMA placement", OK, f"this process may run on NUMA node(s) {nodes}")
    cupy = import_cupy()
    assert cupy is not None
    far = []
    for index in range(visible_gpu_count()):
        node = topology.numa_node_of(cupy.cuda.runtime.deviceGetPCIBusId(index))
        if node is not None and node not in nodes:
            far.append(f"GPU {index} on node {node}")
    if far:
        return Finding(
            "NUMA placement",
            WARN,
            f"process on node(s) {nodes}; {', '.join(far)}",
            "bind each rank to its GPU's NUMA node (launch/ scripts do)",
        )
    return Finding("NUMA placement", OK, f"process on node(s) {nodes}, with its GPUs")


def check_cpu_governor() -> Finding:
    governors = set()
    root = "/sys/devices/system/cpu"
    for entry in os.listdir(root) if os.path.isdir(root) else []:
        value = topology.read_text(f"{root}/{entry}/cpufreq/scaling_governor")
        if value:
            governors.add(value)
    if not governors:
        return Finding("CPU frequency governor", NA, "not exposed (virtual machine or fixed clocks)")
    if governors == {"performance"}:
        return Finding("CPU frequency governor", OK, "performance")
    return Finding(
        "CPU frequency governor",
        WARN,
        f"{', '.join(sorted(governors))}",
        "use the performance governor for stable small-message figures",
    )


def check_thp() -> Finding:
    value = topology.read_text("/sys/kernel/mm/transparent_hugepage/enabled")
    if value is None:
        return Finding("transparent huge pages", NA, "not exposed")
    chosen = re.search(r"\[(\w+)\]", value)
    mode = chosen.group(1) if chosen else value
    return Finding(
        "transparent huge pages",
        OK if mode != "always" else WARN,
        mode,
        "" if mode != "always" else "'always' can stall page-locking and registration with compaction",
    )


def check_storage(path: str, have_gpu: bool) -> list[Finding]:
    """The file system of `path` (where `rdmabench storage` would read), O_DIRECT, and GPUDirect Storage."""
    fs = storage.file_system(path)
    device = f" on {fs.block_device}" + (f" ({fs.model})" if fs.model else "") if fs.block_device else ""
    direct = {True: "takes O_DIRECT", False: "refuses O_DIRECT", None: "O_DIRECT untried (no access)"}[fs.direct_io]
    findings = [
        Finding(
            "file system",
            WARN if fs.direct_io is False else OK,
            f"{fs.path}: {fs.fstype} at {fs.mount_point}{device}; {direct}",
            "the pinned storage path needs O_DIRECT: use a path on a disk file system (not tmpfs)",
        )
    ]
    driver = storage.gds()
    verdict = storage.gds_verdict(fs, driver)
    detail = f"nvidia-fs {driver.nvidia_fs or 'not loaded'}; cuFile config {driver.cufile_json or 'none'}: {verdict}"
    gds_ok = verdict.startswith("GPUDirect Storage possible")
    findings.append(
        Finding(
            "GPUDirect Storage",
            NA if not have_gpu else (OK if gds_ok else WARN),
            detail,
            "load nvidia-fs (MLNX_OFED/GDS packages) and use NVMe with ext4/xfs; KvikIO otherwise runs POSIX reads",
        )
    )
    return findings


def check_gpu_initiated(gpus: int, transports: list[str] | None) -> list[Finding]:
    """What GPU-initiated block lists (UCX's device API, --posting gpu) need, one line each: nvcc,
    a UCX library of the headers' version, peer mapping between every pair of GPUs, and cuda_ipc (the
    only lane UCX's device API has between GPUs of a node). n/a without a GPU, saying what it found."""
    no_gpu = "no GPU" if gpus == 0 else ""
    compiler = devstack.nvcc()
    found = compiler is not None and shutil.which(compiler) is not None
    findings = [
        Finding(
            "nvcc",
            NA if no_gpu else (OK if found else WARN),
            (f"{no_gpu}: " if no_gpu else "") + (f"{compiler}" if found else f"not found ({compiler or 'none'})"),
            "install the CUDA toolkit or set RDMABENCH_NVCC: without it the GPU-initiated path cannot be built, "
            "and --posting auto posts block lists from the CPU",
        )
    ]
    findings.append(_ucx_device_api(no_gpu))
    findings.extend(_peer_mapping(gpus))
    lane = transports is not None and "cuda_ipc" in transports
    built = "cuda_ipc is among UCX's transports" if lane else "UCX has no cuda_ipc transport"
    findings.append(
        Finding(
            "UCX device lanes",
            NA if no_gpu else (OK if lane else WARN),
            f"{no_gpu}: {built}" if no_gpu else built,
            "UCX's device API posts between GPUs of a node over cuda_ipc only: use a UCX built with CUDA",
        )
    )
    return findings


def _ucx_device_api(no_gpu: str) -> Finding:
    """The UCX headers a device kernel is built against, against the library that runs it."""
    root = _ucx_root()
    prefix = Path(root) if root else None
    if prefix is None or not (prefix / "include" / "ucp" / "api" / "device" / "ucp_host.h").exists():
        where = f"the UCX at {prefix} has no device API (UCX 1.20 or later)" if prefix else "no libucx wheel"
        return Finding("UCX device API", NA if no_gpu else WARN, where, "install libucx 1.20 or later")
    mismatch = devstack.version_mismatch(prefix)
    if mismatch is None:
        major, minor = devstack.header_version(prefix) or (0, 0)  # read: they matched
        detail, verdict = f"headers {major}.{minor} match the library", OK
    else:
        detail, verdict = mismatch, WARN
    return Finding(
        "UCX device API",
        NA if no_gpu else verdict,
        f"{no_gpu}: {detail}" if no_gpu else detail,
        "GPU-initiated lists are refused and posted by the CPU: build against the library's own headers",
    )


def _peer_mapping(gpus: int) -> list[Finding]:
    """cudaDeviceCanAccessPeer both ways, per pair of GPUs: what UCX's cuda_ipc maps a peer's pool with."""
    cupy = import_cupy() if gpus > 1 else None
    if cupy is None:
        why = "no GPU" if gpus == 0 else ("one GPU: no pair" if gpus == 1 else "CuPy is not installed")
        return [Finding("GPU peer mapping", NA, why)]
    findings = []
    for index in range(gpus):
        for peer in range(index + 1, gpus):
            ways = [bool(cupy.cuda.runtime.deviceCanAccessPeer(a, b)) for a, b in ((index, peer), (peer, index))]
            if all(ways):
                findings.append(Finding(f"GPU {index} <-> {peer} peer mapping", OK, "each can map the other's memory"))
                continue
            pairs = ((index, peer), (peer, index))
            cannot = " and ".join(
                f"GPU {a} cannot map GPU {b}'s" for (a, b), way in zip(pairs, ways, strict=True) if not way
            )
            findings.append(
                Finding(
                    f"GPU {index} <-> {peer} peer mapping",
                    FAIL,
                    f"{cannot} memory (cudaDeviceCanAccessPeer): no GPU-initiated list or cuda_ipc copy between them",
                    "check IOMMU/ACS settings and CUDA_VISIBLE_DEVICES; GPUs under one PCIe switch or NVLink map each other",
                )
            )
    return findings


def run_checks(path: str = ".") -> list[Finding]:
    have_gpu = visible_gpu_count() > 0
    findings = check_gpus()
    findings += check_gpudirect(have_gpu)
    findings.append(check_memlock())
    findings += check_ucx()
    transports = ucx_transports()
    findings += check_ucx_settings(transports)
    findings += check_gpu_initiated(visible_gpu_count(), transports)
    findings.append(check_mpi())
    findings.append(check_numa(have_gpu))
    findings.append(check_cpu_governor())
    findings.append(check_thp())
    findings += check_storage(path, have_gpu)
    return findings


def device_direct(findings: list[Finding]) -> str:
    """'ready', 'blocked' (some check failed) or 'not applicable' (no GPU here)."""
    if any(f.verdict == FAIL for f in findings):
        return "blocked"
    if any(f.check == "GPUs" and f.verdict == NA for f in findings):
        return "not applicable"
    return "ready"


def format_table(findings: list[Finding]) -> str:
    width = max(len(f.check) for f in findings)
    lines = [f"{'check':<{width}}  verdict  detail"]
    for f in findings:
        # Details name GPUs, NICs, file systems and paths as the machine reports them: shown, never raw.
        lines.append(f"{f.check:<{width}}  {f.verdict:<7}  {visible(f.detail)}")
        if f.advice and f.verdict in (WARN, FAIL):
            lines.append(f"{'':<{width}}  {'':<7}  -> {visible(f.advice)}")
    lines.append(f"device-direct runs: {device_direct(findings)}")
    return "\n".join(lines)
