"""The one archive that comes back with the summary: the build folder's small text files (top
level) and those under each of its stage folders (logs, outputs, details; no models, no installed
packages), each at most 2 MB (its end), in one gzipped tar under gpu_check/, with a MANIFEST."""
import io
import os
import tarfile
import time

SKIP_DIRS = {"site", "image", "model", "__pycache__"}
SUFFIXES = (".log", ".json", ".jsonl", ".out", ".err", ".rc", ".txt", ".lammps", ".dump", ".data")
TOP_LEVEL = (".json", ".jsonl", ".out", ".txt", ".log")
FILE_CAP = 2 << 20
TOTAL_CAP = 48 << 20   # uncompressed; compressed, well under the 16 MiB a file may come back with


def archived(name):
    return name.endswith(SUFFIXES) or name.startswith(("log.", "probe.", "in."))


def archive_files(base, subdirs, outname):
    files = []
    for name in sorted(os.listdir(base)):
        path = os.path.join(base, name)
        if os.path.isfile(path) and name.endswith(TOP_LEVEL) and name != outname and ".tmp" not in name:
            files.append(path)
    for sub in subdirs:
        for dirpath, dirnames, filenames in os.walk(os.path.join(base, sub)):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            files += [os.path.join(dirpath, f) for f in sorted(filenames) if archived(f) and ".tmp" not in f]
    return files


def add(tar, name, data):
    info = tarfile.TarInfo("gpu_check/" + name)
    info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
    tar.addfile(info, io.BytesIO(data))


def write_archive(out, base, subdirs):
    tmp = "%s.tmp%d" % (out, os.getpid())
    total, left_out, cut = 0, [], []
    with tarfile.open(tmp, "w:gz") as tar:
        for path in archive_files(base, subdirs, os.path.basename(out)):
            rel = os.path.relpath(path, base)
            try:
                size = os.path.getsize(path)
                with open(path, "rb") as f:
                    if size > FILE_CAP:
                        f.seek(size - FILE_CAP)
                        cut.append(rel)
                    data = f.read(FILE_CAP)
            except OSError:
                continue
            if total + len(data) > TOTAL_CAP:
                left_out.append(rel)
                continue
            total += len(data)
            add(tar, rel, data)
        add(tar, "MANIFEST.txt", (
            "The logs and details of scripts/gpu_check.sh, written %s; paths relative to its build folder.\n"
            "Files over %d bytes keep their last %d bytes: %s\nLeft out (over %d bytes in all): %s\n" % (
                time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), FILE_CAP, FILE_CAP, ", ".join(cut) or "none",
                TOTAL_CAP, ", ".join(left_out) or "none")).encode())
    os.replace(tmp, out)
