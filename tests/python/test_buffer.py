"""Buffers as NumPy arrays: zero-copy views both ways, copies when not host-visible, lifetimes,
accounting and bad sizes."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import akunu
from akunu import ops
from support.fixture_paths import require


def test_upload_roundtrip_keeps_shape_and_dtype(device, rng):
    for dtype in (np.float32, np.float16, np.int32, np.uint8):
        a = (rng.standard_normal((3, 5, 7)) * 50).astype(dtype)
        buf = device.upload(a)
        assert buf.shape == (3, 5, 7) and buf.size == a.nbytes
        np.testing.assert_array_equal(buf.numpy(), a)


def test_view_is_zero_copy_both_ways(device):
    buf = device.empty([1001], "f32")
    if not buf.host_visible:
        pytest.skip("this device's memory is not host-visible, so views are copies (covered below)")
    view = buf.numpy()
    assert view.base is not None
    # A write through the view is seen by a kernel ...
    view[:] = np.arange(1001, dtype=np.float32)
    out = device.empty([1001], "f32")
    ops.add(buf, buf, out)
    np.testing.assert_array_equal(out.numpy(), 2 * np.arange(1001, dtype=np.float32))
    # ... and a kernel's write is seen through the view, with no read call.
    ops.fill(buf, 7.0)
    assert np.all(view == 7.0)
    assert np.shares_memory(view, buf.numpy())


def test_view_keeps_its_buffer_and_device_alive():
    dev = akunu.Device()
    buf = dev.upload(np.arange(17, dtype=np.float32))
    if not buf.host_visible:
        pytest.skip("views are copies on this device")
    view = buf.numpy()
    del buf, dev
    gc.collect()
    np.testing.assert_array_equal(view, np.arange(17, dtype=np.float32))  # memory still mapped
    view[3] = -1.0


def test_not_host_visible_gives_an_explicit_copy(device, rng):
    a = rng.standard_normal(333).astype(np.float32)
    buf = device.upload(a, host_visible=False)
    assert not buf.host_visible
    copy = buf.numpy()
    np.testing.assert_array_equal(copy, a)
    copy[:] = 0  # a copy: the buffer is unchanged
    np.testing.assert_array_equal(buf.numpy(), a)
    out = device.empty([333], "f32", host_visible=False)
    ops.add(buf, buf, out)  # kernels work the same on unmapped memory
    np.testing.assert_array_equal(out.numpy(), 2 * a)


def test_numpy_reinterprets_dtype_and_shape(device):
    buf = device.upload(np.arange(12, dtype=np.float32))
    np.testing.assert_array_equal(buf.numpy(shape=(3, 4)), np.arange(12, dtype=np.float32).reshape(3, 4))
    assert buf.numpy("u32")[1] == np.float32(1).view(np.uint32)
    with pytest.raises(akunu.Error, match="does not fit"):
        buf.numpy(shape=(4, 4))


def test_accounting(device):
    before_bytes, before_live = device.allocated_bytes, device.live_buffers
    total = device.allocations_total
    a = device.allocate(4096)
    b = device.empty([100, 3], "f16")
    assert device.live_buffers == before_live + 2
    assert device.allocated_bytes >= before_bytes + 4096 + 600
    del a
    b.free()
    gc.collect()
    assert device.live_buffers == before_live
    assert device.allocated_bytes == before_bytes
    assert device.allocations_total == total + 2


def test_a_models_staged_reads_are_planned_at_load(backend):
    """A model reserves its device's staging area for its logits row at load: reads of unmapped
    memory that fit it (the logits where the host cannot map them) allocate nothing, however
    many; the CPU backend stages nothing."""
    m = akunu.Model(require("tiny-llama3-random", "gguf", "tiny-llama3-random-q8_0.gguf"), context=64,
                    progress=False)
    dev = m.device
    if backend == "cpu":
        assert dev.staging_bytes == 0
        return
    vocab_bytes = m.config.vocab_size * 4
    assert dev.staging_bytes >= vocab_bytes
    data = np.arange(m.config.vocab_size, dtype=np.float32)
    buf = dev.allocate(vocab_bytes, host_visible=False)
    buf.write(data)
    total = dev.allocations_total
    for _ in range(4):
        assert np.frombuffer(buf.read_bytes(vocab_bytes), np.float32).tolist() == data.tolist()
    assert dev.allocations_total == total


def test_free_refuses_while_views_live(device):
    buf = device.empty([8], "f32")
    if not buf.host_visible:
        pytest.skip("views are copies on this device")
    view = buf.numpy()
    assert buf.live_views == 1
    with pytest.raises(akunu.Error, match="view"):
        buf.free()
    del view
    gc.collect()
    buf.free()
    with pytest.raises(akunu.Error, match="freed"):
        buf.numpy()


def test_a_command_list_keeps_the_buffers_it_recorded(backend, rng):
    """Temporaries passed to kernels and dropped before submit stay alive until the list is
    restarted (before, their memory was freed under the recorded commands: validation errors
    on Vulkan, a crash on the CPU backend)."""
    from akunu._akunu import kernels

    device = akunu.Device(backend)
    x = rng.standard_normal(1003).astype(np.float32)
    out = device.empty([1003], "f32")
    out.write(np.full(1003, np.nan, np.float32))
    cl = akunu.CommandList(device)
    cl.begin()
    kernels.copy(cl, device.upload(x), out, x.nbytes)
    kernels.fill(cl, device.empty([7], "f32"), "f32", 7, 1.0)
    gc.collect()
    cl.end()
    cl.submit()
    cl.wait()
    np.testing.assert_array_equal(out.numpy(), x)
    # A buffer in a recorded list is not freed under it; after begin() it can be.
    src = device.upload(x)
    cl.begin()
    kernels.copy(cl, src, out, x.nbytes)
    cl.end()
    with pytest.raises(akunu.Error, match="1 CommandList"):
        src.free()
    cl.submit()
    cl.wait()
    cl.begin()
    src.free()
    cl.end()


def test_bad_sizes_are_clear_errors(device):
    with pytest.raises(akunu.Error, match="0 bytes"):
        device.allocate(0)
    with pytest.raises(akunu.Error, match="largest memory heap"):
        device.allocate(1 << 50)
    with pytest.raises(ValueError, match="empty array"):
        device.upload(np.zeros(0, np.float32))
    with pytest.raises(ValueError, match="akunu buffers hold"):
        device.upload(np.zeros(3, np.complex64))
    buf = device.allocate(16)
    with pytest.raises(akunu.Error, match="outside a buffer"):
        buf.write(np.zeros(5, np.float32))


def test_read_bytes_past_the_end_is_a_clear_error(device):
    """read_bytes(2**63) used to report basic_string::_M_create (allocating before checking)."""
    b = device.upload(np.arange(4, dtype=np.uint32))
    for nbytes, offset in ((2**63, 0), (17, 0), (4, 13), (1, 2**64 - 1)):
        with pytest.raises(ValueError, match="run past the buffer's 16 bytes"):
            b.read_bytes(nbytes, offset)
    assert b.read_bytes(4, 12) == np.uint32(3).tobytes()
