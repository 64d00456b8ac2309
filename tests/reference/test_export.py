#!/usr/bin/env python3
"""tools/export_checkpoint.py: a model file back to fairchem, checked by value.

Round trip: the engine trains tests/fixtures/train_s1p1.safetensors (the
UMA-S-1.1-shaped start model of the training fixture) for 3 steps with
`uma train`, once as the defaults do (fp32, averaged weights) and once in
fp64 without averaging; both results, and tests/fixtures/s1p2.safetensors
(UMA-S-1.2 layout: dataset-MoE head, charge-balanced channels), are exported
(float32, float64, float32) and loaded by fairchem's own loader
(load_predict_unit, float64, Wigner roll angle gamma patched to 0 as
make_fixtures.py does).  fairchem's energy, forces and stress on three frames
(108-atom Cu bulk / omat, the ethanol cation / omol with charge 1 and spin 2,
a periodic Cu(111) slab with O / oc20) equal `uma eval MODEL FRAMES --json
--precision fp64` on the model file within 1e-12: energy relative to
max(1, |E|), forces in eV/A, stress in eV/A^3 (periodic frames); measured
worst 2.8e-15, 2.2e-14 and 5.8e-16.  The FAIRChemCalculator, fairchem's ASE
calculator as shipped (random roll angle), gives the Cu energy within 1e-9
relative (measured 9e-16).

Refusals: exit 2 and "export_checkpoint: error: ..." for a missing input, a
file that is not a model file, a model that is not UMA-S-shaped (lmax 3, a
foreign backbone), missing config fields or tensors, a configuration fairchem
would build differently, and an output in a missing folder, naming a folder
or naming the input (which stays as it was).

usage: test_export.py --uma UMA          (a uma binary of this machine)
       test_export.py --sid-root ROOT    (the sid root's build, run through scripts/in_sid.sh)
"""
import argparse
import contextlib
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
EXPORTER = os.path.join(REPO, "tools", "export_checkpoint.py")
IN_SID = os.path.join(REPO, "scripts", "in_sid.sh")
START_MODEL = os.path.join(REPO, "tests", "fixtures", "train_s1p1.safetensors")
MOE_MODEL = os.path.join(REPO, "tests", "fixtures", "s1p2.safetensors")
TRAIN_DATA = os.path.join(REPO, "tests", "data", "cu_emt_labelled.extxyz")
STRUCTURES = os.path.join(REPO, "examples", "structures")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tools"))
sys.path.insert(0, os.path.join(REPO, "scripts"))

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

import export_checkpoint  # noqa: E402  (tools/export_checkpoint.py)
import make_fixtures  # noqa: E402

TOLERANCE = 1e-12
CALCULATOR_TOLERANCE = 1e-9
TRAIN = ["--steps", "3", "--lr", "1e-3", "--max-atoms", "32", "--seed", "0"]

failures = []


def check(ok, message):
    if not ok:
        failures.append(message)
    return ok


class Uma:
    """The uma command, on this machine or inside the sid root; files go in self.folder."""

    def __init__(self, uma=None, root=None):
        self.root = root
        if root is None:
            self.command = [uma]
            self.folder = tempfile.mkdtemp(prefix="uma-export-")
            self.inside = self.folder
        else:
            import root_layout

            self.command = [IN_SID, root, root_layout.BUILD + "/uma"]
            self.inside = f"/tmp/uma-export-{os.getpid()}"
            self.folder = os.path.join(root, self.inside.lstrip("/"))
            shutil.rmtree(self.folder, ignore_errors=True)
            os.makedirs(self.folder)

    def path(self, host_path):
        """The command's name for a file in self.folder."""
        return os.path.join(self.inside, os.path.relpath(host_path, self.folder))

    def __call__(self, *args):
        mapped = [self.path(a) if isinstance(a, str) and a.startswith(self.folder) else a for a in args]
        p = subprocess.run(self.command + mapped, capture_output=True, text=True)
        print("$ uma", " ".join(str(a) for a in mapped), f"(rc {p.returncode})", flush=True)
        return p


def export(*args):
    """export_checkpoint.main in this process: (exit code, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = export_checkpoint.main([str(a) for a in args])
    return code, err.getvalue()


def expect_error(args, needle, cli=False):
    if cli:  # through the command line: the exit status a shell sees
        p = subprocess.run([sys.executable, EXPORTER, *args], capture_output=True, text=True)
        code, err = p.returncode, p.stderr
    else:
        code, err = export(*args)
    check(code == 2 and "export_checkpoint: error: " in err and needle in err,
          f"{[os.path.basename(str(a)) for a in args]}: expected exit 2 and an error mentioning "
          f"{needle!r}, got {code}: {err.strip()[-400:]}")


# --------------------------------------------------------------------------
# frames


def frames():
    """[(name, atoms, task)]: positions etc. as the doubles both sides see."""
    import ase.io
    from ase.build import add_adsorbate, fcc111

    cu = ase.io.read(os.path.join(STRUCTURES, "cu_bulk.extxyz"))
    ethanol = ase.io.read(os.path.join(STRUCTURES, "ethanol_cation.extxyz"))
    ethanol.info = {"charge": 1, "spin": 2}
    slab = fcc111("Cu", size=(2, 2, 3), vacuum=6.0)
    add_adsorbate(slab, "O", 1.6, "fcc")
    slab.pbc = True
    slab.positions[0] += (0.05, -0.03, 0.02)  # off the symmetric site: forces in every direction
    for atoms in (cu, slab):
        atoms.info = {"charge": 0, "spin": 0}
    return [("cu_bulk", cu, "omat"), ("ethanol_cation", ethanol, "omol"), ("cu_slab_o", slab, "oc20")]


def write_frames(path, systems):
    """Extended XYZ that `uma eval` reads with the same doubles (repr is exact)."""
    text = []
    for _, atoms, task in systems:
        head = f"Properties=Z:I:1:pos:R:3 task={task} charge={atoms.info['charge']} spin={atoms.info['spin']}"
        if atoms.pbc.any():
            head = 'Lattice="' + " ".join(repr(float(x)) for x in atoms.cell.array.reshape(-1)) + '" ' + head
        head += ' pbc="' + " ".join("T" if p else "F" for p in atoms.pbc) + '"'
        rows = [f"{z} " + " ".join(repr(float(x)) for x in p)
                for z, p in zip(atoms.numbers, atoms.positions)]
        text.append(f"{len(rows)}\n{head}\n" + "\n".join(rows) + "\n")
    with open(path, "w") as f:
        f.write("".join(text))


# --------------------------------------------------------------------------
# the round trip


def trained_models(uma):
    """Two models after training steps; None where `uma train` failed."""
    data = os.path.join(uma.folder, "cu_emt_labelled.extxyz")
    start = os.path.join(uma.folder, "start.safetensors")
    shutil.copy(TRAIN_DATA, data)
    shutil.copy(START_MODEL, start)
    runs = {"trained_fp32_ema": [], "trained_fp64_raw": ["--precision", "fp64", "--ema", "0"]}
    models = {}
    for name, extra in runs.items():
        out = os.path.join(uma.folder, name + ".safetensors")
        p = uma("train", start, data, "--out", out, *TRAIN, *extra)
        if not check(p.returncode == 0 and os.path.exists(out),
                     f"uma train ({name}): rc {p.returncode}: {p.stderr.strip()[-400:]}"):
            continue
        with safe_open(start, "pt") as a, safe_open(out, "pt") as b:
            moved = max((a.get_tensor(k).double() - b.get_tensor(k).double()).abs().max().item()
                        for k in a.keys() if not k.startswith(("tasks.", "backbone.Jd_")))
        print(f"{name}: largest weight change by the training {moved:.3g}")
        check(moved > 1e-6, f"{name}: the training did not change the weights ({moved})")
        models[name] = out
    return models


def fairchem_results(checkpoint, systems):
    predictor, counter = make_fixtures.load_predictor(checkpoint, torch.float64)
    table = {name: (atoms, task) for name, atoms, task in systems}
    return [make_fixtures.evaluate(predictor, counter, table, [name], torch.float64)
            for name, _, _ in systems]


def compare(label, systems, ours, engine):
    worst = {"energy": 0.0, "forces": 0.0, "stress": 0.0}
    for (name, atoms, _), mine, theirs in zip(systems, ours, engine):
        energy = mine["energy"][0]
        diffs = {
            "energy": abs(energy - theirs["energy"]) / max(1.0, abs(theirs["energy"])),
            "forces": float(np.abs(np.array(mine["forces"][0]).reshape(-1) - theirs["forces"]).max()),
        }
        if atoms.pbc.all():
            diffs["stress"] = float(np.abs(np.array(mine["stress"][0]) - theirs["stress"]).max())
        scale = float(np.abs(theirs["forces"]).max())
        print(f"  {label} {name:15s} E={energy:.9f} |F|max={scale:.3f}  "
              + "  ".join(f"d{k}={v:.2e}" for k, v in diffs.items()))
        check(scale > 1e-3, f"{label} {name}: forces look trivial (max {scale})")
        for key, value in diffs.items():
            worst[key] = max(worst[key], value)
            check(value <= TOLERANCE, f"{label} {name}: fairchem and uma eval differ in {key} by "
                  f"{value:.3g} (> {TOLERANCE})")
    return worst


def round_trip(uma):
    systems = frames()
    frames_file = os.path.join(uma.folder, "frames.extxyz")
    write_frames(frames_file, systems)
    models = trained_models(uma)
    moe = os.path.join(uma.folder, "s1p2.safetensors")
    shutil.copy(MOE_MODEL, moe)
    cases = [(name, path, "float64" if "fp64" in name else "float32") for name, path in models.items()]
    cases.append(("s1p2", moe, "float32"))
    worst = {"energy": 0.0, "forces": 0.0, "stress": 0.0}
    compared = 0
    for name, model, dtype in cases:
        checkpoint = os.path.join(uma.folder, name + ".pt")
        code, err = export(model, checkpoint, "--dtype", dtype)
        if not check(code == 0, f"export of {name}: exit {code}: {err.strip()[-600:]}"):
            continue
        p = uma("eval", model, frames_file, "--json", "--precision", "fp64")
        if not check(p.returncode == 0, f"uma eval {name}: rc {p.returncode}: {p.stderr.strip()[-400:]}"):
            continue
        engine = json.loads(p.stdout)
        if not check(len(engine) == len(systems), f"uma eval {name}: {len(engine)} results"):
            continue
        ours = fairchem_results(checkpoint, systems)
        for key, value in compare(f"{name}/{dtype}", systems, ours, engine).items():
            worst[key] = max(worst[key], value)
        compared += 1
        if name == "trained_fp32_ema":
            calculator_check(checkpoint, systems[0], engine[0])
    print(f"worst differences fairchem vs uma eval ({compared} of {len(cases)} models): "
          + ", ".join(f"{k} {v:.2e}" for k, v in worst.items()))


def calculator_check(checkpoint, system, engine):
    """fairchem's ASE calculator as a user would load the file (random roll angle)."""
    from fairchem.core import FAIRChemCalculator
    from fairchem.core.calculate import pretrained_mlip
    from fairchem.core.units.mlip_unit.api.inference import InferenceSettings

    settings = InferenceSettings(tf32=False, merge_mole=False, compile=False,
                                 base_precision_dtype=torch.float64)
    unit = pretrained_mlip.load_predict_unit(checkpoint, inference_settings=settings, device="cpu")
    name, atoms, task = system
    atoms = atoms.copy()
    atoms.calc = FAIRChemCalculator(unit, task_name=task)
    energy = atoms.get_potential_energy()
    diff = abs(energy - engine["energy"]) / max(1.0, abs(engine["energy"]))
    print(f"  FAIRChemCalculator {name}: E={energy:.9f}, relative difference {diff:.2e}")
    check(diff <= CALCULATOR_TOLERANCE, f"FAIRChemCalculator on {name}: energy differs by {diff:.3g}")


# --------------------------------------------------------------------------
# refusals


def edited_copy(path, source, edit_config=None, drop=()):
    with safe_open(source, "pt") as handle:
        metadata = dict(handle.metadata())
        tensors = {k: handle.get_tensor(k) for k in handle.keys() if k not in drop}
    if edit_config is not None:
        config = json.loads(metadata["config"])
        edit_config(config)
        metadata["config"] = json.dumps(config)
    save_file(tensors, path, metadata=metadata)
    return path


def refusals(folder):
    out = os.path.join(folder, "out.pt")
    expect_error([os.path.join(folder, "missing.safetensors"), out], "input file not found", cli=True)
    text = os.path.join(folder, "text.safetensors")
    with open(text, "w") as f:
        f.write("not a model file")
    expect_error([text, out], "is not a lammps-uma model file")
    plain = os.path.join(folder, "plain.safetensors")
    save_file({"w": torch.ones(3)}, plain)
    expect_error([plain, out], "is not a lammps-uma model file")

    def set_backbone(key, value):
        return lambda c: c["backbone"].__setitem__(key, value)

    lmax3 = edited_copy(os.path.join(folder, "lmax3.safetensors"), START_MODEL, set_backbone("lmax", 3))
    expect_error([lmax3, out], "lmax=3 (need 2)", cli=True)
    foreign = edited_copy(os.path.join(folder, "foreign.safetensors"), START_MODEL,
                          lambda c: c.__setitem__("backbone_class", "fairchem.core.models.escn.escn.eSCN"))
    expect_error([foreign, out], "unsupported backbone")
    no_tasks = edited_copy(os.path.join(folder, "no_tasks.safetensors"), START_MODEL, lambda c: c.pop("tasks"))
    expect_error([no_tasks, out], "the model's config lacks 'tasks'")
    no_cutoff = edited_copy(os.path.join(folder, "no_cutoff.safetensors"), START_MODEL,
                            lambda c: c["backbone"].pop("cutoff"))
    expect_error([no_cutoff, out], "the config's backbone lacks 'cutoff'")
    # the engine would divide the composition mean by N+1, fairchem (model_id UMA-1.1) by N
    include_self = edited_copy(os.path.join(folder, "include_self.safetensors"), START_MODEL,
                               lambda c: c.__setitem__("composition_mean_include_self", True))
    expect_error([include_self, out], "fairchem would build a different model from this "
                 "configuration: composition_mean_include_self")
    refs = "tasks.omat_energy.element_references"
    no_refs = edited_copy(os.path.join(folder, "no_refs.safetensors"), START_MODEL, drop=(refs,))
    expect_error([no_refs, out], f"the file lacks tensor '{refs}'")
    weight = "backbone.sphere_embedding.weight"
    no_weight = edited_copy(os.path.join(folder, "no_weight.safetensors"), START_MODEL, drop=(weight,))
    expect_error([no_weight, out], weight)
    check(not os.path.exists(out), "a refused export left an output file")

    model = os.path.join(folder, "model.safetensors")
    shutil.copy(START_MODEL, model)
    missing_dir = os.path.join(folder, "no", "such", "dir")
    expect_error([model, os.path.join(missing_dir, "m.pt")], "output directory does not exist: " + missing_dir)
    subfolder = os.path.join(folder, "folder")
    os.mkdir(subfolder)
    expect_error([model, subfolder], "the output is a directory")
    before = open(model, "rb").read()
    expect_error([model, model], "would replace the model file it exports")
    check(open(model, "rb").read() == before, "exporting a model file onto itself changed it")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--uma", help="a uma binary of this machine")
    where.add_argument("--sid-root", help="the sid root whose build holds uma (scripts/in_sid.sh)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)

    uma = Uma(uma=args.uma, root=args.sid_root)
    try:
        refusals(uma.folder)
        round_trip(uma)
    finally:
        shutil.rmtree(uma.folder, ignore_errors=True)
    for failure in failures:
        print("FAIL:", failure)
    print(f"export checks: {'all passed' if not failures else str(len(failures)) + ' failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
