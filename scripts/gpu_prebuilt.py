#!/usr/bin/env python3
"""The prebuilt artifacts of the GPU check (scripts/gpu_check.sh --prebuild): what they were
built from, and whether the GPU machine may use them.  Standard library only.

  gpu_prebuilt.py key ROOT PREP
      the key of the build's inputs: every C++/CMake source of the project (src, tools,
      tests, pair_style, fix_train, plugin, cmake, CMakeLists.txt), the .debs and the LAMMPS
      tarball of PREP
  gpu_prebuilt.py manifest OUT ROOT PREP BUILD TORCH_DIR TORCH_VERSION CXX
      writes the manifest of a prebuild
  gpu_prebuilt.py check MANIFEST ENVJSON ROOT PREP BUILD
      exit 0 when the machine matches the manifest (the same key, root, build folder, torch
      folder and version); else prints why not and exits 1
"""
import hashlib
import json
import os
import sys

SOURCE_DIRS = ("src", "tools", "tests", "bench/cuda", "pair_style", "fix_train", "lammps_common", "plugin", "cmake")
SOURCE_SUFFIXES = (".cpp", ".h", ".hpp", ".cu", ".cuh", ".txt", ".cmake", ".in")


def key(root, prep):
    h = hashlib.sha256()
    files = ["CMakeLists.txt"]
    for d in SOURCE_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, d)):
            dirnames[:] = sorted(n for n in dirnames if n != "__pycache__")
            for name in filenames:
                if name.endswith(SOURCE_SUFFIXES):
                    files.append(os.path.relpath(os.path.join(dirpath, name), root))
    for rel in sorted(files):
        h.update(rel.encode() + b"\0")
        with open(os.path.join(root, rel), "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    for sub in ("debs", "."):
        folder = os.path.join(prep, sub)
        for name in sorted(os.listdir(folder)):
            if name.endswith((".deb", "-stripped-src.tar.gz")):
                h.update(name.encode() + b"\0")
                with open(os.path.join(folder, name), "rb") as f:
                    h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "key":
        print(key(*args))
    elif cmd == "manifest":
        out, root, prep, build, torch_dir, torch_version, cxx = args
        json.dump({"key": key(root, prep), "root": root, "build": build, "torch_dir": torch_dir,
                   "torch_version": torch_version, "cxx": cxx}, open(out, "w"), indent=1)
    elif cmd == "check":
        manifest, envjson, root, prep, build = args
        m = json.load(open(manifest))
        env = json.load(open(envjson)) if os.path.exists(envjson) else {}
        torch_version = (env.get("torch") or "").split("+")[0]
        prefix = env.get("cmake_prefix") or ""  # TORCH/share/cmake
        torch_dir = os.path.dirname(os.path.dirname(prefix)) if prefix else ""
        why = []
        if m["torch_version"] != torch_version:
            why.append(f"built for torch {m['torch_version']}, this machine has {torch_version or 'none'}")
        if os.path.realpath(m["torch_dir"]) != os.path.realpath(torch_dir or "/nonexistent"):
            why.append(f"built against the torch in {m['torch_dir']}, this machine's is in {torch_dir or '?'}")
        if m["root"] != root or m["build"] != build:
            why.append(f"built in {m['root']} ({m['build']}), this tree is {root} ({build})")
        k = key(root, prep)
        if m["key"] != k:
            why.append(f"the sources changed since the prebuild (key {m['key'][:12]}, now {k[:12]})")
        if why:
            print("prebuilt artifacts not usable: " + "; ".join(why))
            sys.exit(1)
        print(f"prebuilt artifacts match (key {k[:12]}, torch {torch_version} in {torch_dir}, {m['cxx']})")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
