#!/usr/bin/env python3
"""Writes the hand-made seeds of the fuzz targets into fuzz/corpus/*; stdlib only.
The other corpus files (named by their SHA-1) are inputs the fuzzers found
that add coverage, merged in with `FUZZER -merge=1 corpus/NAME NEW_INPUTS`.

model_file: small safetensors files around a shrunken copy of the demo
model's configuration (valid ones and near misses); extxyz: the shipped
structures plus frames that use every feature the reader knows.
"""
import json
import pathlib
import struct

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def safetensors(tensors, metadata):
    """tensors: name -> (dtype, shape, bytes)."""
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def f32(n, value=0.5):
    return struct.pack(f"<{n}f", *([value] * n))


def model_seeds():
    config = json.loads(read_header(ROOT / "potentials/uma-s-tiny-random.safetensors")["__metadata__"]["config"])
    b = config["backbone"]
    b.update(max_num_elements=4, sphere_channels=2, hidden_channels=2, edge_channels=2, num_experts=2,
             num_layers=1, num_distance_basis=2)
    config["tasks"] = [t for t in config["tasks"] if t.get("datasets") == ["omat"]]
    for t in config["tasks"]:
        if t.get("element_references"):
            t["element_references"] = "refs"
    meta = {"format": "lammps-uma-model", "format_version": "1", "config": json.dumps(config)}
    weights = {"w": ("F32", [40], f32(40)), "refs": ("F64", [4], struct.pack("<4d", 0, -1, -2, -3))}
    seeds = {
        "valid": safetensors(weights, meta),
        "too_few_weights": safetensors({"refs": weights["refs"]}, meta),
        "no_format": safetensors(weights, {"config": meta["config"]}),
        "version_2": safetensors(weights, dict(meta, format_version="2")),
        "plain_tensors": safetensors({"a": ("BF16", [2, 3], bytes(12)), "b": ("I64", [0], b""),
                                      "c": ("BOOL", [1, 1, 1], b"\x01")}, None),
        "balanced": safetensors(weights, dict(meta, config=json.dumps(
            dict(config, backbone=dict(b, charge_balanced_channels=[0, 1], spin_balanced_channels=[1]))))),
    }
    out = HERE / "corpus/model_file"
    out.mkdir(parents=True, exist_ok=True)
    for name, data in seeds.items():
        (out / name).write_bytes(data)


def extxyz_seeds():
    out = HERE / "corpus/extxyz"
    out.mkdir(parents=True, exist_ok=True)
    for path in list((ROOT / "examples/structures").glob("*.extxyz")) + list((ROOT / "tests/data").glob("*.extxyz")):
        text = path.read_text()
        if path.name == "cu_emt_labelled.extxyz":   # keep the seeds small: its first frame
            lines = text.splitlines(keepends=True)
            text = "".join(lines[: int(lines[0]) + 2])
        (out / path.name).write_text(text)
    (out / "features.extxyz").write_text(
        "2\n"
        'Lattice="4 0 0 0.5 4 0 0 0 9" Properties=species:S:1:pos:R:3:forces:R:3:Z:I:1:tag:S:1 '
        'pbc="T T F" energy=-1.5 charge=1 spin=2 stress="1 2 3 4 5 6" task=omat\n'
        "Cu -0.5 1 1 0.1 0.2 0.3 29 a\n"
        "O 4.5 2 10 0 0 0 8 b\n"
        "\n"
        "1\n"
        "Properties=Z:I:1:pos:R:3\n"
        "1 0 0 0\n")


if __name__ == "__main__":
    model_seeds()
    extxyz_seeds()
    print("seeds written to", HERE / "corpus")
