#!/usr/bin/env bash
# The embed stage end to end vs a bare forward on CUDA (target >= 0.9x), per precision.
# Without a GPU it prints one SKIP line and exits 0. Arguments go to bench/bench_gpu.py.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python}" bench/bench_gpu.py "$@"
