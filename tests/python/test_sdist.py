"""The source distribution: built as `python -m build --sdist --no-isolation` builds it (or
through scikit-build-core's sdist hook, which that command calls, where the `build` frontend is
not installed), it holds what builds, tests and documents the package, leaves out the CI entry
point, the GPU machine's scripts, the benchmark notes and the notebooks, and its metadata carries
the classifiers."""
from __future__ import annotations

import email.parser
import importlib.util
import pathlib
import subprocess
import sys
import tarfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

pytest.importorskip("scikit_build_core", reason="scikit-build-core builds the sdist (pip install scikit-build-core)")

KEPT = ["pyproject.toml", "CMakeLists.txt", "LICENSE", "README.md", "PKG-INFO",
        "python/akunu/__init__.py", "python/akunu/server/app.py", "cpp/akunu/core/tuning.h", "shaders/gemv.comp",
        "models/trained-code-llama-q8_0.gguf",  # the wheel installs it as package data
        "tests/python/conftest.py", "docs/api.md", "bench/soak.py"]
LEFT_OUT = [".ci/", "bench/NOTES.md", "notebooks/", "scripts/gpu_check.sh", "scripts/gpu_payload.sh", "build/",
            ".venv/", ".git/"]
CLASSIFIERS = ["License :: OSI Approved :: MIT License", "Operating System :: POSIX :: Linux",
               "Programming Language :: Python :: 3 :: Only", "Programming Language :: C++", "Environment :: GPU",
               "Topic :: Scientific/Engineering :: Artificial Intelligence"]


def _build_sdist(out: pathlib.Path) -> pathlib.Path:
    # build's __main__, not just a "build" package: the checkout's build/ folder is a namespace
    # package to an import from the repository root.
    if importlib.util.find_spec("build.__main__") is not None:
        cmd = [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(out), str(ROOT)]
    else:  # the PEP 517 hook that `python -m build --sdist` calls
        cmd = [sys.executable, "-c", f"from scikit_build_core.build import build_sdist; build_sdist({str(out)!r})"]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    (sdist,) = out.glob("akunu-*.tar.gz")
    return sdist


@pytest.fixture(scope="module")
def sdist(tmp_path_factory):
    path = _build_sdist(tmp_path_factory.mktemp("sdist"))
    with tarfile.open(path) as tar:
        top = tar.getnames()[0].split("/")[0]
        names = [n.split("/", 1)[1] for n in tar.getnames() if "/" in n]
        info = tar.extractfile(f"{top}/PKG-INFO").read().decode()
    return names, email.parser.Parser().parsestr(info)


@pytest.mark.parametrize("name", KEPT)
def test_the_sdist_holds(sdist, name):
    assert name in sdist[0]


@pytest.mark.parametrize("prefix", LEFT_OUT)
def test_the_sdist_leaves_out(sdist, prefix):
    assert not [n for n in sdist[0] if n == prefix.rstrip("/") or n.startswith(prefix)]


def test_the_sdist_metadata(sdist):
    meta = sdist[1]
    assert meta["Name"] == "akunu" and meta["Requires-Python"] == ">=3.10"
    assert set(CLASSIFIERS) <= set(meta.get_all("Classifier")), meta.get_all("Classifier")
    assert any(r.startswith("numpy") for r in meta.get_all("Requires-Dist"))
