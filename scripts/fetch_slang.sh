#!/usr/bin/env bash
# Keeps the glslang library of PyPI's slangpy wheel (slangpy/libslang-glslang-*.so, 10 MB of a
# 92 MB wheel) in the git-ignored .slang/, and prints its path; prints nothing where it cannot
# be had (no network). It compiles the cooperative-matrix-2 kernels that Debian 12's glslang
# cannot (shaders/kernels.cmake, AKUNU_SLANG_GLSLANG), driven through ctypes by
# cmake/glsl_slang.py, so the wheel's Python version does not matter: the x86-64 Linux cp312
# wheel serves every machine here, the lent GPU machines included. Skips the download when
# .slang/ holds the library. Used by scripts/install.sh and scripts/gpu_payload.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
find_lib() { ls "$PWD"/.slang/libslang-glslang-*.so 2>/dev/null | head -1; }
if [ -z "$(find_lib)" ]; then
    tmp=$(mktemp -d)
    if "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
           --abi cp312 --platform manylinux_2_34_x86_64 -d "$tmp" slangpy >&2; then
        "$python" - "$tmp" <<'PY'
import glob, os, sys, zipfile
with zipfile.ZipFile(glob.glob(os.path.join(sys.argv[1], "slangpy-*.whl"))[0]) as wheel:
    for name in wheel.namelist():
        if name.startswith("slangpy/libslang-glslang-") and name.endswith(".so"):
            os.makedirs(".slang", exist_ok=True)
            with open(os.path.join(".slang", os.path.basename(name)), "wb") as out:
                out.write(wheel.read(name))
PY
    fi
    rm -rf "$tmp"
fi
find_lib || true
