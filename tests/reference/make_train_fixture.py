#!/usr/bin/env python3
"""One training step through fairchem, as a parity fixture for lammps-uma.

Usage:
    make_train_fixture.py OUTDIR [--seed N]

Builds an UMA-S-1.1-shaped model with fairchem's classes (the s1p1 spec of
make_fixtures.py, seeded random weights), writes it as OUTDIR/train_s1p1.safetensors
with tools/convert_checkpoint.py, and takes one training step in float64 with
fairchem's own pieces: HydraModel.forward in training mode (conserving forces
and stress with create_graph), fairchem Task objects with DDPMTLoss
(PerAtomMAELoss / L2NormLoss / MAELoss, fairchem's normalizers and element
references), compute_loss, backward, clip_grad_norm_, torch.optim.AdamW and
the first step of LambdaLR(CosineLRLambda).  Routing dropout is off and the
Wigner roll angle gamma is zero.  Writes OUTDIR/train_fixture.json:

    {"systems": [...with labels...], "options": {...}, "task_losses": {name: value},
     "loss", "grad_norm", "updated": {parameter name: flat values (sampled)}}
"""
from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import sys
import tempfile
import types
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402
import convert_checkpoint  # noqa: E402  (tools/, put on the path by make_fixtures)

OPTIONS = {"lr": 1e-3, "weight_decay": 1e-3, "clip": 100.0, "warmup_factor": 0.2, "warmup_steps": 10,
           "total_steps": 100, "lr_min_factor": 0.01, "energy_coef": 20.0, "forces_coef": 2.0,
           "stress_coef": 1.0, "forces_reduction": "mean"}
SYSTEMS = ("cu_bulk", "molecule", "slab", "triclinic")


def label(atoms, rng, periodic):
    """Synthetic labels: numbers of the right size and scale."""
    from ase.calculators.singlepoint import SinglePointCalculator

    n = len(atoms)
    energy = float(rng.uniform(-4.0, -1.0) * n)
    forces = rng.normal(0.0, 0.4, size=(n, 3))
    stress = rng.normal(0.0, 0.01, size=(3, 3))
    stress = (stress + stress.T) / 2
    atoms.calc = SinglePointCalculator(atoms, energy=energy, forces=forces)
    return energy, forces, (stress if periodic else None)


def fairchem_model(checkpoint, dtype):
    """The checkpoint's HydraModel in training mode, dropout off, gamma = 0."""
    import hydra

    # Built in the target dtype, so the Wigner J matrices (buffers Jd_*) are
    # computed in it, not float32 values from the checkpoint widened afterwards.
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        model = hydra.utils.instantiate(copy.deepcopy(checkpoint.model_config))
    finally:
        torch.set_default_dtype(previous)
    weights = {k: v for k, v in checkpoint.model_state_dict.items() if ".Jd_" not in k}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if unexpected or any(".Jd_" not in k for k in missing):
        raise RuntimeError(f"state dict mismatch: missing {missing}, unexpected {unexpected}")
    model = model.to(dtype)
    model.train()
    # Dropout off (the specs' moe_dropout 0.05 would draw random routing masks).
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    counter = mf.patch_gamma_zero(types.SimpleNamespace(model=types.SimpleNamespace(module=model)))
    return model, counter


def fairchem_tasks(checkpoint, coef: dict, forces_reduction: str):
    """The checkpoint's tasks with fairchem's losses, as a training config builds them."""
    import hydra
    from fairchem.core.modules.loss import DDPMTLoss, L2NormLoss, MAELoss, PerAtomMAELoss

    tasks = [hydra.utils.instantiate(t) for t in checkpoint.tasks_config]
    inner = {"energy": PerAtomMAELoss, "forces": L2NormLoss, "stress": MAELoss}
    for t in tasks:
        reduction = forces_reduction if t.property == "forces" else "mean"
        t.loss_fn = DDPMTLoss(loss_fn=inner[t.property](), reduction=reduction, coefficient=coef[t.property])
    return tasks


def fairchem_batch(samples, tasks, dtype):
    """samples: [(atoms, task, energy, forces, stress or None)] -> (AtomicData batch, data list) with every
    task's target (+inf where a sample has none), as fairchem's collater makes it."""
    from fairchem.core.datasets.atomic_data import AtomicData, atomicdata_list_to_batch

    data_list = [AtomicData.from_ase(atoms, task_name=task, r_data_keys=["spin", "charge"], target_dtype=dtype)
                 for atoms, task, *_ in samples]
    batch = atomicdata_list_to_batch(data_list)
    batch.dataset_name = [task for _, task, *_ in samples]
    batch.pos = batch.pos.to(dtype)
    batch.cell = batch.cell.to(dtype)
    inf = float("inf")
    for t in tasks:
        if t.property == "energy":
            v = [e if task in t.datasets else inf for _, task, e, _, _ in samples]
            batch[t.name] = torch.tensor(v, dtype=dtype)
        elif t.property == "forces":
            v = [f if task in t.datasets else np.full_like(f, inf) for _, task, _, f, _ in samples]
            batch[t.name] = torch.tensor(np.concatenate(v), dtype=dtype)
        else:
            v = [s.reshape(1, 9) if (task in t.datasets and s is not None) else np.full((1, 9), inf)
                 for _, task, _, _, s in samples]
            batch[t.name] = torch.tensor(np.concatenate(v), dtype=dtype)
    return batch, data_list


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir")
    parser.add_argument("--seed", type=int, default=mf.DEFAULT_SEED)
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    from fairchem.core.modules.scheduler import CosineLRLambda
    from fairchem.core.units.mlip_unit.mlip_unit import compute_loss

    os.makedirs(args.outdir, exist_ok=True)
    tmp = tempfile.TemporaryDirectory(prefix="uma-train-fixture-")
    ckpt = os.path.join(tmp.name, "s1p1.pt")
    checkpoint = mf.build_checkpoint("s1p1", mf.MODEL_SPECS["s1p1"], args.seed + 7, ckpt)
    model_file = os.path.join(args.outdir, "train_s1p1.safetensors")
    convert_checkpoint.convert(ckpt, model_file, weights="raw", dtype="float32")

    # float64 throughout: fairchem makes some tensors on the fly in the default dtype
    torch.set_default_dtype(torch.float64)
    model, counter = fairchem_model(checkpoint, torch.float64)
    coef = {"energy": OPTIONS["energy_coef"], "forces": OPTIONS["forces_coef"], "stress": OPTIONS["stress_coef"]}
    tasks = fairchem_tasks(checkpoint, coef, OPTIONS["forces_reduction"])

    systems = mf.make_systems(args.seed)
    rng = np.random.default_rng(args.seed)
    samples = []
    for name in SYSTEMS:
        atoms, task = systems[name]
        atoms = atoms.copy()
        samples.append((atoms, task, *label(atoms, rng, bool(atoms.pbc.all()))))
    batch, data_list = fairchem_batch(samples, tasks, torch.float64)
    records = []
    for name, data, (_, task, energy, forces, stress) in zip(SYSTEMS, data_list, samples):
        records.append({"name": name, "numbers": [int(z) for z in data.atomic_numbers.tolist()],
                        "positions": data.pos.double().tolist(), "cell": data.cell.reshape(3, 3).double().tolist(),
                        "pbc": [bool(p) for p in data.pbc.reshape(3).tolist()],
                        "charge": int(data.charge.reshape(-1)[0]), "spin": int(data.spin.reshape(-1)[0]),
                        "task": task, "energy": energy, "forces": forces.tolist(),
                        "stress": None if stress is None else stress.reshape(-1).tolist()})

    optimizer = torch.optim.AdamW(model.parameters(), lr=OPTIONS["lr"], weight_decay=OPTIONS["weight_decay"])
    schedule = CosineLRLambda(warmup_epochs=OPTIONS["warmup_steps"], warmup_factor=OPTIONS["warmup_factor"],
                              epochs=OPTIONS["total_steps"], lr_min_factor=OPTIONS["lr_min_factor"])
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=schedule)

    pred = model(batch)
    if counter["calls"] == 0:
        raise RuntimeError("the gamma = 0 patch was not used")
    loss_dict = compute_loss(tasks, pred, batch)
    loss = sum(loss_dict.values())
    optimizer.zero_grad()
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=OPTIONS["clip"])
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    optimizer.step()
    scheduler.step()

    sample = np.random.default_rng(1)
    updated, original = {}, {}
    for k, v in model.named_parameters():
        flat = v.detach().reshape(-1)
        idx = sorted(sample.choice(flat.numel(), size=min(flat.numel(), 24), replace=False).tolist())
        updated[k] = {"index": idx, "value": flat[idx].tolist(), "before": before[k].reshape(-1)[idx].tolist()}
    out = {"model": "train_s1p1.safetensors", "options": OPTIONS, "systems": records,
           "task_losses": {k: float(v) for k, v in loss_dict.items()}, "loss": float(loss),
           "grad_norm": float(grad_norm), "updated": updated,
           "prediction_keys": sorted(pred.keys())}
    with open(os.path.join(args.outdir, "train_fixture.json"), "w") as f:
        json.dump(out, f)
    print(f"train fixture: loss {float(loss):.6f}, grad norm {float(grad_norm):.4f}, "
          f"{len(updated)} parameters sampled -> {args.outdir}/train_fixture.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
