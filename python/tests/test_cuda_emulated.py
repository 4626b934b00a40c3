"""The package's GPU path without a GPU: a child process runs trtc on the
emulated CUDA driver (kernels/emu/libcuda.cpp; the Rust tests build it with
trtc_kernels::emu::build_driver, this test with the same g++ command), whose
launches run the real kernels on the CPU. In it, an sm_90 engine of the
example CNN runs on a context with device='cuda' through `run` (host
arrays) and `run_device` (objects with __cuda_array_interface__ whose
memory the driver allocated), and both must give the CPU context's
outputs. A child process, because the driver library is loaded once per
process."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

CHILD = r'''
import ctypes, os, sys, warnings
import numpy as np
import trtc

lib = ctypes.CDLL(os.environ["TRTC_LIBCUDA"])
engine = trtc.build(sys.argv[1], target="sm_90", opt_level=0)  # heuristic tactics: timing them on the emulator means nothing
x = np.random.default_rng(0).random((1, 3, 32, 32)).astype(np.float32)
cpu = engine.create_context(device="cpu").run({"input": x})
gpu_ctx = engine.create_context(device="cuda")
assert gpu_ctx.device == "cuda:0", gpu_ctx.device
gpu = gpu_ctx.run({"input": x})
name = next(iter(cpu))
scale = float(np.abs(cpu[name]).max())
err = float(np.abs(gpu[name] - cpu[name]).max()) / scale
assert err < 3e-3, f"run on the GPU context: {err:.2e} of scale from the CPU context"


class DeviceArray:
    """Driver-allocated memory that describes itself as a CUDA array."""

    def __init__(self, shape):
        self.shape = shape
        self.nbytes = int(np.prod(shape)) * 4
        ptr = ctypes.c_uint64()
        assert lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(self.nbytes)) == 0
        self.ptr = ptr.value
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f4", "data": (self.ptr, False), "version": 3}

    def upload(self, a):
        assert lib.cuMemcpyHtoD_v2(ctypes.c_uint64(self.ptr), a.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(self.nbytes)) == 0

    def download(self):
        out = np.empty(self.shape, np.float32)
        assert lib.cuMemcpyDtoHAsync_v2(out.ctypes.data_as(ctypes.c_void_p), ctypes.c_uint64(self.ptr), ctypes.c_size_t(self.nbytes), None) == 0
        return out


d_in, d_out = DeviceArray(x.shape), DeviceArray(cpu[name].shape)
d_in.upload(x)
gpu_ctx.run_device({"input": d_in}, {name: d_out})
err = float(np.abs(d_out.download() - cpu[name]).max()) / scale
assert err < 3e-3, f"run_device: {err:.2e} of scale from the CPU context"
print(f"emulated GPU: run and run_device within {err:.1e} of the CPU context's {name}")
'''


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    if shutil.which("g++") is None:
        pytest.fail("g++ is needed to build the emulated CUDA driver")
    out = tmp_path_factory.mktemp("driver") / "libcuda.so.1"
    subprocess.run(
        ["g++", "-std=c++20", "-O1", "-Wall", "-Werror", "-shared", "-fPIC", "-fvisibility=hidden", "-Wl,-soname,libcuda.so.1",
         "-o", str(out), str(REPO / "kernels" / "emu" / "libcuda.cpp"), "-ldl"],
        check=True,
    )
    return out


def test_gpu_context_runs_on_the_emulated_driver(driver, example_model):
    # The modules' emulator programs, compiled once: where the Rust tests of
    # the emulated driver keep theirs (target/tmp is cargo's test scratch).
    modules = REPO / "target" / "tmp" / "emulated-driver" / "modules"
    env = dict(os.environ, TRTC_LIBCUDA=str(driver), TRTC_EMU_MODULES=str(modules))
    done = subprocess.run([sys.executable, "-c", CHILD, str(example_model)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"child failed:\n{done.stdout}\n{done.stderr}"
    assert "emulated GPU: run and run_device" in done.stdout, done.stdout
