"""fairchem-core's wheels for a machine without a network (the GPU machine).

usage: fairchem_wheels.py fetch LIST DIR     here, with PyPI: the pinned wheels of LIST
                                             (bench/fairchem_wheels.txt) into DIR, for the GPU
                                             machine's python (cp312, manylinux x86_64) and for
                                             this python (the CPU proof)
       fairchem_wheels.py install LIST DIR TARGET
                                             there, with no network: pip install --no-index
                                             --no-deps of LIST from DIR into TARGET

fetch builds a wheel where PyPI has only a source archive (antlr4-python3-runtime
4.9.3, pure Python), and drops wandb/bin/ from the wandb wheel (the binaries of its
run service, about 51 MB unpacked, which only wandb.init() starts; fairchem imports
wandb for its logger and the benchmark never logs), so that DIR fits the 64 MiB a
GPU run carries.  The trimmed wheel's RECORD drops the same entries.
"""
import os
import re
import subprocess
import sys
import tempfile
import zipfile

GPU_PYTHON = "3.12"
GPU_PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                 "manylinux2014_x86_64", "manylinux1_x86_64"]
TRIM = {"wandb": "wandb/bin/"}   # distribution -> the folder its wheel travels without


def pins(path: str) -> list:
    out = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                name, sep, version = line.partition("==")
                if not sep:
                    sys.exit(f"{path}: '{line}' is not pinned (NAME==VERSION)")
                out.append((name.strip(), version.strip()))
    return out


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def pip(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)


def wheels_of(directory: str, name: str, version: str) -> list:
    prefix = f"{normalized(name)}-{version}-"
    return sorted(f for f in os.listdir(directory) if f.endswith(".whl") and f.lower().startswith(prefix))


def trim(wheel: str, folder: str) -> int:
    """Rewrites WHEEL without the entries under FOLDER; returns the bytes it saved."""
    before = os.path.getsize(wheel)
    tmp = wheel + ".tmp"
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename.startswith(folder):
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(l for l in lines if not l.startswith(folder)).encode()
            dst.writestr(info, data)
    os.replace(tmp, wheel)
    return before - os.path.getsize(wheel)


def fetch(list_path: str, directory: str) -> int:
    os.makedirs(directory, exist_ok=True)
    gpu = ["--only-binary=:all:", "--python-version", GPU_PYTHON, "--implementation", "cp"]
    for p in GPU_PLATFORMS:
        gpu += ["--platform", p]
    for name, version in pins(list_path):
        spec = f"{name}=={version}"
        for label, extra in (("the GPU machine's python " + GPU_PYTHON, gpu),
                             ("this python", ["--only-binary=:all:"])):
            r = pip("download", "--no-deps", "-q", "-d", directory, *extra, spec)
            if r.returncode != 0 and not wheels_of(directory, name, version):
                # PyPI has only a source archive: build the wheel here (pure Python ones only)
                with tempfile.TemporaryDirectory() as tmp:
                    w = pip("wheel", "--no-deps", "-q", "-w", tmp, spec)
                    built = wheels_of(tmp, name, version) if w.returncode == 0 else []
                    if not built or not built[0].endswith("-py3-none-any.whl"):
                        sys.exit(f"no wheel of {spec} for {label}:\n{r.stderr}\n{w.stderr}")
                    os.replace(os.path.join(tmp, built[0]), os.path.join(directory, built[0]))
                print(f"built {built[0]} from its source archive (PyPI has no wheel)")
            elif r.returncode != 0 and label.startswith("the GPU"):
                sys.exit(f"no wheel of {spec} for {label}:\n{r.stderr}")
        folder = TRIM.get(name)
        if folder:
            for w in wheels_of(directory, name, version):
                saved = trim(os.path.join(directory, w), folder)
                if saved:
                    print(f"{w}: without {folder} ({saved / 1e6:.1f} MB less)")
    total = sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))
    print(f"{len(os.listdir(directory))} wheels, {total / 1e6:.1f} MB in {directory}")
    return 0


def install(list_path: str, directory: str, target: str) -> int:
    specs = [f"{n}=={v}" for n, v in pins(list_path)]
    r = pip("install", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir", "-q",
            "--find-links", directory, "--target", target, *specs)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    if r.returncode == 0:
        print(f"installed {len(specs)} distributions into {target} (no network, no dependencies resolved)")
    return r.returncode


def main(argv) -> int:
    if len(argv) == 4 and argv[1] == "fetch":
        return fetch(argv[2], argv[3])
    if len(argv) == 5 and argv[1] == "install":
        return install(argv[2], argv[3], argv[4])
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
