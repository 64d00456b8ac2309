"""python3 scripts/gpu_check ARGS: the check (scripts/gpu_check.sh runs this; --help)."""
import os
import sys

if not __package__:   # run as a folder: the package is imported from the folder above it
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from gpu_check.driver import main  # noqa: E402  (after the path is set)

sys.exit(main(sys.argv[1:]))
