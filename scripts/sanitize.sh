#!/usr/bin/env bash
# The Python module's engine tests under sanitizers, on the CPU backend:
#   ASan + UBSan  the module from scripts/fuzz.sh's clang build (build/fuzz: the same objects),
#                 running the engine's tests (AKUNU_SANITIZE_TESTS) within a time budget;
#   TSan          tests/python/test_threads.py's scenarios from C++ (build/tsan; see below why).
# Each module is loaded from a package folder next to its build, through a venv that sees the
# checkout's packages but not its editable akunu. Any sanitizer report fails the run.
# Run scripts/fuzz.sh first (scripts/test.sh does). Needs clang and libclang-rt-14-dev.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
cmake_bin=$(command -v .venv/bin/cmake || command -v cmake)
# The packages the tests import (pytest, numpy): the checkout's .venv where there is one, else
# python3's own.
host_python=$(command -v .venv/bin/python || command -v python3 || true)
if [ -z "$host_python" ] || ! "$host_python" -c "import pytest" 2>/dev/null; then
    echo "sanitize.sh: no pytest: neither .venv/bin/python nor python3 imports it (scripts/install.sh makes .venv)" >&2
    exit 1
fi
site=$("$host_python" -c "import sys; print(*[p for p in sys.path if p.endswith(('site-packages', 'dist-packages'))], sep='\n')")
tests=${AKUNU_SANITIZE_TESTS:-"tests/python/test_cpu_backend.py tests/python/test_model_state.py tests/python/test_token_ids.py tests/python/test_json_file.py tests/python/test_kv_blocks.py tests/python/test_whisper_engine.py"}

# A venv whose only akunu is the one in $1/pkg (the module built in $1 beside python/akunu).
sanitized_python() {
    local build=$1
    rm -rf "$build/pkg" && mkdir -p "$build/pkg"
    cp -r python/akunu "$build/pkg/akunu"
    cp "$build"/_akunu.*.so "$build/pkg/akunu/"
    [ -x "$build/venv/bin/python" ] || python3 -m venv "$build/venv"
    local venv_site
    venv_site=$("$build/venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    echo "$root/$build/pkg" > "$venv_site/aa_akunu.pth"
    echo "$site" > "$venv_site/zz_checkout.pth"  # plain paths: an editable-install hook stays out
}

# Reports go to files (pytest captures stderr, and an aborted test loses what it captured); the
# first one is printed when the run fails.
run_tests() {  # run_tests BUILD RUNTIME TESTS...
    local build=$1 runtime=$2 rc=0
    shift 2
    rm -rf "$build/reports" && mkdir -p "$build/reports"
    local log="log_path=$root/$build/reports/report"
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:$log" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}:$log" TSAN_OPTIONS="${TSAN_OPTIONS:-}:$log" \
        AKUNU_DEVICE=cpu AKUNU_TEST_BACKENDS=cpu LD_PRELOAD="$(clang++ -print-file-name="$runtime")" \
        "$build/venv/bin/python" -m pytest -q -p no:cacheprovider -x "$@" || rc=$?
    if [ -n "$(ls "$build/reports")" ]; then
        head -60 "$(ls -d "$build"/reports/* | head -1)"
        echo "sanitizer reports in $build/reports" >&2
        return 1
    fi
    return $rc
}

echo "== the module under AddressSanitizer and UndefinedBehaviorSanitizer"
"$cmake_bin" --build build/fuzz --target _akunu
sanitized_python build/fuzz
# Python's own allocations are not ASan's to judge (leaks at exit), nor are the modules it
# loads; every report from akunu's code aborts the test run.
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_tests build/fuzz libclang_rt.asan-x86_64.so $tests

# clang's shared TSan runtime crashes when preloaded into a process on some kernels (even
# /bin/true), so the thread tests' scenarios run from a C++ executable that links it statically.
echo "== the thread scenarios under ThreadSanitizer"
"$cmake_bin" -S . -B build/tsan -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DAKUNU_BUILD_PYTHON=OFF -DAKUNU_SANITIZE=thread >/dev/null
"$cmake_bin" --build build/tsan --target akunu_thread_scenarios
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 build/tsan/akunu_thread_scenarios \
    "${AKUNU_FIXTURES:-../shared/fixtures}"/tiny-llama3-random/gguf/tiny-llama3-random-q8_0.gguf
echo "sanitizers ran clean"
