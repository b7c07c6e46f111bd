"""Does loading qcoll.torch's compiled extension stop Triton compiling?
One process: `order` says when the extension is loaded relative to the
first torch.compile'd kernel ("before", "after", "none"); each compiled
function is a plain x * k, nothing of qcoll in it.  Prints the outcome of
each compile, the compiler the extension was built with, and the C++
runtime libraries the process maps."""
import sys

import torch

order = sys.argv[1]


def compile_and_run(k):
    f = torch.compile(lambda x: x * k)
    try:
        y = f(torch.ones(4096, device="cuda"))
        torch.cuda.synchronize()
        return f"ok ({y.sum().item():.0f})"
    except Exception as e:  # noqa: BLE001  (the probe reports any failure)
        return f"FAILED: {type(e).__name__}: {str(e).splitlines()[0][:200]}"


def load_extension():
    import qcoll.torch  # noqa: F401
    from qcoll import _torch_ext

    s = _torch_ext.load()
    p = _torch_ext.plan()
    return f"loaded {s.loaded} compiler {p.compiler} note {p.compiler_note!r}"


def environment():
    """What Triton's choice of tools may depend on."""
    import os

    keys = ("CUDA_HOME", "CUDA_PATH", "CXX", "CC", "PATH", "LD_LIBRARY_PATH")
    env = {k: os.environ.get(k) for k in keys}
    env.update({k: v for k, v in os.environ.items() if k.startswith("TRITON")})
    try:
        import triton

        ptxas = triton.knobs.nvidia.ptxas
        env["ptxas"] = f"{ptxas.path} {ptxas.version}"
    except Exception as e:  # noqa: BLE001
        env["ptxas"] = f"unknown ({type(e).__name__}: {e})"
    return env


def load_library(mode):
    """libqcoll alone, as the extension opens it (global) or not."""
    import ctypes
    import os

    ctypes.CDLL(os.environ["QCOLL_LIB"], mode=mode)
    return f"libqcoll opened with mode {mode}"


print("env before:", environment(), flush=True)
if order == "lib-global":
    import ctypes
    print("extension:", load_library(ctypes.RTLD_GLOBAL), flush=True)
if order == "lib-local":
    print("extension:", load_library(0), flush=True)
if order == "before":
    print("extension:", load_extension(), flush=True)
print("compile 1:", compile_and_run(2), flush=True)
if order == "after":
    print("extension:", load_extension(), flush=True)
print("compile 2:", compile_and_run(3), flush=True)
print("env after:", environment(), flush=True)
with open("/proc/self/maps") as maps:
    libs = sorted({line.split()[-1] for line in maps
                   if any(k in line for k in ("libstdc++", "libgcc_s", "qcoll", "LLVM",
                                               "MLIR", "nvJitLink", "nvrtc",
                                               "cudart", "libtriton", "libz"))})
print("mapped:", " ".join(libs), flush=True)
