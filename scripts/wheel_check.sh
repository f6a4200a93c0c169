#!/usr/bin/env bash
# The wheel as a user gets it: built from this checkout (from build/dev's objects, so it costs a
# link rather than a compile), repaired by auditwheel to a manylinux tag with PCRE2 and utf8proc
# vendored, installed into a fresh venv outside the checkout, where the main job runs --offline
# (the shipped model is package data), then the kernel self-check and one notebook's code.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/akunu-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
slang=$(ls "$root"/.slang/*.so 2>/dev/null | head -1 || true)

echo "== wheel: build and repair"
.venv/bin/python -m pip wheel -q --no-build-isolation --no-deps -w "$work/raw" . \
    -Ccmake.define.AKUNU_BUILD_TESTS=ON -Cbuild-dir=build/dev ${slang:+"-Ccmake.define.AKUNU_SLANG_GLSLANG=$slang"}
PATH="$root/.venv/bin:$PATH" .venv/bin/python -m auditwheel repair -w "$work/wheelhouse" "$work"/raw/akunu-*.whl
wheel=$(ls "$work"/wheelhouse/akunu-*.whl)
echo "$(basename "$wheel")"
case "$wheel" in *manylinux*) ;; *) echo "not a manylinux wheel: $wheel" >&2; exit 1 ;; esac
listing=$(.venv/bin/python -m zipfile -l "$wheel")
for part in akunu.libs/libpcre2-8 akunu.libs/libutf8proc akunu/models/trained-code-llama-q8_0.gguf; do
    grep -q "$part" <<<"$listing" || { echo "the wheel lacks $part" >&2; exit 1; }
done

echo "== wheel: a fresh venv outside the checkout"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "$wheel" matplotlib ipython
cd "$work"
env -u AKUNU_DEVICE "$work/venv/bin/akunu" --offline --max-tokens 8 | tee main.txt
grep -q "trained-code-llama-q8_0.gguf" main.txt
env -u AKUNU_DEVICE "$work/venv/bin/akunu" selfcheck | tail -1
"$root/.venv/bin/python" - "$root/notebooks/memory_budget.ipynb" > notebook.py <<'PY'
import sys, nbformat
cells = nbformat.read(sys.argv[1], as_version=4).cells
print("\n\n".join(c.source for c in cells if c.cell_type == "code" and not c.source.startswith("%")))
PY
MPLBACKEND=Agg "$work/venv/bin/python" notebook.py > /dev/null
echo "wheel check: $(basename "$wheel") installs and runs outside the checkout"
