"""Builds a folder that stands in for another machine's site-packages.

usage: image_site.py PACKAGES.txt DEST

Links into DEST (created empty) the distributions of this python's
site-packages that PACKAGES.txt names (one distribution name per line; '#'
starts a comment), with their .dist-info folders, so that

    PYTHONPATH=DEST:WHEELS python -S ...

sees only those distributions plus what WHEELS holds.  scripts/gpu_check.sh
--cpu uses it to prove, here, that the wheels it carries to the GPU machine
are all that fairchem-core needs beyond that machine's image
(scripts/gpu_image_packages.txt).  A top-level folder that several
distributions share (a namespace package such as nvidia/) is linked whole,
so DEST may hold a little more than the list; never less.  Prints the names
of the listed distributions this python lacks (the image has them; this
machine does not).
"""
import importlib.metadata as md
import os
import re
import sys


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_names(path: str) -> set:
    names = set()
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                names.add(normalized(line))
    return names


def top_level_entries(dist) -> set:
    """The first path component of each file the distribution installed into site-packages."""
    entries = set()
    for f in dist.files or []:
        parts = f.parts
        if not parts or parts[0] in ("..", "__pycache__") or os.path.isabs(str(f)):
            continue  # bin/ scripts and the like live outside site-packages
        entries.add(parts[0])
    return entries


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    wanted = read_names(sys.argv[1])
    dest = sys.argv[2]
    if os.path.exists(dest) and os.listdir(dest):
        print(f"image_site.py: {dest} exists and is not empty", file=sys.stderr)
        return 1
    os.makedirs(dest, exist_ok=True)
    found = set()
    for dist in md.distributions():
        name = normalized(dist.metadata["Name"] or "")
        if name not in wanted or name in found:
            continue
        found.add(name)
        site = str(dist.locate_file(""))
        for entry in top_level_entries(dist):
            source = os.path.join(site, entry)
            target = os.path.join(dest, entry)
            if os.path.exists(source) and not os.path.lexists(target):
                os.symlink(source, target)
    missing = sorted(wanted - found)
    print(f"linked {len(found)} of the {len(wanted)} listed distributions into {dest}")
    if missing:
        print("not installed here (the image has them): " + " ".join(missing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
