#!/usr/bin/env bash
# Builds llama.cpp's llama-bench and llama-perplexity, CPU only and statically linked, into
# ~/.cache/akunu-build/llama.cpp, for bench/llamacpp_cpu.py. The source is the llama.cpp that
# llama-cpp-python's sdist vendors (PyPI), so nothing outside PyPI is needed.
#
#   bash bench/build_llama_bench.sh [SDIST.tar.gz | SOURCE_DIR]
#
# The binary is static so that it can be built on a machine with more cores (a lent GPU machine)
# and run here. It is compiled for AVX-512 (VNNI, BF16, VBMI) rather than -march=native, the
# instruction sets of the 2-core benchmark machine; edit ISA below for another CPU.
set -euo pipefail
src=${1:-}
out=${AKUNU_LLAMA_BENCH_DIR:-$HOME/.cache/akunu-build/llama.cpp}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "$src" ]; then
    python3 -m pip download -q --no-deps --no-binary :all: --no-build-isolation llama-cpp-python -d "$work"
    src=$(ls "$work"/llama_cpp_python-*.tar.gz)
fi
if [ -f "$src" ]; then
    tar xzf "$src" -C "$work"
    src=$(ls -d "$work"/llama_cpp_python-*/vendor/llama.cpp 2>/dev/null || ls -d "$work"/llama.cpp)
fi
ISA="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON
     -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX512_VBMI=ON"
# shellcheck disable=SC2086
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release $ISA -DBUILD_SHARED_LIBS=OFF -DGGML_OPENMP=OFF \
    -DGGML_BACKEND_DL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DCMAKE_EXE_LINKER_FLAGS=-static >/dev/null
cmake --build "$work/build" --target llama-bench llama-perplexity -j "$(nproc)"
mkdir -p "$out"
cp "$work/build/bin/llama-bench" "$work/build/bin/llama-perplexity" "$out/"
echo "built $out/llama-bench"
