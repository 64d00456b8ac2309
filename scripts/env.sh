# The host side of the project's environment, for scripts and developers.  Source it:
#   source scripts/env.sh
# Installs the host's missing Debian packages (scripts/host_packages.sh), makes
# the Python reference environment once (scripts/python_env.sh), both cached
# under $UMA_CACHE (default ~/.cache/lammps-uma).
# Exports: UMA_CACHE, UMA_PYTHON, UMA_TORCH_CMAKE, OMP_NUM_THREADS.
_uma_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export UMA_CACHE="${UMA_CACHE:-$HOME/.cache/lammps-uma}"
"$_uma_root/scripts/host_packages.sh" || return 1 2>/dev/null || exit 1
UMA_PYTHON="$("$_uma_root/scripts/python_env.sh")" || return 1 2>/dev/null || exit 1
export UMA_PYTHON
export UMA_TORCH_CMAKE="$("$UMA_PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
# One BLAS/OpenMP thread pool per core; tests and benchmarks are sized for that.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}"
printf '[env] ready: python %s\n' "$UMA_PYTHON" >&2
