"""The code's layout is the configured one: ruff (pyproject.toml) over the Python package, the
tests and the benchmarks, clang-format (.clang-format) over the C++ sources. Each tool comes from scripts/install.sh;
where one is missing, its check skips and says so."""
from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent


def tool(name: str) -> str:
    found = BIN / name if (BIN / name).exists() else shutil.which(name)
    if not found:
        pytest.skip(f"{name} is not installed (scripts/install.sh installs it into .venv)")
    return str(found)


def test_python_passes_ruff():
    r = subprocess.run([tool("ruff"), "check", "python", "tests/python", "bench"], capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_cpp_is_clang_formatted():
    files = subprocess.run(["git", "ls-files", "cpp/*.cpp", "cpp/*.h", "tests/cpp/*.cpp", "tests/cpp/*.h"],
                           capture_output=True, text=True, cwd=ROOT, check=True).stdout.split()
    if not files:
        pytest.skip("not a git checkout: the sources to check are the tracked ones")
    r = subprocess.run([tool("clang-format"), "--dry-run", "--Werror", *files], capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 0, "run clang-format -i on these:\n" + r.stderr[-4000:]
