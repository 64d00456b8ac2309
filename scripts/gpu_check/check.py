"""One run of the check: its mode and selection, its limits and budget, its folders and files,
the environment its commands get, the runner that starts them and the clock it is timed by.
Built from the command line and the environment (Check.from_environment); the stages read it,
and the builds leave in it what later stages need (the engine's configure arguments)."""
import os
import shutil
import subprocess
import sys

from . import settings
from .runner import Runner


def log(message):
    print("[gpu-check] %s" % message, file=sys.stderr, flush=True)


def die(message):
    log("error: " + message)
    sys.exit(1)


def nproc(env):
    """The jobs' default: the cores as coreutils' nproc counts them for ENV (OMP_NUM_THREADS and
    OMP_THREAD_LIMIT honoured), or the cores this process may run on where nproc cannot run."""
    try:
        return int(subprocess.run(["nproc"], env=env, capture_output=True, text=True, check=True).stdout)
    except (OSError, ValueError, subprocess.CalledProcessError):
        return len(os.sched_getaffinity(0))


class Check:
    def __init__(self, root, prep, mode, quick, stages_env, selection, limits, budget, build, jobs, python, env,
                 runner, network="", out_dir=""):
        self.root, self.prep, self.mode, self.quick = root, prep, mode, quick
        self.stages_env, self.selection, self.limits, self.budget = stages_env, selection, limits, budget
        self.build, self.jobs, self.python, self.env, self.runner = build, jobs, python, env, runner
        self.network = network
        self.hpy = self.which("python3") or python   # the bookkeeping's python (standard library only)
        self.generator = "Ninja" if self.which("ninja") else "Unix Makefiles"
        self.launcher = ([] if env.get("UMA_GPU_CCACHE", "1") == "0" or not self.which("ccache") else
                         ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_C_COMPILER_LAUNCHER=ccache"])
        self.summary_mode = {"gpu": "gpu", "prebuild": "prebuild"}.get(mode, "cpu-proof")
        b = build
        self.sysroot, self.logs, self.details = b + "/sysroot", b + "/logs", b + "/details"
        self.stages_file, self.envjson = b + "/stages.jsonl", b + "/environment.json"
        # what comes back from the GPU machine: one summary and one archive
        where = out_dir or b
        self.summary_path, self.archive = where + "/gpu_check.json", where + "/gpu_check_logs.tar.gz"
        self.mpiroot = b + "/mpi"
        self.mpirun = [self.mpiroot + "/bin/mpirun", "--oversubscribe", "--bind-to", "none"]
        self.structs, self.model = b + "/structures", b + "/uma-s-1p1-random.safetensors"
        self.versus = b + "/versus"
        self.lsrc, self.linst = b + "/" + settings.LAMMPS_TOPDIR, b + "/lammps"
        self.plugin, self.probe = b + "/engine/umaplugin.so", b + "/engine/libmpi_thread_probe.so"
        self.uma = b + "/engine/uma"
        self.tiny_model = root + "/potentials/uma-s-tiny-random.safetensors"
        self.balanced_model = root + "/tests/fixtures/s1p2.safetensors"
        self.ranks_dir = b + "/ranks"
        self.kk = b + "/kk"
        # lmp's libraries; Kokkos's libcudart.so.13: the torch wheel's (the one LibTorch loads too)
        self.kk_libs = "%s/lammps/lib:%s/nvidia/cu13/lib" % (self.kk, os.path.dirname(settings.GPU_TORCH_DIR))
        self.kcheck, self.ktimes = b + "/kernels/kernels_check", b + "/kernels/kernel_times"
        self.prebuilt_dir = prep + "/prebuilt"
        self.kokkos_lammps = env.get("UMA_KOKKOS_LAMMPS", "")
        self.kokkos_lammps_source = env.get("UMA_KOKKOS_LAMMPS_SOURCE", "")
        self.engine_args, self.engine_prefix, self.torch_mode = [], "", ""   # st_engine's, for the plugin
        self.t0 = runner.now()

    @classmethod
    def from_environment(cls, root, prep, mode, quick, env, runner=None, network=""):
        """The check that the knobs of ENV ask for; exits with a message where one is wrong."""
        python = env.get("UMA_GPU_PYTHON") or "python3"
        try:
            quick, stages_env, selection = settings.stage_selection(env.get("UMA_GPU_STAGES", ""), quick)
            limits = settings.stage_limits(mode, quick, env.get("UMA_GPU_LIMITS", ""))
            budget = settings.budget_text(mode, quick, env.get("UMA_GPU_BUDGET_S", ""))
        except settings.KnobError as e:
            die(str(e))
        build = os.path.realpath(env.get("UMA_GPU_BUILD") or root + "/build-gpu")
        jobs = int(env.get("UMA_GPU_JOBS") or nproc(env))
        return cls(root, prep, mode, quick, stages_env, selection, limits, budget, build, jobs, python, env,
                   runner or Runner(), network, env.get("OUT", ""))

    @property
    def budget_on(self):
        """Whether a budget is set (UMA_GPU_BUDGET_S, or the GPU's default; "0": none)."""
        return self.budget != "0"

    def budget_s_left(self):
        return float(self.budget) - self.elapsed()

    @property
    def device(self):
        """The device the checking stages run on: cuda on a GPU, cpu in the proof."""
        return "cuda" if self.mode == "gpu" else "cpu"

    def elapsed(self):
        """Seconds since the start, to a tenth."""
        return round(self.runner.now() - self.t0, 1)

    def wanted(self, name):
        """Whether a checking or timing stage is in UMA_GPU_STAGES (all are by default)."""
        return not self.stages_env or name in settings.words(self.stages_env)

    def which(self, program):
        return shutil.which(program, path=self.env.get("PATH", os.defpath))

    def with_env(self, **overrides):
        """The commands' environment with OVERRIDES."""
        return dict(self.env, **overrides)

    def lammps_env(self, **overrides):
        """The environment of the LAMMPS runs: the LAMMPS install's libraries first."""
        return self.with_env(LD_LIBRARY_PATH="%s/lib:%s" % (self.linst, self.env.get("LD_LIBRARY_PATH", "")),
                             **overrides)
