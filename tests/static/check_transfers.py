#!/usr/bin/env python3
"""Fails on a direct host<->device transfer outside src/runtime/transfers.{h,cpp}.

Every copy between the host and the model's device must go through the
counted functions of src/runtime/transfers.h, so that the per-step budgets the tests
assert (uploads, host reads) are the whole truth, and so that no hidden
synchronisation creeps into the CUDA path.  This scans src/, plugin/, pair_style/
and fix_train/ for the operations that move data between devices or make the
host wait for the GPU.

A line may say why a flagged form is not a transfer, with one of five markers:
  // host data        the tensor lives on the host by construction (a LAMMPS
                      array wrapped for upload, a result read() returned)
  // bulk transfer    a one-off move of a whole model or state outside the
                      time step (loading, checkpoints)
  // same device      a copy_ between tensors on one device
  // device view      a Kokkos view on the execution space whose memory the
                      model runs in, wrapped in place (pair_style uma/kk)
  // kernel argument  a raw pointer handed to a kernel that runs on the
                      tensor's own device (the lean launchers: CPU kernels on
                      CPU tensors, CUDA kernels on CUDA tensors), never read
                      by the host
usage: check_transfers.py REPO_ROOT | --self-test
"""
import pathlib
import re
import sys

FOLDERS = ["src", "lammps_common", "plugin", "pair_style", "fix_train"]
EXEMPT_FILES = {
    "src/runtime/transfers.h", "src/runtime/transfers.cpp",   # the counting module itself
    # readers and writers of host files, which never see a device tensor
    "src/io/safetensors.cpp", "src/io/extxyz.cpp",
}
MARKERS = ("// host data", "// bulk transfer", "// same device", "// device view", "// kernel argument")

# A .to(...) whose only argument is a dtype converts on the tensor's own device.
DTYPE_ONLY = re.compile(
    r"\(\s*(torch::k(?!CPU\b|CUDA\b)\w+|[\w:.>()-]*?(scalar_type\(\)|dtype\(\)\.toScalarType\(\)|dtype\(\)|\.dtype|\bdtype))\s*\)")

RULES = [
    ("item", re.compile(r"\.item\s*[<(]"), "reads a device scalar: use to_host() or Engine::read()"),
    ("cpu", re.compile(r"\.cpu\s*\("), "moves to the host: use to_host()"),
    ("to", re.compile(r"(\.|->)to\s*\("), "moves between devices: use upload()/to_host() (a dtype-only .to() is fine)"),
    ("data_ptr", re.compile(r"\bdata_ptr\b|\.accessor\s*<"), "raw pointer into a tensor that may live on the device"),
    ("from_blob", re.compile(r"\bfrom_blob\b"), "wraps host memory: upload it with upload()"),
    ("tensor", re.compile(r"\btorch::tensor\s*\("), "builds a host tensor: use upload(std::vector, options)"),
    ("repeat_interleave", re.compile(r"\brepeat_interleave\s*\("), "without output_size it reads the total from the device"),
    ("sync_op", re.compile(r"\bnonzero\s*\(|\bmasked_select\b|\bunique\w*\s*\(|\.tolist\b|\bbincount\s*\("),
     "data-dependent output size (bincount reads min and max): the host waits for the device"),
    ("copy", re.compile(r"\bcopy_\s*\(|\bset_data\s*\("), "may copy across devices: say why it does not, or use upload()"),
    ("synchronize", re.compile(r"\bsynchronize\s*\("), "an explicit wait for the device"),
]


def strip_comment(line):
    # drop // comments (not inside strings: good enough for this code base)
    out, in_str = [], False
    i = 0
    while i < len(line):
        c = line[i]
        if c == '"' and (i == 0 or line[i - 1] != "\\"):
            in_str = not in_str
        if not in_str and line.startswith("//", i):
            break
        out.append(c)
        i += 1
    return "".join(out)


def violations(text):
    found = []
    lines = text.splitlines()
    in_block = False
    for n, raw in enumerate(lines, 1):
        line = raw
        if in_block:
            if "*/" not in line:
                continue
            line = line.split("*/", 1)[1]
            in_block = False
        if "/*" in line and "*/" not in line.split("/*", 1)[1]:
            line, in_block = line.split("/*", 1)[0], True
        code = strip_comment(line)
        if any(m in raw for m in MARKERS):
            continue
        for name, pattern, why in RULES:
            for m in pattern.finditer(code):
                if name == "to" and DTYPE_ONLY.match(code, m.end() - 1):   # at its "("
                    continue
                if name == "repeat_interleave":
                    stmt = code[m.start():]
                    for extra in lines[n:n + 3]:   # the call may span lines
                        if ";" in stmt:
                            break
                        stmt += extra
                    if "output_size" in stmt.split(";", 1)[0]:
                        continue
                found.append((n, name, why, raw.strip()))
                break
    return found


def scan(root):
    root = pathlib.Path(root)
    bad, files, marked = [], 0, 0
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".h", ".cpp"):
                continue
            rel = path.relative_to(root).as_posix()
            if rel in EXEMPT_FILES:
                continue
            files += 1
            text = path.read_text()
            marked += sum(1 for l in text.splitlines() if any(m in l for m in MARKERS))
            bad += [(rel,) + v for v in violations(text)]
    for rel, n, name, why, line in bad:
        print(f"FAIL: {rel}:{n}: [{name}] {why}\n      {line}")
    print(f"scanned {files} files under {', '.join(FOLDERS)}; {marked} lines carry a marker; "
          f"{len(bad)} direct transfers")
    if bad:
        return 1
    print("transfer scan: all passed")
    return 0


SELF_TEST_BAD = [
    "double v = t.item<double>();",
    "auto h = t.cpu();",
    "auto h = t.to(torch::kCPU, torch::kFloat32);",
    "auto h = t.to(torch::kCPU);",
    "auto d = host.to(device);",
    "auto d = host.to(opts);",
    "model_->to(options_.device, options_.dtype);",
    "auto p = t.data_ptr<double>();",
    "auto a = t.accessor<double, 2>();",
    "auto w = torch::from_blob(v.data(), {n}, torch::kFloat64);",
    "auto w = torch::tensor(v, torch::kLong);",
    "auto r = torch::arange(n).repeat_interleave(k);",
    "auto i = mask.nonzero();",
    "auto u = torch::unique_consecutive(x);",
    "auto c = torch::bincount(z, {}, Z);",
    "g.copy_(host);",
    "torch::cuda::synchronize();",
]
SELF_TEST_GOOD = [
    "auto f = t.to(torch::kFloat64);",
    "auto f = t.to(options_.dtype);",
    "auto f = t.to(x.scalar_type());",
    "auto f = t.to(fopts.dtype().toScalarType());",
    "auto r = torch::repeat_interleave(c, /*output_size=*/n);",
    "auto p = host.data_ptr<double>();   // host data",
    "model_->to(device);   // bulk transfer",
    "// t.item<double>() in a comment",
    "torch::Device device = torch::kCPU;",
    "w.copy_(v);   // same device",
    "auto x = torch::from_blob(view.data(), {n, 3}, opts);   // device view",
    "return t.data_ptr<T>();   // kernel argument",
]


def self_test():
    ok = True
    for line in SELF_TEST_BAD:
        if not violations(line):
            print(f"FAIL: self-test: not flagged: {line}")
            ok = False
    for line in SELF_TEST_GOOD:
        if violations(line):
            print(f"FAIL: self-test: flagged: {line} -> {violations(line)}")
            ok = False
    print("transfer scan self-test: " + ("all passed" if ok else "failed"))
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(self_test() if sys.argv[1] == "--self-test" else scan(sys.argv[1]))
