"""Device listing, profiles, selection and the validation layer, from Python."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import akunu


def test_devices_lists_name_type_vendor_memory_features():
    devices = akunu.devices()
    assert devices, "at least lavapipe must be present"
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


def test_validation_is_on_for_the_suite():
    assert akunu.validation_enabled()


def test_device_by_index_and_name(device):
    first = akunu.devices()[0]["name"]
    assert akunu.Device("0").name == first
    assert akunu.Device(0).name == first
    with pytest.raises(akunu.Error, match="matches no Vulkan device"):
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
    assert "AKUNU_DEVICE 'no-such-device-qq' matches no Vulkan device" in r.stdout
    assert akunu.devices()[0]["name"] in r.stdout


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
    r = _run_python(
        """
        import akunu
        try:
            akunu.devices()
        except akunu.Error as e:
            print("ERROR:", e)
        else:
            print("NO ERROR")
        """,
        AKUNU_VALIDATION="0",
        **env,
    )
    assert r.returncode == 0, r.stderr  # the process did not crash
    assert "ERROR:" in r.stdout and expected in r.stdout, r.stdout
