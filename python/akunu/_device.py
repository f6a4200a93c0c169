"""Python-side conveniences on Device that are natural in NumPy terms."""
from __future__ import annotations

import numpy as np

# NumPy dtype -> akunu dtype name (the dtype table in cpp/akunu/formats/dtype.cpp).
_AKUNU_DTYPES = {
    np.dtype(np.float32): "f32",
    np.dtype(np.float16): "f16",
    np.dtype(np.uint32): "u32",
    np.dtype(np.int32): "i32",
    np.dtype(np.uint8): "u8",
    np.dtype(np.int8): "i8",
}


def selector(device) -> str:
    """A device selector as Device::create takes it: an entry of akunu.devices(), its index or a name."""
    if isinstance(device, dict):  # an entry of akunu.devices()
        device = device["index"]
    return "" if device is None else str(device)


def split_selectors(devices, device: str, split) -> list[str]:
    """The selectors of a split over `devices` (docs/devices.md); [] when the model is not split.
    `device` (a selector, "" for none) may not be given beside them."""
    if devices is None:
        if split is not None:
            raise ValueError("split=[...] needs devices=[...]: the devices the layers are split across")
        return []
    if isinstance(devices, (str, int, dict)) or len(devices) == 0:
        raise ValueError(f"devices must be a non-empty list of device selectors, not {devices!r}")
    if device:
        raise ValueError("give either device= or devices= (a split across devices), not both")
    return [selector(d) for d in devices]


def akunu_dtype(dtype) -> str:
    """The akunu name of a NumPy dtype; raises ValueError for types akunu buffers do not hold."""
    try:
        return _AKUNU_DTYPES[np.dtype(dtype)]
    except KeyError:
        names = ", ".join(str(d) for d in _AKUNU_DTYPES)
        raise ValueError(f"akunu buffers hold {names}; got {np.dtype(dtype)}") from None


def upload(device, array, host_visible: bool = True):
    """Copies `array` into a new buffer whose numpy() has the array's shape and dtype."""
    array = np.ascontiguousarray(array)
    if array.size == 0:
        raise ValueError("cannot upload an empty array")
    buf = device.empty(list(array.shape), akunu_dtype(array.dtype), host_visible)
    buf.write(array)
    return buf
