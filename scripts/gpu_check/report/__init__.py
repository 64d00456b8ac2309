"""The readers and checks of what the stages wrote, by concern: LAMMPS logs and dumps
(lammps_log.py), GoogleTest and ctest (gtest.py, shards.py), `uma bench` and the kernels check
(bench.py), the MPI stages (ranks.py), one input two ways (devices.py), training (train.py),
precisions (precision.py), fairchem side by side (versus*.py), the replayed MD (replay.py), the
pip-installed plugin against the pip-installed tool (pip_route.py); and the record of the stages,
the summary and its figures, the logs archive (summary.py, figures.py, archive.py).  Each check
writes its details JSON, prints one line, and returns 1 where it failed."""
