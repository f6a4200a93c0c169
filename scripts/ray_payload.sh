#!/usr/bin/env bash
# Fills .ray/, a git-ignored folder that carries Ray to a lent GPU machine for
# bench/distributed_sweep.py: the Ray wheel for the machine's Python (3.12, x86-64) does not fit
# the device tool's 64 MiB beside the build payload (78 MB), so it travels trimmed and
# xz-compressed (about 28 MB), with the dependencies the machine's image lacks:
#   .ray/ray.tar.xz   the wheel's files without its Java jars, RLlib, Tune, Train, Serve, Data,
#                     LLM and the dashboard's source maps (none of which a sweep imports)
#   .ray/*.whl        jsonschema, jsonschema-specifications, referencing, rpds-py
#   .ray/make_random_gguf.py   a copy of ../shared/tools/make_random_gguf.py (the benchmark files)
# scripts/gpu_check.sh unpacks them into /tmp/site. Carry .gl, .debs, .whl, .slang and .ray (not
# .shared: both do not fit), e.g. with AKUNU_GPU_CMD='python3 bench/distributed_sweep.py ...'.
#
# Environment: AKUNU_RAY_VERSION (default: the version this venv has, else 2.58.0),
# AKUNU_SHARED (default ../shared beside the checkout).
set -euo pipefail
cd "$(dirname "$0")/.."
git check-ignore -q .ray/x || { echo "ray_payload: .ray/ is not git-ignored" >&2; exit 1; }
version=${AKUNU_RAY_VERSION:-$(python3 -c 'import ray; print(ray.__version__)' 2>/dev/null || echo 2.58.0)}
mkdir -p .ray
pip_get() {
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d "$1" "${@:2}"
}
if [ ! -f .ray/ray.tar.xz ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    pip_get "$tmp" "ray==$version"
    mkdir "$tmp/x"
    (cd "$tmp/x" && python3 -m zipfile -e "$tmp"/ray-*.whl .)
    rm -rf "$tmp"/x/ray/{jars,rllib,tune,train,serve,data,llm} "$tmp"/x/ray/dashboard/client/build/static/js/*.map
    tar -C "$tmp/x" -cf - . | xz -T2 -6 >.ray/ray.tar.xz
fi
ls .ray/jsonschema-*.whl >/dev/null 2>&1 || pip_get .ray jsonschema jsonschema-specifications referencing rpds-py
shared=${AKUNU_SHARED:-../shared}
cp "$shared/tools/make_random_gguf.py" .ray/
echo "ray_payload: Ray $version; .ray is $(du -sh .ray | cut -f1)"
