"""Builds cudaev._native (stable ABI, one wheel for CPython >= 3.11) and puts
the standalone libcudaev.so.1 beside it in the package.

libcudaev.so.1 comes from $CUDAEV_BUILD_DIR (default: ../build, the tree's
usual meson build); when it is not there, this runs `meson setup` and builds
only that library in a private folder (python/build-meson). The CUDA
toolkit's headers (cudaev.h includes cuda_runtime_api.h) come from
$CUDAEV_TOOLKIT, else the build's `toolkit` option, else /usr/local/cuda.
"""
import json
import os
import shutil
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LIB = "libcudaev.so.1"


def _build_dir():
    d = os.environ.get("CUDAEV_BUILD_DIR") or os.path.join(ROOT, "build")
    if os.path.isfile(os.path.join(d, LIB)):
        return d
    own = os.path.join(HERE, "build-meson")
    if not os.path.isfile(os.path.join(own, "build.ninja")):
        print(f"cudaev: no {LIB} in {d}: building it in {own}", flush=True)
        subprocess.check_call(["meson", "setup", own, ROOT, "-Dtests=false",
                               "-Dgpu_programs=false"])
    subprocess.check_call(["ninja", "-C", own, LIB])
    return own


def _toolkit(build_dir):
    t = os.environ.get("CUDAEV_TOOLKIT")
    if t:
        return t
    try:
        with open(os.path.join(build_dir, "meson-info", "intro-buildoptions.json")) as f:
            for o in json.load(f):
                if o["name"] == "toolkit":
                    return o["value"]
    except (OSError, ValueError, KeyError):
        pass
    return "/usr/local/cuda"


class BuildExt(build_ext):
    """Links against the built libcudaev.so.1 and carries it in the package,
    found at run time through RPATH $ORIGIN."""

    def build_extensions(self):
        bdir = _build_dir()
        lib = os.path.join(bdir, LIB)
        inc = os.path.join(_toolkit(bdir), "include")
        if not os.path.isfile(os.path.join(inc, "cuda_runtime_api.h")):
            raise SystemExit(f"cudaev: no cuda_runtime_api.h under {inc}: set CUDAEV_TOOLKIT "
                             "to the CUDA 13 toolkit")
        for ext in self.extensions:
            ext.include_dirs += [os.path.join(ROOT, "include"), inc]
            ext.extra_link_args += [os.path.realpath(lib), "-Wl,-rpath,$ORIGIN"]
        super().build_extensions()
        dest = os.path.join(self.build_lib, "cudaev")
        os.makedirs(dest, exist_ok=True)
        shutil.copyfile(os.path.realpath(lib), os.path.join(dest, LIB))
        self._lib = lib

    def run(self):
        super().run()
        if self.inplace:  # setuptools builds with inplace off, then copies
            shutil.copyfile(os.path.realpath(self._lib), os.path.join(HERE, "cudaev", LIB))


setup(
    ext_modules=[Extension(
        "cudaev._native",
        sources=["cudaev/_native.c", "cudaev/_op.c", "cudaev/_loop.c"],
        depends=["cudaev/_native.h", "cudaev/_compat.h"],
        define_macros=[("Py_LIMITED_API", "0x030B0000")],
        extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter",
                            "-Wno-missing-field-initializers", "-fvisibility=hidden"],
        py_limited_api=True,
    )],
    cmdclass={"build_ext": BuildExt},
    options={"bdist_wheel": {"py_limited_api": "cp311"}},
)
