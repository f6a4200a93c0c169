#!/usr/bin/env bash
# Builds akunu on a GPU machine that lacks Vulkan headers and glslang, runs the C++ and Python
# suites under the validation layer, then the kernel benchmarks, and prints a short table.
#
# Expects, beside the checkout (git-ignored, carried to the machine):
#   .gl/    the Vulkan loader .debs, unpacked into / (apt-get download libvulkan1 ...)
#   .debs/  build-time .debs (libvulkan-dev, glslang-tools, spirv-tools, vulkan-validationlayers,
#           libgtest-dev, nlohmann-json3-dev, libpcre2-dev, libutf8proc-dev, pkgconf and their
#           libraries), unpacked into a prefix, never into /
#   .slang/ optional: slangpy's libslang-glslang-*.so, which builds the cooperative-matrix-2
#           kernels (shaders/kernels.cmake AKUNU_SLANG_GLSLANG; without it they are left out)
#   .shared/tools/make_random_gguf.py   a copy of ../shared/tools/make_random_gguf.py (benchmark files)
#   .shared/fixtures/   optional: a subset of ../shared/fixtures for the engine's reference tests
#   .whl/   wheels for Python packages the machine lacks (pytest, hypothesis, gguf and their
#           dependencies)
#   .ray/   optional: Ray for bench/distributed_sweep.py (scripts/ray_payload.sh)
# Logs go to $OUT when it is set.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/akunu-gpu}
mkdir -p "$out"
prefix=/opt/akunu-deps

for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
mkdir -p "$prefix"
for f in .debs/*.deb; do dpkg -x "$f" "$prefix"; done
# .ray/ (scripts/ray_payload.sh): Ray, trimmed, unpacked beside the wheels; its dependencies
# are wheels too, installed on their own so that a failure there leaves .whl's in place.
if [ -f .ray/ray.tar.xz ]; then
    mkdir -p /tmp/site
    tar -C /tmp/site -xJf .ray/ray.tar.xz
fi
for d in .whl .ray; do
    if ls $d/*.whl >/dev/null 2>&1; then
        python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --target /tmp/site $d/*.whl
    fi
done
[ ! -d /tmp/site ] || export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
export PATH=$prefix/usr/bin:$PATH
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export VK_LAYER_PATH=$prefix/usr/share/vulkan/explicit_layer.d
export CMAKE_PREFIX_PATH=$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
# The .pc files of the unpacked packages say /usr: point pkg-config into the prefix.
export PKG_CONFIG_PATH=$prefix/usr/lib/x86_64-linux-gnu/pkgconfig:$prefix/usr/share/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$prefix
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -f "$nvidia_icd" ] && ! ls /usr/share/vulkan/icd.d/*nvidia* /etc/vulkan/icd.d/*nvidia* >/dev/null 2>&1; then
    export VK_DRIVER_FILES=$nvidia_icd
fi

status() { if [ "$1" -eq 0 ]; then echo pass; else echo "FAIL ($1)"; fi; }

echo "== build"
start=$(date +%s)
slang=$(ls "$PWD"/.slang/libslang-glslang-*.so 2>/dev/null | head -1)
python3 -m pip install -q --no-build-isolation --no-deps -e . \
    -Ccmake.define.AKUNU_BUILD_TESTS=ON -Cbuild-dir=build/gpu \
    "-Ccmake.define.Vulkan_GLSLANG_VALIDATOR_EXECUTABLE=$prefix/usr/bin/glslangValidator" \
    ${slang:+"-Ccmake.define.AKUNU_SLANG_GLSLANG=$slang"} \
    >"$out/build.log" 2>&1
build=$?
echo "build: $(status $build) in $(( $(date +%s) - start )) s"
[ $build -eq 0 ] || { tail -40 "$out/build.log"; exit 1; }

python3 -m akunu devices 2>&1 | tee "$out/devices.txt"

export AKUNU_VALIDATION=1
# ../shared does not travel with the checkout: fixture tests skip here and run in CI.
if [ ! -d ../shared/fixtures ]; then
    export AKUNU_ALLOW_MISSING_FIXTURES=1
    # A carried subset of the fixtures (.shared/fixtures) runs the engine's reference tests here.
    [ -d .shared/fixtures ] && export AKUNU_FIXTURES=$PWD/.shared/fixtures
fi
make_random=../shared/tools/make_random_gguf.py
[ -f $make_random ] || make_random=.shared/tools/make_random_gguf.py
[ -f $make_random ] || [ ! -f .ray/make_random_gguf.py ] || make_random=.ray/make_random_gguf.py
export AKUNU_MAKE_RANDOM_GGUF=$make_random
# AKUNU_GPU_CMD: a command to run in this environment after the build (experiments).
if [ -n "${AKUNU_GPU_CMD:-}" ]; then eval "$AKUNU_GPU_CMD"; exit $?; fi
ctest_rc=0 pytest_rc=0
# AKUNU_SKIP_TESTS=1: benchmarks only (a second call on a machine that already passed).
if [ -z "${AKUNU_SKIP_TESTS:-}" ]; then
    ctest --test-dir build/gpu --output-on-failure -j 8 >"$out/ctest.log" 2>&1
    ctest_rc=$?
    # AKUNU_PYTEST_ARGS: a subset (for example "tests/python/test_engine.py"); AKUNU_PYTEST_TIMEOUT
    # seconds bound it, so that the benchmarks still run inside one call of the device tool.
    timeout "${AKUNU_PYTEST_TIMEOUT:-3600}" python3 -m pytest -q -p no:cacheprovider ${AKUNU_PYTEST_ARGS:-tests/python} \
        >"$out/pytest.log" 2>&1
    pytest_rc=$?
    unset AKUNU_VALIDATION
    python3 -m akunu selfcheck >"$out/selfcheck.txt" 2>&1
    python3 -m akunu kernel-bench 2>&1 | tee "$out/kernel-bench.txt"
fi
unset AKUNU_VALIDATION
# AKUNU_EXTRA_CMD: a command to run after the tests, before the benchmarks (reports).
if [ -n "${AKUNU_EXTRA_CMD:-}" ]; then eval "$AKUNU_EXTRA_CMD"; fi

echo "== model benchmark (random weights, make_random_gguf.py)"
files=()
# shape:type, or shape:type:hf for the same weights as an HF checkpoint (float types only,
# bench/gguf_to_hf.py): the safetensors load path and HF's RoPE pairing.
for spec in ${AKUNU_BENCH_MODELS:-1b:f16 1b:q8_0 1b:q4_0 llama2-7b:f16 llama2-7b:q8_0 llama2-7b:q4_0}; do
    IFS=: read -r shape type form <<<"$spec"
    file=/tmp/bench-$shape-$type.gguf
    [ -f $file ] || python3 $make_random --shape $shape --type $type -o $file >/dev/null
    if [ "$form" = hf ]; then
        [ -d ${file%.gguf}-hf ] || python3 bench/gguf_to_hf.py $file ${file%.gguf}-hf >/dev/null
        file=${file%.gguf}-hf
    fi
    files+=($file)
done
# AKUNU_PROFILE=1: the per-kernel profile of a decode step (at the start and behind 4,000 tokens)
# and of a 512-token chunk of each file; AKUNU_PROFILE=prefill: only the 512-token chunk;
# AKUNU_PROFILE=decode: only the decode steps.
if [ "${AKUNU_PROFILE:-}" = prefill ]; then
    for f in "${files[@]}"; do python3 -m akunu profile "$f" --tokens 512 2>&1 | tee -a "$out/profile.txt"; done
elif [ "${AKUNU_PROFILE:-}" = decode ]; then
    for f in "${files[@]}"; do
        python3 -m akunu profile "$f" --tokens 1 2>&1 | tee -a "$out/profile.txt"
        python3 -m akunu profile "$f" --after 4000 2>&1 | tee -a "$out/profile.txt"
    done
elif [ -n "${AKUNU_PROFILE:-}" ]; then
    echo "kernels without cooperative matrices:"
    AKUNU_TUNE=coopmat=0 python3 -m akunu kernel-bench 2>&1 | grep gemm | tee -a "$out/profile.txt"
    echo "kernels with them:"
    python3 -m akunu kernel-bench 2>&1 | grep gemm | tee -a "$out/profile.txt"
    for f in "${files[@]}"; do
        python3 -m akunu profile "$f" --tokens 1 2>&1 | tee -a "$out/profile.txt"
        python3 -m akunu profile "$f" --after 4000 2>&1 | tee -a "$out/profile.txt"
        python3 -m akunu profile "$f" --tokens 512 2>&1 | tee -a "$out/profile.txt"
    done
fi
# AKUNU_PROMPT_LENGTHS="1 16 128 512": time to first token of each file by prompt length.
if [ -n "${AKUNU_PROMPT_LENGTHS:-}" ]; then
    for f in "${files[@]}"; do
        python3 bench/prompt_lengths.py "$f" --lengths $AKUNU_PROMPT_LENGTHS 2>&1 | tee -a "$out/prompt_lengths.txt"
    done
fi
[ -n "${AKUNU_SKIP_BENCH:-}" ] || python3 -m akunu bench "${files[@]}" --tokens ${AKUNU_BENCH_TOKENS:-128} --json "$out/bench.json" --markdown "$out/bench.md" 2>&1 | tee "$out/decode.txt"

echo
echo "== summary"
if [ -f "$out/ctest.log" ]; then
    echo "ctest : $(status $ctest_rc)  $(grep -E 'tests passed|tests failed' "$out/ctest.log" | tail -1)"
    echo "pytest: $(status $pytest_rc)  $(tail -1 "$out/pytest.log")"
fi
[ $ctest_rc -eq 0 ] || grep -E 'Failed|FAILED|validation' "$out/ctest.log" | head -20
[ $pytest_rc -eq 0 ] || grep -E 'FAILED|Error' "$out/pytest.log" | head -20
exit $(( ctest_rc || pytest_rc ))
