"""What the prebuilt artifacts (--prebuild) were built from, and whether the GPU machine may use
them: the key of the build's inputs (every C++/CMake source of the project, the .debs and the
LAMMPS tarball of the prepared folder), and the manifest that holds it with the root, the build
folder, the torch folder and version and the compiler."""
import hashlib
import json
import os

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
            if name.endswith((".deb", "-stripped-src.tar.xz")):
                h.update(name.encode() + b"\0")
                with open(os.path.join(folder, name), "rb") as f:
                    h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def write_manifest(out, root, prep, build, torch_dir, torch_version, cxx):
    with open(out, "w") as f:
        json.dump({"key": key(root, prep), "root": root, "build": build, "torch_dir": torch_dir,
                   "torch_version": torch_version, "cxx": cxx}, f, indent=1)


def prebuilt_matches(manifest, envjson, root, prep, build):
    """(whether this machine and tree match MANIFEST: the same key, root, build folder, torch
    folder and version; a line that says so or why not)."""
    try:
        with open(manifest) as f:
            m = json.load(f)
        env = {}
        if os.path.exists(envjson):
            with open(envjson) as f:
                env = json.load(f)
        missing = [k for k in ("torch_version", "torch_dir", "root", "build", "key", "cxx") if k not in m]
    except (OSError, ValueError, TypeError) as e:
        return False, "prebuilt artifacts not usable: cannot read %s (%s)" % (manifest, e)
    if missing:
        return False, "prebuilt artifacts not usable: %s has no %s" % (manifest, ", ".join(missing))
    torch_version = (env.get("torch") or "").split("+")[0]
    prefix = env.get("cmake_prefix") or ""  # TORCH/share/cmake
    torch_dir = os.path.dirname(os.path.dirname(prefix)) if prefix else ""
    why = []
    if m["torch_version"] != torch_version:
        why.append("built for torch %s, this machine has %s" % (m["torch_version"], torch_version or "none"))
    if os.path.realpath(m["torch_dir"]) != os.path.realpath(torch_dir or "/nonexistent"):
        why.append("built against the torch in %s, this machine's is in %s" % (m["torch_dir"], torch_dir or "?"))
    if m["root"] != root or m["build"] != build:
        why.append("built in %s (%s), this tree is %s (%s)" % (m["root"], m["build"], root, build))
    k = key(root, prep)
    if m["key"] != k:
        why.append("the sources changed since the prebuild (key %s, now %s)" % (m["key"][:12], k[:12]))
    if why:
        return False, "prebuilt artifacts not usable: " + "; ".join(why)
    return True, "prebuilt artifacts match (key %s, torch %s in %s, %s)" % (k[:12], torch_version, torch_dir, m["cxx"])
