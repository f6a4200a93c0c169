#!/usr/bin/env bash
# The first command on a fresh machine: install what is missing, build, run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
exec .venv/bin/python -m akunu "$@"
