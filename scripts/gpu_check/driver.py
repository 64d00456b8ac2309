"""The command line of the check (scripts/gpu_check.sh runs this): the mode (--prepare DIR,
--kokkos-lammps, --prebuild, --cpu, a plain run; --quick), the prepared folder checked, the CPU
proof moved into a namespace without network, then the run in its order (sequence.py) or the
prebuild (prebuild.py)."""
import argparse
import glob
import os
import shutil
import sys

from . import USAGE
from .builds.kokkos import kokkos_lammps_missing
from .check import Check, die, log
from .network import can_unshare, network_state, rerun_without_network
from .prebuild import prebuild
from .prepare import prepare
from .sequence import check_run
from .settings import LAMMPS_TARBALL_GLOB, OMPI_TARBALL_GLOB

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "gpu_check.sh")
STALE = ("stages.jsonl", "details/*.json", "details/*.jsonl", "logs/*.log", "logs/tests-shards", "versus/.ready")


class Parser(argparse.ArgumentParser):
    def error(self, message):
        print(USAGE)
        sys.exit(2)


def parse(argv):
    p = Parser(prog="scripts/gpu_check.sh", add_help=False, allow_abbrev=False)
    p.add_argument("--prepare", metavar="DIR")
    p.add_argument("--kokkos-lammps", action="store_true")
    p.add_argument("--cpu", dest="mode", action="store_const", const="cpu", default="gpu")
    p.add_argument("--prebuild", dest="mode", action="store_const", const="prebuild")
    p.add_argument("--quick", action="store_true")
    p.add_argument("-h", "--help", action="store_true")
    p.add_argument("dir", nargs="?")
    args = p.parse_args(argv)
    if args.help:
        print(USAGE)
        sys.exit(0)
    if args.kokkos_lammps:
        if argv[0] != "--kokkos-lammps":
            p.error("--kokkos-lammps first")
        return args
    flags = args.mode != "gpu" or args.quick
    if args.prepare is not None and (args.dir is not None or flags or argv[0] != "--prepare"):
        p.error("--prepare DIR alone")
    if args.prepare is None and (args.dir is None or argv[-1] != args.dir or args.dir.startswith("-")):
        p.error("DIR last")
    return args


def kokkos_input():
    """--kokkos-lammps: whether UMA_KOKKOS_LAMMPS and UMA_KOKKOS_LAMMPS_SOURCE name what
    --prebuild needs for uma/kk."""
    prefix, source = os.environ.get("UMA_KOKKOS_LAMMPS", ""), os.environ.get("UMA_KOKKOS_LAMMPS_SOURCE", "")
    why = kokkos_lammps_missing(prefix, source, os.environ.get("Kokkos_ROOT", ""))
    if not why:
        log("uma/kk on CUDA: LAMMPS %s, its source %s" % (prefix, source))
        return 0
    for line in why:
        log("uma/kk on CUDA: " + line)
    log("(doc/pair_uma.rst, \"Building uma/kk for CUDA\")")
    return 1


def prepared_folder(folder):
    """The prepared folder's real path; exits where it is not one."""
    if not os.path.exists(folder):
        die("no folder " + folder)
    prep = os.path.realpath(folder)
    if not os.path.isdir(prep + "/debs") or not glob.glob(os.path.join(prep, LAMMPS_TARBALL_GLOB)):
        die("%s is not a prepared folder (run scripts/gpu_check.sh --prepare %s where the network is)" % (prep, folder))
    if not glob.glob(os.path.join(prep, OMPI_TARBALL_GLOB)):
        die("%s has no %s (prepared before Open MPI came as an xz tar): run scripts/gpu_check.sh --prepare %s again "
            "where the network is" % (prep, OMPI_TARBALL_GLOB, folder))
    return prep


def start(check):
    """A fresh build folder's bookkeeping, and the environment the commands get."""
    for d in (check.build, check.logs, check.details):
        os.makedirs(d, exist_ok=True)
    for pattern in STALE:
        for path in glob.glob(os.path.join(check.build, pattern)):
            if os.path.isdir(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
    for name in ("UMA_PYTHON", "UMA_SID_ROOT", "UMA_FIXTURES_DIR"):   # the engine tests use the committed fixtures
        check.env.pop(name, None)
    # nvcc for find_package(Torch)'s CUDA probe, where the toolkit is not on PATH
    if not check.which("nvcc") and os.access("/usr/local/cuda/bin/nvcc", os.X_OK):
        check.env["PATH"] = "/usr/local/cuda/bin:" + check.env.get("PATH", "")
    check.t0 = check.runner.now()


def main(argv):
    args = parse(argv)
    if args.kokkos_lammps:
        return kokkos_input()
    if args.prepare is not None:
        return prepare(ROOT, args.prepare, os.environ.get("UMA_GPU_PYTHON") or "python3")
    prep = prepared_folder(args.dir)
    if args.mode == "cpu" and not os.environ.get("UMA_GPU_CHECK_NONET") and can_unshare():
        log("CPU proof: re-running inside 'unshare -n' (no network)")
        rerun_without_network(SCRIPT, args.quick, prep)
    network = network_state()
    python = os.environ.get("UMA_GPU_PYTHON") or "python3"
    if not shutil.which(python):
        die("no python '%s' (set UMA_GPU_PYTHON)" % python)
    check = Check.from_environment(ROOT, prep, args.mode, args.quick, dict(os.environ), network=network)
    start(check)
    if check.mode == "cpu":
        log("CPU PROOF: builds from %s with the network unused; tests on the CPU, benchmarks reduced." % prep)
        log("           Its figures are NOT GPU figures.")
    log("mode %s, build folder %s, %d jobs, generator %s, python %s, network %s" % (
        check.mode, check.build, check.jobs, check.generator, check.python, check.network))
    log("stages selected: %s; budget %s s (0: none)" % (check.selection, check.budget))
    return prebuild(check) if check.mode == "prebuild" else check_run(check)
