"""The native CPU backend itself: how it is selected (device="cpu", AKUNU_DEVICE=cpu, and by
default where no Vulkan device exists), its profile, every instruction-set tier (scalar,
AVX2, AVX-512; AKUNU_CPU_ISA caps it, AKUNU_CPU_ISA=scalar forces the fallback), a persistent
thread pool, and clear errors for what only a GPU can do. Engine correctness on the CPU is
tested by the shared modules, which run every test on both backends (conftest.py `backend`)."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import akunu
from support.fixture_paths import require

HERE = pathlib.Path(__file__).parent


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    full = {**os.environ, **env}
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=300)


def test_cpu_device_profile():
    d = akunu.Device("cpu")
    p = d.profile
    assert p["type"] == "cpu" and p["name"].startswith("akunu CPU (")
    assert p["unified_memory"] and p["heaps"][0]["size_bytes"] > 0
    assert any(tier in p["name"] for tier in ("AVX-512", "AVX2", "scalar"))
    buf = d.upload(np.arange(10, dtype=np.float32))
    view = buf.numpy()
    view[3] = -1.0  # a zero-copy view of host memory
    assert buf.numpy()[3] == -1.0


def test_akunu_device_env_selects_the_cpu(monkeypatch):
    monkeypatch.setenv("AKUNU_DEVICE", "cpu")
    assert akunu.Device().profile["name"].startswith("akunu CPU")
    assert akunu.Device("vulkan").profile["type"] != "cpu" or "akunu" not in akunu.Device("vulkan").profile["name"]


def test_no_vulkan_device_means_cpu_not_an_error():
    r = run_python("import akunu; print(akunu.Device().profile['name'])", VK_ICD_FILENAMES="/nonexistent.json",
                   VK_DRIVER_FILES="/nonexistent.json", AKUNU_VALIDATION="0", AKUNU_DEVICE="")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().startswith("akunu CPU"), r.stdout


def test_unknown_selector_names_the_cpu_choice():
    with pytest.raises(Exception, match="'cpu' for akunu's CPU backend"):
        akunu.Device("no-such-device-anywhere")


@pytest.mark.parametrize("isa", ["scalar", "avx2", "avx512"])
def test_kernels_on_every_cpu_tier(isa):
    """The kernel tests on the CPU backend with each instruction-set tier (AKUNU_CPU_ISA caps it)."""
    name = run_python("import akunu; print(akunu.Device('cpu').profile['name'])", AKUNU_CPU_ISA=isa).stdout
    shown = {"scalar": "scalar", "avx2": "AVX2", "avx512": "AVX-512"}[isa]
    if shown not in name:
        pytest.skip(f"this processor lacks {shown} ({name.strip()})")
    r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                        str(HERE / "test_kernels.py"), "-k", "gemv or gemm or embed or rmsnorm"],
                       env={**os.environ, "AKUNU_TEST_BACKENDS": "cpu", "AKUNU_CPU_ISA": isa},
                       capture_output=True, text=True, timeout=900, cwd=HERE)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert " passed" in r.stdout


def test_cpu_isa_scalar_forces_the_fallback():
    name = run_python("import akunu; print(akunu.Device('cpu').profile['name'])", AKUNU_CPU_ISA="scalar").stdout
    assert "scalar" in name


def test_decode_creates_no_threads():
    m = akunu.Model(require("tiny-llama3-random", "gguf", "tiny-llama3-random-f16.gguf"), context=64, device="cpu",
                    progress=False)
    m.eval([1, 2, 3])
    tasks = lambda: len(os.listdir("/proc/self/task"))  # noqa: E731
    before = tasks()
    m.generate([5, 6], max_tokens=12)
    assert tasks() == before


def test_profile_times_every_command_with_the_host_clock():
    m = akunu.Model(require("tiny-llama3-random", "gguf", "tiny-llama3-random-f16.gguf"), context=64, device="cpu",
                    progress=False)
    for tokens in (1, 9):
        rows = m.profile(tokens)
        assert len(rows) > 10 and all(r["ms"] >= 0 for r in rows), rows[:3]
        assert any(r["kernel"].startswith("gemv" if tokens == 1 else "gemm") and r["ms"] > 0 for r in rows)


def test_weights_are_tiles_and_a_tied_embedding_is_kept_twice():
    """Seed 001's layout: projection matrices in 32-row tiles, the embedding row-major for the
    lookup and, when the head is tied to it (gemma3), a second time in tiles for the head."""
    path = str(require("tiny-gemma3-random", "gguf", "tiny-gemma3-random-q8_0.gguf"))
    gpu = dict(akunu.plan(path, context=64, check_device=False).weights_by_dtype)
    cpu = dict(akunu.plan(path, context=64, device="cpu").weights_by_dtype)
    m = akunu.Model(path, context=64, device="cpu", progress=False)
    table = m.dispatch_table()
    embedding = table[0]["bindings"][0][0]
    assert table[0]["kernel"] == "embed_q8_0" and cpu["Q8_0"] == embedding  # row-major, for lookups
    assert cpu["Q8_0_T32"] == gpu["Q8_0"]  # every matrix in tiles, the embedding among them again
    assert sum(cpu.values()) == sum(gpu.values()) + embedding == m.memory_report()["weights"][1]
    head = [c for c in table if c["label"] == "output"]
    assert [c["kernel"] for c in head] == ["gemv_q8_0_t32"] and head[0]["bindings"][0][0] == embedding
    assert all(c["kernel"].endswith("_t32") for c in table if c["kernel"].startswith("gemv"))


def _mapping_of(address: int) -> dict:
    """The /proc/self/smaps entry whose range holds `address`: {start, end, fields}."""
    entry = None
    for line in pathlib.Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and ":" not in head:
            start, end = (int(v, 16) for v in head.split("-"))
            entry = {"start": start, "end": end, "fields": {}} if start <= address < end else None
        elif entry is not None and ":" in head:
            entry["fields"][head.rstrip(":")] = line.split()[1]
            if head == "VmFlags:":
                entry["flags"] = line.split()[1:]
                return entry
    raise AssertionError(f"no mapping holds {address:#x}")


@pytest.mark.skipif(not pathlib.Path("/proc/self/smaps").exists(), reason="reads Linux's /proc/self/smaps")
def test_large_buffers_start_on_a_huge_page_and_ask_for_huge_pages():
    """A decode step streams every weight once: buffers of 2 MiB or more are mapped from a 2 MiB
    boundary with MADV_HUGEPAGE ('hg' in the mapping's VmFlags), so that transparent huge pages
    back them where the kernel allows; smaller ones are plain pages."""
    d = akunu.Device("cpu")
    for n, huge in [(3 << 20, True), ((5 << 20) + 12, True), (1 << 20, False)]:
        buf = d.upload(np.zeros(n, dtype=np.uint8))
        address = buf.numpy().__array_interface__["data"][0]
        mapping = _mapping_of(address)
        if huge:
            assert address % (2 << 20) == 0, f"{n} bytes at {address:#x}"
            assert "hg" in mapping["flags"], mapping["flags"]
            assert mapping["end"] - address >= n
        else:
            assert "hg" not in mapping["flags"]
