"""Tensor descriptions for the built-in ops: torch tensors, numpy arrays (ml_dtypes for bf16 and
fp8) and any other DLPack producer, checked by name before anything is launched."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from .errors import InvalidArgumentError

# specjit_dtype codes (include/specjit/specjit.h), by the names torch and ml_dtypes use.
DTYPES = {"bfloat16": 0, "float16": 1, "float32": 2, "int32": 3, "int64": 4,
          "float8_e4m3fn": 5, "uint8": 6}
# DLPack (code, bits) -> name; float8_e4m3fn is DLPack 1.0's code 10.
_DL_DTYPES = {(4, 16): "bfloat16", (2, 16): "float16", (2, 32): "float32", (0, 32): "int32",
              (0, 64): "int64", (1, 8): "uint8", (10, 8): "float8_e4m3fn"}
_DL_CUDA, _DL_CUDA_MANAGED = 2, 13


@dataclass(frozen=True)
class TensorView:
    """What an op needs to know about a tensor: address, dtype name, shape, strides in
    elements, and where it lives (``cuda:N`` or another device name)."""

    data: int
    dtype: str
    shape: tuple
    strides: tuple
    device: str

    def is_contiguous(self) -> bool:
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self.strides)):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True


def _torch_view(t) -> TensorView:
    return TensorView(t.data_ptr(), str(t.dtype).removeprefix("torch."), tuple(t.shape),
                      tuple(t.stride()), str(t.device))


def _numpy_view(a) -> TensorView:
    item = a.itemsize
    return TensorView(a.ctypes.data, a.dtype.name, tuple(a.shape),
                      tuple(s // item for s in a.strides), "cpu")


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


def _dlpack_view(t) -> TensorView:
    capsule = t.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    dl = _DLTensor.from_address(get(capsule, b"dltensor"))
    shape = tuple(dl.shape[i] for i in range(dl.ndim))
    if dl.strides:
        strides = tuple(dl.strides[i] for i in range(dl.ndim))
    else:
        strides, step = [], 1
        for size in reversed(shape):
            strides.insert(0, step)
            step *= size
        strides = tuple(strides)
    dtype = _DL_DTYPES.get((dl.dtype.code, dl.dtype.bits), f"dlpack({dl.dtype.code},{dl.dtype.bits})")
    kind = dl.device.device_type
    device = f"cuda:{dl.device.device_id}" if kind in (_DL_CUDA, _DL_CUDA_MANAGED) else f"dlpack-device-{kind}"
    return TensorView((dl.data or 0) + dl.byte_offset, dtype, shape, strides, device)


def view(t, name: str) -> TensorView:
    """The TensorView of ``t``; ``name`` (the op's argument name) is in every error."""
    if t is None:
        raise InvalidArgumentError(f"{name}: missing argument (got None)")
    module = type(t).__module__
    if module.startswith("torch"):
        return _torch_view(t)
    if module == "numpy" and hasattr(t, "ctypes"):
        return _numpy_view(t)
    if hasattr(t, "__dlpack__"):
        return _dlpack_view(t)
    raise InvalidArgumentError(f"{name}: expected a tensor (torch, numpy or DLPack), got a "
                               f"{type(t).__name__}")


def check(t, name: str, dtype: str | tuple, shape: tuple) -> TensorView:
    """Checks dtype, shape (ints, or None for any size) and contiguity, in that order."""
    v = view(t, name)
    dtypes = (dtype,) if isinstance(dtype, str) else dtype
    if v.dtype not in dtypes:
        raise InvalidArgumentError(f"{name}: dtype {v.dtype}, expected {' or '.join(dtypes)}")
    if len(v.shape) != len(shape) or any(e is not None and e != s for s, e in zip(v.shape, shape)):
        want = "[" + ", ".join("*" if e is None else str(e) for e in shape) + "]"
        raise InvalidArgumentError(f"{name}: shape {list(v.shape)}, expected {want}")
    if not v.is_contiguous():
        raise InvalidArgumentError(f"{name}: not contiguous (strides {list(v.strides)}); "
                                   "pass .contiguous()")
    return v


def check_devices(views: dict) -> None:
    """Every tensor in CUDA memory, all on one device (the checks after dtype and shape)."""
    devices = {}
    for name, v in views.items():
        if v is None:
            continue
        if not v.device.startswith("cuda"):
            raise InvalidArgumentError(f"{name}: a tensor on the {v.device}, expected a CUDA tensor")
        devices.setdefault(v.device, name)
    if len(devices) > 1:
        raise InvalidArgumentError("tensors on different devices: " +
                                   ", ".join(f"{n} on {d}" for d, n in devices.items()))


def descriptor(v: TensorView | None):
    """The (data, dtype code, shape, strides) tuple the native module reads, or None."""
    if v is None:
        return None
    return (v.data, DTYPES[v.dtype], v.shape, v.strides)
