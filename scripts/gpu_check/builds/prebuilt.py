"""The prebuilt artifacts: --prebuild packs here what the stages use of the builds into
PREP/prebuilt/ (prebuilt.tar.xz and its manifest), built against the GPU machine's torch, which
prebuild_torch places where that machine's image keeps it; there, the prebuilt stage unpacks them
when they match the machine and the tree and load (the tool, the test program, lmp and the plugin
in it); else the builds run."""
import fnmatch
import glob
import os
import shutil
import subprocess
import tempfile
import zipfile

from ..check import die, log
from ..report.common import read_text
from ..settings import GPU_TORCH_DIR, GPU_TORCH_VERSION, LAMMPS_TARBALL_GLOB
from .kokkos import kk_ready
from .lammps import lmp_help
from .prebuilt_manifest import prebuilt_matches, write_manifest
from .sysroot import extract_tar


def found(top, names, maxdepth=None):
    """The files and links under TOP (to MAXDEPTH) whose names match one of NAMES (find -name ... -o ...)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(top):
        rel = os.path.relpath(dirpath, top)
        depth = 0 if rel == "." else rel.count(os.sep) + 1
        entries = filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        out += [os.path.join(dirpath, n) for n in entries if any(fnmatch.fnmatch(n, p) for p in names)]
        if maxdepth is not None and depth + 1 >= maxdepth:
            dirnames[:] = []
    return out


def prebuilt_files(check):
    """What the stages use of the builds: the engine's programs and ctest files, the plugin and
    the PMPI probe, the kernels check, the LAMMPS install, uma/kk on CUDA where built (paths
    relative to the build folder's parent); those missing are named on stderr."""
    parent, base = os.path.split(check.build)
    e, kk = base + "/engine", base + "/kk"
    wanted = [e + "/uma", e + "/umaplugin.so", e + "/libmpi_thread_probe.so", e + "/tests/uma_tests",
              base + "/kernels/kernels_check", base + "/kernels/kernel_times"]
    files = [f for f in wanted if os.path.lexists(os.path.join(parent, f))]
    for f in sorted(set(wanted) - set(files)):
        log("no %s for the prebuilt artifacts" % f)
    tops = [(e, ("CTestTestfile.cmake", "*_include.cmake", "*_tests.cmake"), None),
            (base + "/lammps/bin", ("lmp", "liblammps.so*"), 1), (base + "/lammps/lib", ("lmp", "liblammps.so*"), 1)]
    if os.path.isfile(os.path.join(parent, kk, "umaplugin.so")):   # uma/kk on CUDA (st_kokkos_build)
        files.append(kk + "/umaplugin.so")
        tops += [(kk + "/lammps/" + sub, ("lmp", "liblammps*.so*", "libkokkos*.so*"), 1) for sub in ("bin", "lib")]
    for top, names, depth in tops:
        files += [os.path.relpath(f, parent) for f in found(os.path.join(parent, top), names, depth)]
    return files


def prebuild_torch():
    """The GPU machine's torch wheel, its torch/ at the path its image keeps it, with the CUDA
    libraries of this machine's Python environment beside it for the linker only (their sonames
    are the ones libtorch_cuda needs; the GPU machine has its own there)."""
    cache = "%s/gpu-torch-%s" % (os.environ.get("UMA_CACHE") or os.path.expanduser("~/.cache/lammps-uma"),
                                 GPU_TORCH_VERSION)
    site = os.path.dirname(GPU_TORCH_DIR)
    if "__version__ = '%s" % GPU_TORCH_VERSION not in read_text(GPU_TORCH_DIR + "/version.py"):
        os.makedirs(cache, exist_ok=True)
        if not glob.glob("%s/torch-%s-*.whl" % (cache, GPU_TORCH_VERSION)) and subprocess.call(
                ["python3", "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
                 "torch==" + GPU_TORCH_VERSION, "-d", cache], stdout=2) != 0:
            die("cannot download torch %s (the GPU machine's)" % GPU_TORCH_VERSION)
        log("placing torch %s's torch/ in %s" % (GPU_TORCH_VERSION, GPU_TORCH_DIR))
        shutil.rmtree(GPU_TORCH_DIR, ignore_errors=True)
        os.makedirs(site, exist_ok=True)
        try:
            with zipfile.ZipFile(sorted(glob.glob("%s/torch-%s-*.whl" % (cache, GPU_TORCH_VERSION)))[0]) as z:
                z.extractall(site, [n for n in z.namelist() if n.startswith("torch/")])
        except (OSError, zipfile.BadZipFile):
            die("cannot unpack the torch wheel")
    if not os.path.exists(site + "/nvidia"):
        venv_nvidia = next(iter(glob.glob(os.path.expanduser(
            "~/.cache/lammps-uma/venv-*/lib/python3*/site-packages/nvidia"))), "")
        if not venv_nvidia:
            die("no CUDA libraries (site-packages/nvidia) to link against: run scripts/python_env.sh first")
        os.symlink(venv_nvidia, site + "/nvidia")


def pack_prebuilt(check):
    """PREP/prebuilt/prebuilt.tar.xz (the files stripped) and its manifest; False where it failed."""
    os.makedirs(check.prebuilt_dir, exist_ok=True)
    for old in glob.glob(check.prebuilt_dir + "/*"):
        os.remove(old)
    files, parent = prebuilt_files(check), os.path.dirname(check.build)
    stage = tempfile.mkdtemp()
    pack = subprocess.Popen(["tar", "-cf", "-", "-T", "-"], cwd=parent, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    unpack = subprocess.Popen(["tar", "-xf", "-", "-C", stage], stdin=pack.stdout)
    pack.stdout.close()
    pack.stdin.write(("\n".join(files) + "\n").encode())
    pack.stdin.close()
    if unpack.wait() != 0 or pack.wait() != 0:
        return False
    stripped = [f for f in found(stage, ("uma", "uma_tests", "lmp", "*.so*")) if os.path.isfile(f)
                and not os.path.islink(f)]
    if stripped:
        subprocess.call(["strip", "--strip-unneeded"] + stripped)
    with open(check.prebuilt_dir + "/prebuilt.tar.xz", "wb") as out:
        tar = subprocess.Popen(["tar", "--owner=0", "--group=0", "-cf", "-", "."], cwd=stage, stdout=subprocess.PIPE)
        xz = subprocess.Popen(["xz", "-T0", "-9"], stdin=tar.stdout, stdout=out)
        tar.stdout.close()
        if xz.wait() != 0 or tar.wait() != 0:
            return False
    shutil.rmtree(stage)
    cxx = subprocess.run(["c++", "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    write_manifest(check.prebuilt_dir + "/manifest.json", check.root, check.prep, check.build, GPU_TORCH_DIR,
                   GPU_TORCH_VERSION, cxx[0] if cxx else "")
    log("prebuilt: %.1f MB in %s" % (os.path.getsize(check.prebuilt_dir + "/prebuilt.tar.xz") / 1e6,
                                     check.prebuilt_dir))
    return True


def st_prebuilt(stage):
    check, b = stage.check, stage.check.build
    ok, line = prebuilt_matches(check.prebuilt_dir + "/manifest.json", check.envjson, check.root, check.prep, b)
    stage.say(line)
    if not ok:
        return 1
    for old in (b + "/engine", check.linst, check.lsrc, check.kk, b + "/kernels"):
        shutil.rmtree(old, ignore_errors=True)
    if not extract_tar(stage, check.prebuilt_dir + "/prebuilt.tar.xz", os.path.dirname(b)):
        return 1
    tarballs = sorted(glob.glob(os.path.join(check.prep, LAMMPS_TARBALL_GLOB)))   # potentials, bench inputs
    if not tarballs or not extract_tar(stage, tarballs[0], b):
        return 1
    for title, argv, head in (("uma info %s/potentials/uma-s-cu-eam-demo.safetensors" % check.root,
                               [check.uma, "info", check.root + "/potentials/uma-s-cu-eam-demo.safetensors"], 3),
                              ("uma_tests --gtest_list_tests", [b + "/engine/tests/uma_tests", "--gtest_list_tests"],
                               -3)):
        stage.say("== " + title)
        rc, out = stage.capture(argv, limit_s=60)
        lines = out.splitlines()
        stage.say(*(lines[:head] if head > 0 else lines[head:]))
        if rc != 0:
            return 1
    stage.say("== lmp -h; plugin load umaplugin.so")
    if lmp_help(stage, check.linst + "/bin/lmp", b + "/lmp-help.txt", check.lammps_env()) != 0:
        return 1
    text = read_text(b + "/lmp-help.txt")
    if "PLUGIN" not in text or not any(line.startswith("MPI v") and "Open MPI" in line for line in text.splitlines()):
        return 1
    return probe_plugins(stage)


def probe_plugins(stage):
    """The plugin loads in the prebuilt lmp; the KOKKOS CUDA lmp runs, where the prebuild made it."""
    check, b = stage.check, stage.check.build
    with open(b + "/in.plugin_probe", "w") as f:
        f.write("plugin load %s\n" % check.plugin)
    if stage.run(check.mpirun + ["-np", "1", check.linst + "/bin/lmp", "-in", b + "/in.plugin_probe", "-log", "none",
                                 "-screen", b + "/plugin-probe.txt"], env=check.lammps_env(), limit_s=120) != 0:
        stage.show(b + "/plugin-probe.txt")
        return 1
    probe = read_text(b + "/plugin-probe.txt")
    stage.say(*[line for line in probe.splitlines() if "Loading plugin" in line])
    if "Loading plugin: UMA-S universal potential" not in probe:
        return 1
    if not kk_ready(check):
        stage.say("no uma/kk on CUDA in the prebuilt artifacts")
        return 0
    stage.say("== the KOKKOS CUDA lmp -h")
    env = check.with_env(LD_LIBRARY_PATH="%s:%s" % (check.kk_libs, check.env.get("LD_LIBRARY_PATH", "")))
    if lmp_help(stage, check.kk + "/lammps/bin/lmp", b + "/lmp-kk-help.txt", env) != 0:
        return 1
    api = [line for line in read_text(b + "/lmp-kk-help.txt").splitlines() if "KOKKOS package API" in line]
    stage.say(*api)
    return 0 if api else 1
