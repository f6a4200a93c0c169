#!/usr/bin/env bash
# Every test: the C++ suite (ctest) and the Python suite (pytest), both under the Khronos
# validation layer. Installs and builds first if needed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
export AKUNU_VALIDATION=1
echo "== C++ tests (ctest)"
.venv/bin/ctest --test-dir build/dev --output-on-failure -j 2
echo "== Python tests (pytest)"
.venv/bin/python -m pytest -q tests/python "$@"
echo "== the wheel, repaired and installed outside the checkout"
bash scripts/wheel_check.sh
echo "== parsers under AddressSanitizer and libFuzzer"
bash scripts/fuzz.sh
echo "== the engine's tests under ASan + UBSan, the thread scenarios under TSan"
bash scripts/sanitize.sh
echo "== soak at a reduced size: memory stays flat over a long generation and load/free cycles"
.venv/bin/python bench/soak.py --tokens 5000 --cycles 100
