"""Buffers past what a discrete GPU maps for the host: a GPU may map (ReBAR) less of its memory
than it holds (bench/NOTES.md, "Mapped memory runs out before device memory does"). Buffers
that would be mapped where they can (Model's weights, KV caches, scratch) then go to the rest
of the device's memory, unmapped, and read and write through the staging area; the device
fills to its capacity, not to the mapped ceiling."""
from __future__ import annotations

import numpy as np
import pytest

import akunu


@pytest.mark.gpu
def test_buffers_fill_the_device_past_its_mapped_memory():
    d = akunu.Device("vulkan")
    local = d.profile["device_local_bytes"]
    piece = 2 << 30  # bytes a buffer: under the largest allocation (4 GiB on NVIDIA)
    bufs = []
    with pytest.raises(akunu.Error, match="out of memory"):
        for _ in range(local // piece + 2):
            bufs.append(d.empty([piece // 4], "f32"))
    # Within a few buffers of the device's memory (the driver and the display keep some).
    assert len(bufs) * piece >= local - 8 * piece, f"{len(bufs)} x 2 GiB on a device of {local >> 30} GiB"
    x = np.arange(1 << 20, dtype=np.float32)
    for b in {id(b): b for b in (bufs[0], bufs[-1])}.values():  # a mapped one and, past the ceiling, an unmapped one
        b.write(x, offset=4 * 12345)
        np.testing.assert_array_equal(np.frombuffer(b.read_bytes(x.nbytes, 4 * 12345), np.float32), x)
    del bufs
    # The memory comes back: a model-sized buffer fits again.
    assert d.empty([piece // 4], "f32").size == piece
