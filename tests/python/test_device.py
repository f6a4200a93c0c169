"""Device listing, profiles, selection and the validation layer, from Python."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import akunu
from support.fixture_paths import require
from support.kernel_cases import _device


def test_devices_lists_name_type_vendor_memory_features():
    devices = akunu.devices()
    assert len(devices) >= 2, "at least lavapipe and the CPU backend must be present"
    assert [d["backend"] for d in devices] == ["vulkan"] * (len(devices) - 1) + ["cpu"]
    for i, d in enumerate(devices):
        assert d["index"] == i
        assert d["name"]
        assert d["type"] in {"discrete", "integrated", "virtual", "cpu", "other"}
        assert d["vendor"]
        assert d["heaps"] and all(h["size_bytes"] > 0 for h in d["heaps"])
        assert d["subgroup_size"] >= 1
        for feature in ("fp16", "int8", "integer_dot_product", "cooperative_matrix", "unified_memory"):
            assert isinstance(d[feature], bool)
    order = ["discrete", "integrated", "virtual", "cpu", "other"]
    ranks = [order.index(d["type"]) for d in devices]
    assert ranks == sorted(ranks)


def test_devices_name_their_kind():
    """lavapipe and the CPU backend are both CPUs; their kinds tell them apart."""
    kinds = [d["kind"] for d in akunu.devices()]
    assert kinds[-1] == "akunu CPU backend" and kinds.count("akunu CPU backend") == 1
    for d in akunu.devices()[:-1]:
        if "llvmpipe" in d["name"]:
            assert d["kind"] == "lavapipe (Vulkan on CPU)"
        elif d["type"] != "cpu":
            assert d["kind"].endswith("GPU (Vulkan)")
    assert akunu.Device("cpu").kind == "akunu CPU backend"


def test_the_default_is_a_gpu_else_the_cpu_backend_never_lavapipe():
    """Without AKUNU_DEVICE: the first Vulkan GPU, else akunu's CPU backend, and find_device says why."""
    r = _run_python(
        """
        import akunu
        d = akunu.find_device()
        print("CHOSEN:", d["index"], d["kind"], akunu.Device().kind)
        print("WHY:", d["reason"])
        """,
        AKUNU_DEVICE="",
    )
    assert r.returncode == 0, r.stderr
    gpus = [d for d in akunu.devices() if d["backend"] == "vulkan" and d["type"] != "cpu"]
    if gpus:
        assert f"CHOSEN: {gpus[0]['index']} {gpus[0]['kind']}" in r.stdout and "WHY: the default" in r.stdout
    else:
        last = akunu.devices()[-1]
        assert f"CHOSEN: {last['index']} akunu CPU backend akunu CPU backend" in r.stdout, r.stdout
        assert "run on the CPU" in r.stdout or "no Vulkan device" in r.stdout, r.stdout
    assert "asked for: AKUNU_DEVICE 'cpu'" in _run_python(
        "import akunu; print(akunu.find_device()['reason'])", AKUNU_DEVICE="cpu").stdout


def test_errors_are_akunu_error():
    assert akunu.Error.__module__ == "akunu" and repr(akunu.Error) == "<class 'akunu.Error'>"
    assert repr(akunu.ContextWarning) == "<class 'akunu.ContextWarning'>"
    r = _run_python("import akunu; akunu.Device('no-such-device-qq')")
    assert "akunu.Error: device 'no-such-device-qq'" in r.stderr and "_akunu" not in r.stderr, r.stderr


def test_validation_is_on_for_the_suite():
    assert akunu.validation_enabled()


def test_device_by_index_and_name(device):
    first = akunu.devices()[0]["name"]
    assert akunu.Device("0").name == first
    assert akunu.Device(0).name == first
    with pytest.raises(akunu.Error, match="matches no device"):
        akunu.Device(len(akunu.devices()))
    with pytest.raises(akunu.Error, match=">= 0"):
        akunu.Device(-1)
    assert akunu.Device(first[:5].upper()).name == first
    assert device.profile["name"] == first
    assert "subgroup size" in device.describe()


def _run_python(code: str, **env) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True,
                          text=True, timeout=120)


def test_unknown_akunu_device_lists_devices():
    r = _run_python(
        """
        import akunu
        try:
            akunu.Device()
        except akunu.Error as e:
            print("ERROR:", e)
        """,
        AKUNU_DEVICE="no-such-device-qq",
    )
    assert r.returncode == 0, r.stderr
    assert "AKUNU_DEVICE 'no-such-device-qq' matches no device" in r.stdout
    for d in akunu.devices():  # the CPU backend too, with its index
        assert f"{d['index']}: {d['name']}" in r.stdout


def test_the_cpu_backend_is_listed_last_and_selectable():
    """devices() ends with akunu's CPU backend; its index, its name and the entry itself open it,
    and a model loaded with it runs there (the same logits as device="cpu")."""
    entry = akunu.devices()[-1]
    assert entry["backend"] == "cpu" and entry["type"] == "cpu" and entry["name"].startswith("akunu CPU (")
    assert entry["index"] == len(akunu.devices()) - 1
    assert "no Vulkan" in entry["description"] and "Vulkan 0.0.0" not in entry["description"]
    for selector in (entry["index"], str(entry["index"]), entry["name"], entry["name"].upper(), "cpu"):
        d = akunu.Device(selector)
        assert d.backend == "cpu" and d.name == entry["name"], selector
    assert akunu.Device(0).backend == "vulkan" and akunu.Device("vulkan").backend == "vulkan"
    path = require("tiny-llama3-random", "gguf", "tiny-llama3-random-f16.gguf")
    ids = [1, 450, 1996, 17]
    want = akunu.Model(path, context=64, device="cpu", progress=False).eval(ids).copy()
    for device in (entry, entry["index"]):
        m = akunu.Model(path, context=64, device=device, progress=False)
        assert m.device.name == entry["name"] and m.device.backend == "cpu"
        np.testing.assert_array_equal(m.eval(ids, reset=False), want)
    assert akunu.plan(path, context=64, device=entry["index"]).device == entry["name"]


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"AKUNU_VULKAN_LIBRARY": "/nonexistent/libvulkan.so.1"}, "could not load the Vulkan loader"),
        ({"VK_DRIVER_FILES": "/nonexistent/icd.json", "VK_ICD_FILENAMES": "/nonexistent/icd.json"},
         "mesa-vulkan-drivers"),
    ],
    ids=["no-loader", "no-driver"],
)
def test_missing_vulkan_is_a_clear_error_not_a_crash(env, expected):
    """Without Vulkan, devices() lists the CPU backend alone and asking for Vulkan says why."""
    r = _run_python(
        """
        import akunu
        print("DEVICES:", [(d["index"], d["backend"]) for d in akunu.devices()])
        try:
            akunu.Device("vulkan")
        except akunu.Error as e:
            print("ERROR:", e)
        else:
            print("NO ERROR")
        """,
        AKUNU_VALIDATION="0",
        **env,
    )
    assert r.returncode == 0, r.stderr  # the process did not crash
    assert "DEVICES: [(0, 'cpu')]" in r.stdout, r.stdout
    assert "ERROR: device 'vulkan'" in r.stdout and expected in r.stdout, r.stdout


def test_kernel_statistics(device):
    """What the driver compiled a kernel to: numbers per statistic for each pipeline made,
    registers among them, on drivers with VK_KHR_pipeline_executable_properties; nothing, not
    an error, elsewhere (lavapipe, the CPU backend)."""
    from akunu import ops

    x = device.upload(np.arange(37, dtype=np.float32))
    y = device.empty([37], "f32")
    ops.add(x, x, y)
    np.testing.assert_array_equal(y.numpy(), 2 * np.arange(37, dtype=np.float32))
    stats = device.kernel_statistics()
    if not device.profile["kernel_statistics"]:
        assert stats == []
        pytest.skip("the device does not report kernel statistics (needs VK_KHR_pipeline_executable_properties)")
    add = [s for s in stats if s["kernel"].startswith("add")]
    assert add, f"no statistics for the add kernel that just ran: {[s['kernel'] for s in stats]}"
    for s in add:
        assert s["statistics"] and all(isinstance(v, float) for v in s["statistics"].values())
    assert any("register" in name.lower() and v > 0 for s in add for name, v in s["statistics"].items())
    assert "add" in akunu.kernel_statistics_table(stats, {s["kernel"] for s in add})


@pytest.mark.parametrize("kernel_code", [False, True])
def test_kernel_code(backend, kernel_code):
    """With tuning kernel_code, each kernel's row of kernel_statistics() carries the driver's
    internal representations of it (text, or a binary's size); without it, none."""
    from akunu import ops

    device = _device(backend, f"kernel_code={int(kernel_code)}")
    x = device.upload(np.arange(37, dtype=np.float32))
    y = device.empty([37], "f32")
    ops.add(x, x, y)
    stats = device.kernel_statistics()
    if not device.profile["kernel_statistics"]:
        assert stats == []
        pytest.skip("the device does not report kernel statistics (needs VK_KHR_pipeline_executable_properties)")
    add = [s for s in stats if s["kernel"].startswith("add")]
    assert add and all(s["statistics"] for s in add)  # capturing the code keeps the statistics
    code = [c for s in add for c in s["code"]]
    if not kernel_code:
        assert code == []
        return
    if not code:
        pytest.skip(f"{device.profile['name']}'s driver keeps no internal representation of a kernel")
    assert all(c["name"] and (c["text"] or c["binary_bytes"] > 0) for c in code)


def test_kernel_statistics_table():
    stats = [{"kernel": "gemv_q4_0_t32", "spec": [512, 2, 0, 128], "statistics": {"Register Count": 40.0}},
             {"kernel": "add_f32", "spec": [], "statistics": {"Register Count": 8.0, "Spills": 0.0}}]
    assert akunu.kernel_statistics_table(stats).splitlines() == [
        "add_f32[]  Register Count 8, Spills 0",
        "gemv_q4_0_t32[512:2:0:128]  Register Count 40",
    ]
    assert akunu.kernel_statistics_table(stats, {"add_f32"}) == "add_f32[]  Register Count 8, Spills 0"
