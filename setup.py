"""Builds the native hot loop (rdmabench/wire/native/hotloop*.c) at install time, against the UCX headers
of the libucx wheel in the build environment (pyproject.toml's build requirements). The library is a
plain shared object loaded through ctypes, not a Python module. The build is optional: without a C
compiler or UCX's headers the package installs anyway, and the loop is built on first use instead."""

from __future__ import annotations

import hashlib
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NATIVE = Path("rdmabench/wire/native")
# The loop's parts and the headers they include, in order of their names: native.source_digest()
# hashes the same files in the same order, and the first-use build compiles the same parts.
SOURCES = sorted(NATIVE.glob("hotloop*.c"))
HEADERS = sorted(NATIVE.glob("hotloop*.h"))


class BuildHotLoop(build_ext):
    def build_extensions(self) -> None:
        try:
            import libucx
        except ImportError:
            print("rdmabench: no libucx wheel in the build environment; the native loop is built on first use")
            return
        prefix = Path(libucx.__file__).parent
        version = (prefix / "VERSION.txt").read_text().strip()
        digest = hashlib.sha256(b"".join(path.read_bytes() for path in (*SOURCES, *HEADERS))).hexdigest()[:16]
        for ext in self.extensions:
            # UCX's headers as system headers: the loop's own warnings (-Wall -Wextra) stay visible.
            ext.extra_compile_args.append(f"-isystem{prefix / 'include'}")
            ext.library_dirs.append(str(prefix / "lib"))
            ext.libraries += ["ucp", "ucs"]
            # Installed beside the libucx wheel: site-packages/rdmabench/wire/native -> site-packages/libucx/lib.
            ext.runtime_library_dirs.append("$ORIGIN/../../../libucx/lib")
            ext.define_macros.append(("RB_BUILT_AGAINST", f'"{version}|{digest}"'))
        super().build_extensions()

    def get_export_symbols(self, ext: Extension) -> list[str]:
        return []  # a ctypes library: no PyInit_ function to export


setup(
    ext_modules=[Extension("rdmabench.wire.native._hotloop", [str(path) for path in SOURCES], extra_compile_args=["-O2", "-Wall", "-Wextra"], depends=[str(path) for path in HEADERS], optional=True)],
    cmdclass={"build_ext": BuildHotLoop},
)
