"""The check's builds, one module each: the sysroot from the .debs (sysroot.py), Open MPI from its
wheel's files (mpi.py), GoogleTest, the engine and the plugin (engine.py), LAMMPS (lammps.py),
uma/kk on CUDA (kokkos.py), and the prebuilt artifacts of --prebuild (prebuilt.py,
prebuilt_manifest.py).  The pip route builds its own, through pip (stages/pip_route.py)."""
