"""The one tuning object (core/tuning.h) and the page generated from it: docs/configuration.md is
current, the engine reads the environment in one file, every AKUNU_* variable the sources read
or tell a reader to set is on the page, and settings reach the device from AKUNU_TUNE and from
tuning= with clear errors for what is not a key or not a value."""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import akunu
from akunu import _akunu
from support.fixture_paths import require

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "configuration.md"


def test_configuration_page_is_current():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "config_docs.py"), "--check"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, ("docs/configuration.md is out of date (python scripts/config_docs.py):\n"
                               f"{r.stdout}{r.stderr}")


def _sources(*patterns):
    for pattern in patterns:
        yield from (p for p in ROOT.glob(pattern) if p.is_file())


def test_only_the_tuning_module_reads_the_environment():
    readers = sorted(str(p.relative_to(ROOT)) for p in _sources("cpp/**/*.cpp", "cpp/**/*.h")
                     if re.search(r"\bgetenv\s*\(", p.read_text(encoding="utf-8")))
    assert readers == ["cpp/akunu/core/tuning.cpp"]


def _documented() -> set[str]:
    # The variables in the page's tables (its prose also names the scripts' own).
    return set(re.findall(r"^\| `(AKUNU_[A-Z0-9_]+)`", PAGE.read_text(encoding="utf-8"), re.M))


def test_every_variable_the_package_reads_is_documented():
    # The engine names its variables as string literals in one table; the Python package reads
    # its own through os.environ.
    read = set(re.findall(r'"(AKUNU_[A-Z0-9_]+)"', (ROOT / "cpp/akunu/core/tuning.cpp").read_text(encoding="utf-8")))
    for p in _sources("python/akunu/*.py"):
        read |= set(re.findall(r'environ(?:\.get)?[\[(]\s*"(AKUNU_[A-Z0-9_]+)"', p.read_text(encoding="utf-8")))
    assert "AKUNU_DEVICE" in read and "AKUNU_CACHE" in read  # the patterns see what they should
    assert read == _documented()


def test_no_source_tells_a_reader_to_set_a_retired_variable():
    # "AKUNU_X=1" in a comment, docstring or message of the engine or the package is an
    # instruction; each must name a variable that exists (the scripts' own are not engine settings).
    documented = _documented()
    stale = []
    for p in _sources("cpp/**/*.cpp", "cpp/**/*.h", "python/akunu/*.py", "shaders/*.comp", "shaders/include/*"):
        for name in re.findall(r"\b(AKUNU_[A-Z0-9_]+)=", p.read_text(encoding="utf-8")):
            if name not in documented:
                stale.append(f"{p.relative_to(ROOT)}: {name}")
    assert not stale, "settings that no longer exist:\n" + "\n".join(stale)


def test_tuning_reaches_the_device_from_both_sides(monkeypatch):
    monkeypatch.setenv("AKUNU_TUNE", "float_x=1, gemv_handoff=1")
    d = akunu.Device("cpu", tuning={"gemv_handoff": False, "gemm_short_rows": None, "gemv_rows": "8:2"})
    # AKUNU_TUNE first, then the caller's settings over it.
    assert d.tuning_value("float_x") == "1" and d.tuning_value("gemv_handoff") == "0"
    assert d.tuning_value("gemm_short_rows") == "auto" and d.tuning_value("gemv_rows") == "8:2"
    assert d.profile["tuning"] == "float_x=1,gemv_handoff=0,gemv_rows=8:2"
    monkeypatch.delenv("AKUNU_TUNE")
    assert akunu.Device("cpu").profile["tuning"] == ""


def test_tuning_changes_the_vulkan_profile():
    base = akunu.Device("vulkan") if any(d["backend"] == "vulkan" for d in akunu.devices()) else None
    if base is None:
        pytest.skip("no Vulkan device here: the CPU backend's profile has no Vulkan policy fields to change")
    tuned = akunu.Device("vulkan", tuning="gemv_handoff=1,norm_forward=0,prefill_dequant_rows=7,weight_tiles=0")
    assert tuned.profile["gemv_handoff"] and not tuned.profile["norm_forward"]
    assert tuned.profile["prefill_dequant_rows"] == 7 and tuned.profile["weight_tiles"] == "none"
    assert akunu.Device("vulkan", tuning="gemv_handoff=0").profile["gemv_handoff"] is False
    assert base.profile["norm_forward"]
    # Polled waits: auto leaves them to GPUs (a CPU-type device's threads need the core).
    assert base.profile["spin_wait"] == (base.profile["type"] != "cpu")
    assert akunu.Device("vulkan", tuning="spin_wait=1").profile["spin_wait"] is True


def test_polled_waits_give_the_same_steps():
    """spin_wait=1 on lavapipe (a CPU-type device, off by default) only changes how the host
    waits: the same logits, step by step and through generate."""
    if not any(d["backend"] == "vulkan" for d in akunu.devices()):
        pytest.skip("no Vulkan device here: the CPU backend's submissions finish before they return")
    path = require("tiny-llama3-random", "gguf", "tiny-llama3-random-f16.gguf")
    runs = []
    for tuning in ("spin_wait=0", "spin_wait=1"):
        m = akunu.Model(path, device="vulkan", context=64, tuning=tuning, progress=False)
        assert m.device.profile["spin_wait"] is tuning.endswith("1")
        steps = [m.eval([t], reset=False).copy() for t in (1, 5, 9, 13)]
        runs.append((np.stack(steps), m.generate([1, 5, 9], max_tokens=12, stream=False).token_ids))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    assert runs[0][1] == runs[1][1]


@pytest.mark.parametrize("settings, message", [
    ("warp_speed=1", "unknown tuning key 'warp_speed'; the keys are: coopmat,"),
    ("int_dot=maybe", "tuning key 'int_dot' takes 1 or 0"),
    ("gemm_short_rows=-3", "tuning key 'gemm_short_rows' takes 'auto' or a whole number"),
    ("gemv_handoff", "tuning setting 'gemv_handoff' needs the form key=value"),
    ({"float_x": 2.5}, "tuning key 'float_x' takes 1 or 0"),
])
def test_bad_tuning_is_a_clear_error(settings, message):
    with pytest.raises(akunu.Error, match=re.escape(message)):
        akunu.Device("cpu", tuning=settings)


def test_bad_akunu_tune_names_the_variable():
    env = {**os.environ, "AKUNU_TUNE": "nonsense=1"}
    r = subprocess.run([sys.executable, "-c", "import akunu; akunu.Device('cpu')"], capture_output=True, text=True,
                       env=env)
    assert r.returncode != 0 and "AKUNU_TUNE: unknown tuning key 'nonsense'" in r.stderr


def test_keys_table_matches_the_struct_defaults():
    keys = {k["name"]: k for k in _akunu.tuning_keys()}
    assert len(keys) == len(_akunu.tuning_keys()), "a key is listed twice"
    assert {k["kind"] for k in keys.values()} <= {"bool", "choice", "int", "shape"}
    d = akunu.Device("cpu")
    for name, k in keys.items():
        assert d.tuning_value(name) == k["default"], name
