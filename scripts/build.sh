#!/usr/bin/env bash
# Configures and builds the engine, the uma tool and the tests into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$UMA_TORCH_CMAKE" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DUMA_PYTHON="$UMA_PYTHON" -DUMA_SID_ROOT="${UMA_SID_ROOT:-}" -DUMA_FUZZ=ON >/dev/null
cmake --build build -j"$(nproc)"
