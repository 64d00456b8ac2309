#!/usr/bin/env python3
"""Fails if a file of the project names a development machine's path or
narrates how the work went instead of describing the software.

Two kinds of finding, each a regular expression over every line:
  machine path   an absolute path of a development machine (/work/...,
                 /root/..., /home/NAME/...); the project's own paths inside
                 its LAMMPS root (/src/uma-check, /opt/...) are not such paths;
  work diary     phrases that tell the history of the work or the place it
                 was done in: issue numbers as section labels, work
                 periods, "the first GPU run", "run 5 (H100 ...)", machines
                 on loan, the development environment's own tools, "the
                 fourth part".
Scanned: every text file under REPO_ROOT (what git tracks; in a copy without
.git, what the copy holds), except .git, build outputs (build/, build-*/,
__pycache__, fresh-fixtures/), the test fixtures and data (tests/fixtures/,
tests/data/) and this file.  A file is text when its first 8 KiB hold no NUL byte.

usage: check_self_description.py REPO_ROOT | --self-test
"""
import os
import pathlib
import re
import subprocess
import sys

MACHINE_PATHS = [
    ("development machine path /work/", re.compile(r"(?<![\w.~$}])/work/[\w.]")),
    ("development machine path /root/", re.compile(r"(?<![\w.~$}])/root/[\w.]")),
    ("development machine path /home/", re.compile(r"(?<![\w.~$}])/home/[a-z_][\w-]*/")),
]
DIARY = [
    ("issue number", re.compile(r"\bissues? #?\d+\b", re.I)),
    ("session", re.compile(r"(?<![\w-])sessions?(?![\w-])", re.I)),
    ("first GPU run", re.compile(r"\b(?:first|second|third|last|next|one) GPU (?:run|attempt)s?\b|\bits first GPU\b", re.I)),
    ("numbered run", re.compile(r"\brun \d+ \((?:H100|H200)|\bGPU run \d+\b|\brun \d+'s times\b", re.I)),
    ("lent machine", re.compile(r"\b(?:was|were|is|are|be|being|been|gets?|got) lent\b|\blent (?:to|by|rarely)\b", re.I)),
    ("workplace", re.compile(r"\bworkplace\b|\b(?:the|this project's) development machines?\b", re.I)),
    ("the workplace's tools", re.compile(r"\b(?:the )?(?:search|device) tool(?:'s)?\b|\bfetch github:", re.I)),
    ("part of the work", re.compile(r"\b(?:first|second|third|fourth|fifth) (?:part|session)\b", re.I)),
    ("no GPU in this part", re.compile(r"\bno GPU (?:in|this|again|was)\b", re.I)),
]
PATTERNS = MACHINE_PATHS + DIARY

SKIP_DIRS = {".git", "__pycache__", "build", "fresh-fixtures"}
SKIP_PREFIXES = ("tests/fixtures/", "tests/data/")
SELF = pathlib.Path(__file__).resolve()


def scan_text(text):
    """[(line number, pattern name, line)] for every finding in TEXT."""
    found = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for name, pattern in PATTERNS:
            if pattern.search(line):
                found.append((lineno, name, line.strip()))
    return found


def tracked(root):
    """The files git tracks under ROOT, or None where ROOT is not a git work tree."""
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return [root / n.decode() for n in out.split(b"\0") if n]


def walked(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith("build-")]
        for name in filenames:
            yield pathlib.Path(dirpath) / name


def files(root):
    for path in tracked(root) or walked(root):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(SKIP_PREFIXES) or path.resolve() == SELF or not path.is_file():
            continue
        with open(path, "rb") as f:
            if b"\0" in f.read(8192):
                continue
        yield path, rel


def scan(root):
    failures = 0
    count = 0
    for path, rel in files(root):
        count += 1
        for lineno, name, line in scan_text(path.read_text(errors="replace")):
            print(f"FAIL: {rel}:{lineno}: {name}: {line[:160]}")
            failures += 1
    if count == 0:
        print(f"FAIL: no file scanned under {root}")
        return 1
    print(f"self-description scan of {count} files: all passed" if failures == 0
          else f"self-description scan: {failures} finding(s)")
    return 1 if failures else 0


BAD = [  # each must be flagged
    "see /work/main/build-gpu/logs/tests.log",
    "KOKKOS_GIT=${UMA_KOKKOS_GIT:-/work/.mirror/kokkos+kokkos/repo}",
    "cache in /root/.cache/lammps-uma",
    "built in /home/alice/lammps",
    "## Engine vs fairchem-core, CPU (issue 2)",
    "as issue 49 asks",
    "**No GPU in this session.**",
    "Sessions 10-14 had no device",
    "the first GPU run, 2026-12-04",
    "its one GPU attempt",
    "until the next GPU run",
    "as on this project's development machine",
    "1.5x run 5's times",
    "what run 5 (H100, 2026-12-05) measured",
    "the GPU run 4 gave",
    "(the H200 machines this project is lent)",
    "this workplace's tools",
    "the search tool's fetch github:kokkos/kokkos",
    "(issue 49, 2026-12-06, fourth part)",
    "No GPU again; the prebuilt artifacts",
]
GOOD = [  # none may be flagged
    "LAMMPS_PLUGIN_PATH=/src/uma-check/build-root mpirun -np 2 /opt/lammps/bin/lmp",
    "export UMA_CACHE=\"${UMA_CACHE:-$HOME/.cache/lammps-uma}\"",
    "subprocess.Popen(cmd, start_new_session=True)",
    "run 0 post no",
    "run 0's energy, virial and forces; run 10's totals",
    "velocity all create 300 5 loop geom\\nrun 0\\nrun 5\\n",
    "*pair_coeff* issued again reads the model file's weights",
    "equivalent(a, b, ec)",
    "measured on an H100 on 2026-12-05 with scripts/gpu_check.sh",
    "workdir = \"/tmp/uma-bench\"",
    "rsync ./ \"$root/work/\"",
]


def self_test():
    failures = 0
    for text in BAD:
        if not scan_text(text):
            print(f"FAIL: self-test: not flagged: {text!r}")
            failures += 1
    for text in GOOD:
        if scan_text(text):
            print(f"FAIL: self-test: flagged: {text!r} ({scan_text(text)[0][1]})")
            failures += 1
    for name, pattern in PATTERNS:   # every pattern flags at least one BAD line
        if not any(pattern.search(text) for text in BAD):
            print(f"FAIL: self-test: pattern {name!r} flags none of the BAD lines")
            failures += 1
    print("self-test: all passed" if failures == 0 else f"self-test: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__.strip())
        sys.exit(2)
    sys.exit(self_test() if sys.argv[1] == "--self-test" else scan(pathlib.Path(sys.argv[1]).resolve()))
