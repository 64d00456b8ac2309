"""The paths inside the LAMMPS root, read from scripts/root_layout.sh (their
one written place), for the Python that drives LAMMPS there (tests/lammps/,
bench/).  Attributes: LAMMPS, TORCH, LAMMPS_SOURCE, PROJECT, BUILD, CCACHE."""
import os
import re

_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "root_layout.sh")


def _read():
    paths = {}
    with open(_FILE) as f:
        for line in f:
            m = re.match(r"UMA_ROOT_(\w+)=(\S+)\s*$", line)
            if m:
                paths[m.group(1)] = m.group(2)
    return paths


globals().update(_read())
