#!/usr/bin/env bash
# The GPU check: builds, tests and times the whole GPU path from a prepared folder.
# The program is scripts/gpu_check/ (Python, standard library only); its usage:
#   scripts/gpu_check.sh --help
exec python3 "$(dirname "${BASH_SOURCE[0]}")/gpu_check" "$@"
