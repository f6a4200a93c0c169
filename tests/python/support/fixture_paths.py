"""Where the reference fixtures are (../shared/fixtures beside the checkout, or AKUNU_FIXTURES).

Fixture tests fail when the fixtures are missing, except where AKUNU_ALLOW_MISSING_FIXTURES=1
says the machine has none (the GPU machine, which receives the checkout without ../shared);
there they skip with that reason.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

FIXTURES = pathlib.Path(os.environ.get("AKUNU_FIXTURES") or
                        pathlib.Path(__file__).resolve().parents[3].parent / "shared" / "fixtures")

ALLOW_MISSING = os.environ.get("AKUNU_ALLOW_MISSING_FIXTURES") == "1"
# The full set has its README; a machine may carry a subset of the models (the GPU machine).
COMPLETE = (FIXTURES / "README.md").is_file()

requires_fixtures = pytest.mark.skipif(
    not COMPLETE and ALLOW_MISSING,
    reason=f"the full reference fixtures ({FIXTURES}) are not on this machine",
)


def require(*parts) -> pathlib.Path:
    """FIXTURES/parts, or a skip where this machine carries only some fixtures."""
    path = FIXTURES.joinpath(*parts)
    if not path.exists() and ALLOW_MISSING:
        pytest.skip(f"{path} is not on this machine")
    return path


# make_random_gguf.py: random llama GGUF files of the shared tools' shapes and types.
MAKE_RANDOM = pathlib.Path(os.environ.get("AKUNU_MAKE_RANDOM_GGUF")
                           or FIXTURES.parent / "tools" / "make_random_gguf.py")


def random_gguf(tmp_path_factory, wtype: str, shape: str = "tiny") -> pathlib.Path:
    """A random llama GGUF of `shape` with 2-D weights of `wtype`, or a skip where the tool is
    not on this machine."""
    if not MAKE_RANDOM.exists():
        pytest.skip(f"{MAKE_RANDOM} is not on this machine")
    out = tmp_path_factory.mktemp("random") / f"{shape}-{wtype}.gguf"
    subprocess.run([sys.executable, str(MAKE_RANDOM), "--shape", shape, "--type", wtype, "-o", str(out)], check=True,
                   capture_output=True)
    return out
