#!/usr/bin/env bash
# Fills the git-ignored folders that scripts/gpu_check.sh expects beside the checkout, here (where
# apt and pip reach their registries), before the checkout is carried to a lent GPU machine that
# has no network:
#   .gl/      the Vulkan loader and the GL/EGL loaders, as .debs (gpu_check unpacks them into /)
#   .debs/    build-time .debs and the libraries they need (gpu_check unpacks them into a prefix)
#   .whl/     wheels the GPU machine's Python lacks (gguf by default; AKUNU_WHL_ALL=1 adds the rest
#             of the test dependencies, for an image without them)
#   .slang/   the glslang inside PyPI's slangpy wheel (libslang-glslang-*.so), which builds the
#             cooperative-matrix-2 kernels (shaders/kernels.cmake, AKUNU_SLANG_GLSLANG)
#   .shared/  tools/make_random_gguf.py and a subset of ../shared/fixtures that fits the budget
# Safe to run again: it skips what is present. Ends with each folder's size and the total that
# travels (the device tool carries at most 64 MiB: tracked and untracked-not-ignored files plus
# the carried folders). Fixture sets that do not fit are left out, with a note.
#
# Then, in the device tool: carry [".gl", ".debs", ".whl", ".slang", ".shared"], command `bash scripts/gpu_check.sh`.
#
# Environment:
#   AKUNU_SHARED          the shared folder (default: ../shared beside the checkout)
#   AKUNU_CARRY_MIB       the size the payload may bring the total to (default 62: 2 MiB headroom)
#   AKUNU_WHL_ALL=1       also carry pytest, hypothesis, jinja2 and their dependencies
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
shared=${AKUNU_SHARED:-$root/../shared}
budget=$(( ${AKUNU_CARRY_MIB:-62} * 1024 * 1024 ))

die() { echo "gpu_payload: error: $*" >&2; exit 1; }
say() { echo "gpu_payload: $*"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
size_of() { if [ -e "$1" ]; then find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; else echo 0; fi; }

for d in .gl .debs .whl .slang .shared; do
    git check-ignore -q "$d/x" || die "$d/ is not git-ignored: add /$d/ to .gitignore first"
done
command -v apt-get >/dev/null || die "apt-get is missing: run this on a Debian or Ubuntu machine"

# The GPU machine is x86-64. On another processor, download amd64 packages from separate lists
# (the device README's recipe).
apt_opts=()
if [ "$(dpkg --print-architecture)" != amd64 ]; then
    apt_opts=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64)
    mkdir -p /tmp/amd64/partial
    [ -n "$(ls /tmp/amd64/*Packages* 2>/dev/null)" ] || apt-get "${apt_opts[@]}" update -q \
        || die "apt-get update of the amd64 package lists failed"
fi

# download DIR PACKAGE...: apt-get download each package that has no .deb in DIR yet.
download() {
    local dir=$1; shift
    local missing=() p
    mkdir -p "$dir"
    for p in "$@"; do
        ls "$dir/${p}_"*.deb >/dev/null 2>&1 || missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        say "$dir: all $# packages present"
        return
    fi
    say "$dir: downloading ${missing[*]}"
    (cd "$dir" && apt-get "${apt_opts[@]}" download -q "${missing[@]}") \
        || die "apt-get download failed in $dir for: ${missing[*]} (apt-get update? package names?)"
}

# 1. .gl: the loaders the device README says to bring for headless Vulkan, EGL and GL. Vulkan
#    needs libvulkan1; the NVIDIA ICD's library (libGLX_nvidia) also wants glvnd's libGLdispatch.
gl_pkgs=(libvulkan1 libglvnd0 libegl1 libopengl0 libgl1 libglx0 libgles2)
download .gl "${gl_pkgs[@]}"

# 2. .debs: what CMakeLists.txt finds (Vulkan headers and glslangValidator, nlohmann_json, GTest,
#    pkg-config with libpcre2-8 and libutf8proc) plus the validation layer and spirv-tools, and
#    their dependencies, except the base system every Debian or Ubuntu image has (Priority
#    required or important, and the C/C++ runtimes: a second libstdc++ on LD_LIBRARY_PATH would
#    shadow the machine's newer one).
roots=(libvulkan-dev glslang-tools spirv-tools vulkan-validationlayers libgtest-dev
       nlohmann-json3-dev libpcre2-dev libutf8proc-dev pkgconf)
# googletest: sources only (libgtest-dev carries the built libraries); python3: libvulkan-dev's
# registry scripts, not needed to build.
skip=" libc6 libc6-dev libc-dev libstdc++6 libgcc-s1 libgcc1 zlib1g debconf dpkg perl perl-base
       python3 python3-minimal googletest "
declare -A seen=()
for p in "${roots[@]}"; do seen[$p]=1; done
level=("${roots[@]}")
closure=()
while [ ${#level[@]} -gt 0 ]; do  # breadth first, one apt-cache call of each kind a level
    names=$(apt-cache "${apt_opts[@]}" show --no-all-versions "${level[@]}" 2>/dev/null \
            | awk '/^Package:/ { p = $2 } /^Priority:/ && $2 !~ /^(required|important)$/ { print p }') \
        || die "apt-cache does not know all of: ${level[*]} (run apt-get update?)"
    keep=()
    for p in "${level[@]}"; do
        grep -qx -- "$p" <<<"$names" && keep+=("$p")  # else Priority required or important
    done
    closure+=("${keep[@]}")
    next=()
    [ ${#keep[@]} -eq 0 ] || while read -r dep; do
        [ -n "${seen[$dep]:-}" ] && continue
        seen[$dep]=1
        case "$skip" in *" $dep "*) continue ;; esac
        next+=("$dep")
    done < <(apt-cache "${apt_opts[@]}" depends --no-recommends --no-suggests --no-conflicts \
                 --no-breaks --no-replaces --no-enhances "${keep[@]}" 2>/dev/null \
             | awk '/^ *\|?(Pre)?Depends:/ && $2 !~ /^</ { sub(/:any$/, "", $2); print $2 }')
    level=("${next[@]}")
done
download .debs "${closure[@]}"

# 3. .whl: the GPU image ('cuda', device KINDS.md) already holds pytest, iniconfig, pluggy,
#    packaging, hypothesis, attrs, sortedcontainers, jinja2, markupsafe, numpy, pyyaml, tqdm,
#    requests, sentencepiece, tokenizers and huggingface-hub. A carried copy would shadow them
#    (gpu_check puts /tmp/site first on PYTHONPATH), and numpy alone is 16 MB: carry only what is
#    missing there, without dependencies.
wheels=(gguf)
if [ "${AKUNU_WHL_ALL:-}" = 1 ]; then
    wheels+=(pytest iniconfig pluggy packaging hypothesis attrs sortedcontainers jinja2 markupsafe)
fi
# On the machine already (KINDS.md, 2026-11-17): a dependency in this list need not travel.
on_machine=" numpy pyyaml tqdm requests certifi charset-normalizer idna urllib3 pytest iniconfig
             pluggy packaging hypothesis attrs sortedcontainers jinja2 markupsafe tokenizers
             huggingface-hub sentencepiece filelock fsspec typing-extensions pygments "
norm() { tr 'A-Z_.' 'a-z--' <<<"$1"; }
mkdir -p .whl
pip_missing=()
for w in "${wheels[@]}"; do
    ls .whl/"$(tr '-' '_' <<<"$w")"-*.whl .whl/"$w"-*.whl >/dev/null 2>&1 || pip_missing+=("$w")
done
if [ ${#pip_missing[@]} -eq 0 ]; then
    say ".whl: all ${#wheels[@]} wheels present"
else
    say ".whl: downloading ${pip_missing[*]}"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --abi cp312 --abi abi3 --abi none \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux_2_28_x86_64 --platform any \
        -d .whl "${pip_missing[@]}" \
        || die "pip download failed for: ${pip_missing[*]} (network? a cp312 manylinux or pure-Python wheel?)"
fi
# Every requirement of a carried wheel must travel too or be on the machine already.
carried=" $(for f in .whl/*.whl; do n=$(basename "$f"); norm "${n%%-*}"; done | tr '\n' ' ') "
for f in .whl/*.whl; do
    while read -r req; do
        req=$(norm "$req")
        case "$carried$on_machine" in *" $req "*) ;; *) say "note: $(basename "$f") requires $req, which is neither carried nor listed on the machine" ;; esac
    done < <(unzip -p "$f" '*.dist-info/METADATA' | awk -F'[:;]' '/^Requires-Dist:/ && $0 !~ /extra ==/ { print $2 }' \
             | sed -E 's/^ *([A-Za-z0-9_.-]+).*/\1/')
done

# 3b. .slang: slangpy's glslang library (scripts/fetch_slang.sh, shared with install.sh).
slang=$(bash scripts/fetch_slang.sh)
[ -n "$slang" ] || die "could not fetch slangpy's glslang into .slang/ (network? pip download slangpy)"
say ".slang: $(basename "$slang")"

# 4. .shared/tools: make_random_gguf.py for the benchmark files (and test_engine_numpy).
[ -f "$shared/tools/make_random_gguf.py" ] || die "$shared/tools/make_random_gguf.py is missing (AKUNU_SHARED?)"
mkdir -p .shared/tools
if cmp -s "$shared/tools/make_random_gguf.py" .shared/tools/make_random_gguf.py; then
    say ".shared/tools: make_random_gguf.py present"
else
    cp "$shared/tools/make_random_gguf.py" .shared/tools/
    say ".shared/tools: copied make_random_gguf.py"
fi

# 5. .shared/fixtures: whole fixture sets, in this order, while the total stays within the budget.
#    Never the fixtures' README.md: its absence tells the tests that only a subset travelled (the
#    tests that need the whole set skip). Never hf/ (safetensors): those sources skip when absent.
#    M:q8_0 runs the CLI tests and test_engine's q8_0 logits, chunked prefill and hot-path tests;
#    M:f16 adds the f16 logits, the KV cache, greedy continuations and score.
fixture_sets=(trained-code-llama:q8_0 tiny-qwen3-random:q8_0 tiny-llama3-random:q8_0
              tiny-gemma3-random:q8_0 tiny-qwen3-random:f16 tiny-llama3-random:f16
              tiny-gemma3-random:f16 trained-code-llama:f16)
fixture_files() {  # the files of set $1 (model:kind), relative to the fixtures folder
    local model=${1%%:*} kind=${1##*:} src=$shared/fixtures
    echo "$model/manifest.json"
    echo "$model/gguf/$model-$kind.gguf"
    (cd "$src" && if [ "$kind" = q8_0 ]; then ls "$model"/ref/logits_q8_0_p*.npy
                  else ls "$model"/ref/logits_p*.npy "$model"/ref/[kv]_p*.npy; fi) 2>/dev/null || true
}
# What travels besides the fixtures: the repo's tracked and untracked-not-ignored files, and the
# other carried folders.
repo_bytes=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null \
             | awk '{ s += $1 } END { print s + 0 }')
fixed=$(( repo_bytes + $(size_of .gl) + $(size_of .debs) + $(size_of .whl) + $(size_of .slang) + $(size_of .shared/tools) ))
if [ ! -d "$shared/fixtures" ]; then
    say "note: $shared/fixtures is missing: no fixtures carried (the fixture tests skip there)"
else
    declare -A chosen_files=()
    used=$fixed
    for set in "${fixture_sets[@]}"; do
        mapfile -t files < <(fixture_files "$set")
        bytes=0 new=0
        for f in "${files[@]}"; do
            [ -f "$shared/fixtures/$f" ] || die "fixture file $shared/fixtures/$f is missing"
            [ -n "${chosen_files[$f]:-}" ] && continue    # manifest.json, shared by both kinds
            bytes=$(( bytes + $(stat -c %s "$shared/fixtures/$f") ))
        done
        if [ $(( used + bytes )) -gt "$budget" ]; then
            say "note: fixtures $set ($(mib $bytes)) left out: over the $(mib "$budget") budget"
            continue
        fi
        used=$(( used + bytes ))
        for f in "${files[@]}"; do
            chosen_files[$f]=1
            if ! cmp -s "$shared/fixtures/$f" ".shared/fixtures/$f"; then
                mkdir -p ".shared/fixtures/$(dirname "$f")"
                cp "$shared/fixtures/$f" ".shared/fixtures/$f"
                new=1
            fi
        done
        if [ $new = 1 ]; then say ".shared/fixtures: copied $set ($(mib $bytes))"
        else say ".shared/fixtures: $set present ($(mib $bytes))"; fi
    done
    # A set from an earlier run that no longer fits (a larger repo, a smaller budget) goes.
    for set in "${fixture_sets[@]}"; do
        while read -r f; do
            if [ -z "${chosen_files[$f]:-}" ] && [ -f ".shared/fixtures/$f" ]; then
                rm -f ".shared/fixtures/$f"
                say ".shared/fixtures: removed $f (over the budget now)"
            fi
        done < <(fixture_files "$set")
    done
    [ ! -f .shared/fixtures/README.md ] || die ".shared/fixtures/README.md would mark the subset complete: remove it"
fi

echo
echo "== payload (the device tool carries at most 64 MiB in all)"
total=$repo_bytes
printf '  %-22s %10s\n' "repo (tracked + new)" "$(mib "$repo_bytes")"
for d in .gl .debs .whl .slang .shared; do
    b=$(size_of $d)
    total=$(( total + b ))
    printf '  %-22s %10s  (%s files)\n' "$d" "$(mib "$b")" "$(find $d -type f | wc -l)"
done
printf '  %-22s %10s\n' total "$(mib $total)"
limit=$(( 64 * 1024 * 1024 ))
[ $total -le $limit ] || die "the total is over 64 MiB: lower AKUNU_CARRY_MIB and run again"
echo "carry: [\".gl\", \".debs\", \".whl\", \".shared\"]; command: bash scripts/gpu_check.sh"
