"""`pip install .` builds a wheel that works outside the source tree: the embedded SPIR-V and
the extension travel inside it, and nothing reaches back into the checkout."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import zipfile

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_installs_and_runs_outside_the_tree(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w", str(wheels), str(ROOT)],
        check=True, cwd=tmp_path, timeout=1800,
    )
    (wheel,) = wheels.glob("akunu-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("akunu/_akunu") and n.endswith(".so") for n in names), names
    assert "akunu/__main__.py" in names

    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, timeout=600)
    numpy_dir = pathlib.Path(np.__file__).resolve().parents[1]
    # -S: no site-packages processing, so the editable install of the checkout cannot answer.
    env = dict(os.environ, PYTHONPATH=f"{site}{os.pathsep}{numpy_dir}", AKUNU_VALIDATION="0")
    r = subprocess.run(
        [sys.executable, "-S", "-m", "akunu", "selfcheck"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all kernels match NumPy" in r.stdout
    where = subprocess.run([sys.executable, "-S", "-c", "import akunu; print(akunu.__file__)"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(site)), where
