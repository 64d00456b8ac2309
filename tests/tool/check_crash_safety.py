#!/usr/bin/env python3
"""A model file being written when its process is killed leaves the previous
file intact (every writer -- uma train --out, fix uma/train checkpoints,
uma init -- goes through the same write-then-rename).

It copies MODEL to a checkpoint path, starts `uma init BIG_CONFIG CHECKPOINT`
(a full-size model, ~590 MB to write), SIGKILLs it once its temporary file
holds 32 MB, and checks that the checkpoint still has the original bytes and
loads (`uma info`); then a complete write over the leftover temporary file
replaces the checkpoint.

usage: check_crash_safety.py UMA MODEL BIG_CONFIG.json
"""
import hashlib
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def model_config(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))["__metadata__"]["config"]


def main():
    uma, model, big_config = sys.argv[1:4]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "checkpoint.safetensors")
        partial = ckpt + ".tmp"
        shutil.copy(model, ckpt)
        before = sha(ckpt)

        writer = subprocess.Popen([uma, "init", big_config, ckpt], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE)
        deadline, size = time.time() + 600, 0
        while time.time() < deadline and writer.poll() is None:
            size = os.path.getsize(partial) if os.path.exists(partial) else 0
            if size >= 32 << 20:
                break
            time.sleep(0.005)
        if writer.poll() is not None:
            failures.append(f"the writer ended (rc {writer.returncode}) before it could be killed mid-write")
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        print(f"killed the writer with {size / 2**20:.0f} MB of its temporary file written")
        if sha(ckpt) != before:
            failures.append("the checkpoint changed although its writer was killed mid-write")
        info = subprocess.run([uma, "info", ckpt], capture_output=True, text=True)
        if info.returncode != 0:
            failures.append(f"uma info on the checkpoint after the kill: rc {info.returncode}, {info.stderr!r}")

        # A later complete write replaces the checkpoint, leftover temporary file or not.
        small = os.path.join(tmp, "small.json")
        with open(small, "w") as f:
            f.write(model_config(model))
        done = subprocess.run([uma, "init", small, ckpt, "--seed", "7"], capture_output=True, text=True)
        info = subprocess.run([uma, "info", ckpt], capture_output=True, text=True)
        if done.returncode != 0 or info.returncode != 0 or sha(ckpt) == before or os.path.exists(partial):
            failures.append(f"the complete write after the kill: rc {done.returncode}/{info.returncode}, "
                            f"changed {sha(ckpt) != before}, temporary left {os.path.exists(partial)}")
    for f in failures:
        print("FAIL:", f)
    print("crash safety: all passed" if not failures else "crash safety: FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
