#!/usr/bin/env bash
# Builds the parsers and the saved-state loader with clang + AddressSanitizer, replays the
# malformed-input corpus under ASan, then runs each libFuzzer target for a bounded time
# (AKUNU_FUZZ_SECONDS, default 20).
# Needs clang and libclang-rt-14-dev (scripts/apt-packages.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${AKUNU_FUZZ_SECONDS:-20}
build=build/fuzz
python=${PYTHON:-.venv/bin/python}
cmake_bin=$(command -v .venv/bin/cmake || command -v cmake)

# UndefinedBehaviorSanitizer joins ASan here, and the same objects also make the sanitized
# module that scripts/sanitize.sh tests, so one clang build serves both.
"$cmake_bin" -S . -B $build -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DAKUNU_BUILD_PYTHON=ON -DAKUNU_BUILD_FUZZERS=ON -DAKUNU_SANITIZE=undefined >/dev/null
"$cmake_bin" --build $build --target akunu_fuzz_gguf akunu_fuzz_safetensors akunu_fuzz_config akunu_fuzz_tokenizer \
    akunu_fuzz_state akunu_fuzz_whisper akunu_malformed_replay

corpus=$build/malformed
rm -rf "$corpus" && "$python" tests/python/support/malformed_cases.py "$corpus"
echo "== malformed inputs under AddressSanitizer"
ASAN_OPTIONS=detect_leaks=1 $build/akunu_malformed_replay "$corpus" | tail -1

# Seeds: the malformed files, a valid small GGUF, and the fixtures' configs and tokenizer-free models.
seeds=$build/seeds
fixtures=${AKUNU_FIXTURES:-../shared/fixtures}  # the reference fixtures, as the test suites find them
rm -rf "$seeds" && mkdir -p "$seeds"/{gguf,safetensors,config,tokenizer,state,whisper}
for kept in tokenizer state; do cp tests/cpp/fuzz/corpus/$kept/* "$seeds/$kept/"; done  # the corpus kept in the repo
find "$corpus" -maxdepth 1 -type f -exec cp {} "$seeds/gguf/" \;
find "$corpus" -maxdepth 1 -type f -name 'st_*' -exec cp {} "$seeds/safetensors/" \;
find "$corpus" -maxdepth 1 -type f -name 'ggml_*' -exec cp {} "$seeds/whisper/" \;
for d in "$corpus"/ct2_*; do cp "$d/model.bin" "$seeds/whisper/$(basename "$d")"; done
FIXTURES=$fixtures "$python" - "$seeds" <<'PY'
import os, pathlib, sys
sys.path.insert(0, "tests/python")
from support.gguf_bytes import tiny_llama_gguf
from support.safetensors_writer import safetensors_bytes, tiny_llama
import json
out = pathlib.Path(sys.argv[1])
(out / "gguf" / "valid_tiny_llama").write_bytes(tiny_llama_gguf())
tensors, config = tiny_llama(dim=16, layers=1, heads=2, kv_heads=1, ffn=16, vocab=8)
(out / "safetensors" / "valid").write_bytes(safetensors_bytes(tensors))
(out / "config" / "llama").write_text(json.dumps(config))
import numpy as np
from support.whisper_bytes import ct2_bytes, ct2_variable, ggml_tensor, ggml_whisper_bytes
(out / "whisper" / "valid_ct2").write_bytes(ct2_bytes(
    [ct2_variable("encoder/conv1/bias", np.ones(4, np.float16)), ct2_variable("encoder/num_heads", np.array(2, np.int16))],
    {"alias": "encoder/conv1/bias"}))
(out / "whisper" / "valid_ggml").write_bytes(ggml_whisper_bytes(
    [51864, 1500, 4, 1, 1, 448, 4, 1, 1, 2, 1], np.ones((2, 201), np.float32), [b"a", b"<|endoftext|>"],
    [ggml_tensor("encoder.conv1.bias", np.ones((4, 1), np.float32)), ggml_tensor("decoder.ln.weight", np.ones(32, np.float16))]))
fixtures = pathlib.Path(os.environ["FIXTURES"])
for i, cfg in enumerate(sorted(fixtures.glob("*/hf/config.json"))):
    (out / "config" / f"fixture{i}").write_bytes(cfg.read_bytes())
# Saved states of the state fuzzer's model, without their checksum (the target appends it).
import akunu
m = akunu.Model(str(fixtures / "tiny-llama3-random/gguf/tiny-llama3-random-q8_0.gguf"), device="cpu", context=64)
for n in (1, 5):
    m.eval(list(range(1, n + 1)))
    (out / "state" / f"length{n}").write_bytes(m.save_state()[:-8])
PY
export AKUNU_FUZZ_STATE_MODEL=$fixtures/tiny-llama3-random/gguf/tiny-llama3-random-q8_0.gguf

for target in gguf safetensors config tokenizer state whisper; do
    echo "== fuzz $target for ${seconds}s"
    mkdir -p $build/corpus_$target
    rc=0
    $build/akunu_fuzz_$target -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix=$build/ $build/corpus_$target "$seeds/$target" >$build/fuzz_$target.log 2>&1 || rc=$?
    grep -E "^Done|ERROR|SUMMARY" $build/fuzz_$target.log || true
    if [ $rc -ne 0 ]; then tail -40 $build/fuzz_$target.log; echo "fuzz $target failed (see $build/fuzz_$target.log)"; exit 1; fi
done
echo "fuzzers ran clean"
