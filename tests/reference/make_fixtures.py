#!/usr/bin/env python3
"""Write parity fixtures for lammps-uma with fairchem's own code.

Usage:
    make_fixtures.py OUTDIR [--seed N] [--keep-checkpoints]

For three small UMA-like model configurations (s1p1, s1p2, k4l2) this script
builds a HydraModel with fairchem's classes, fills every parameter with seeded
random values, saves it as a genuine fairchem inference checkpoint (raw and
different EMA weights), converts that with tools/convert_checkpoint.py into
OUTDIR/<name>.safetensors, and evaluates a set of small systems with fairchem's
MLIPPredictUnit (general backend, no merge, no compile, no TF32) in float32 and
float64, with the random Wigner roll angle gamma patched to zero.  Results go
to OUTDIR/fixtures.json:

    {"fairchem_core_version", "torch_version", "seed", "conventions",
     "cases": [{"model": "<name>.safetensors", "dtype": "float32"|"float64",
                "systems": [{"name", "numbers", "positions", "cell", "pbc",
                             "charge", "spin", "task"}, ...],
                "energy": [E per system, eV],
                "forces": [[[fx, fy, fz] per atom] per system, eV/A],
                "stress": [[9 numbers, row-major 3x3] per system, eV/A^3],
                ...}]}

Positions are the caller's (ASE's, rounded to the case dtype), NOT wrapped
into the cell: several systems have atoms outside it, and fairchem wraps them
itself, so the engine's wrapping is compared with fairchem's.  Cells are
rows = lattice vectors; non-periodic systems carry ASE's completed cell
(identity for a molecule without a cell), which fairchem uses for the stress
volume.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import math
import os
import sys
import tempfile
import time
import types
import warnings

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tools"))

import convert_checkpoint  # noqa: E402  (tools/convert_checkpoint.py)

DEFAULT_SEED = 1234

ALL_UMA_DATASETS_1P1 = ["oc20", "omol", "omat", "odac", "omc"]
ALL_UMA_DATASETS_1P2 = ["oc20", "oc22", "oc25", "odac", "omat", "omc", "omol"]

# Per-dataset normalizer rmsd; distinct values so a task mix-up shows.
RMSD = {
    "oc20": 1.423,
    "omol": 1.371,
    "omat": 1.512,
    "odac": 1.297,
    "omc": 1.448,
    "oc22": 1.333,
    "oc25": 1.401,
}

BACKBONE_CLASS = "fairchem.core.models.uma.escn_moe.eSCNMDMoeBackbone"
SINGLE_HEAD = "fairchem.core.models.uma.escn_moe.DatasetSpecificSingleHeadWrapper"
MOE_HEAD = "fairchem.core.models.uma.escn_moe.DatasetSpecificMoEWrapper"
EFS_HEAD = "fairchem.core.models.uma.escn_md.MLP_EFS_Head"

MODEL_SPECS = {
    "s1p1": {
        "num_experts": 8,
        "num_distance_basis": 16,
        "max_neighbors": 300,
        "datasets": ALL_UMA_DATASETS_1P1,
        "backbone_extra": {"dataset_list": ALL_UMA_DATASETS_1P1, "model_version": 1.1},
        "head": "single",
        "model_id": None,  # compat shim back-fills "UMA-1.1"
        "supports_single_atoms": False,
    },
    "s1p2": {
        "num_experts": 16,
        "num_distance_basis": 8,
        "max_neighbors": 300,
        "datasets": ALL_UMA_DATASETS_1P2,
        "backbone_extra": {
            "dataset_mapping": {d: d for d in ALL_UMA_DATASETS_1P2},
            "charge_balanced_channels": [0, 1, 2],
            "spin_balanced_channels": [],
        },
        "head": "dataset_moe",
        "model_id": "UMA-S-1.2",  # composition mean with include_self=True
        "supports_single_atoms": True,
    },
    "k4l2": {
        "num_experts": 64,
        "num_distance_basis": 16,
        "max_neighbors": 30,
        "datasets": ALL_UMA_DATASETS_1P1,
        "backbone_extra": {"dataset_list": ALL_UMA_DATASETS_1P1},
        "head": "single",
        # perf_check configs carry neither model_id nor model_version, which
        # fairchem's loader refuses; tag it so it loads (include_self False).
        "model_id": "K4L2-perf-check",
        "supports_single_atoms": False,
    },
}

RAW_FILE_MODEL = "s1p1"  # the one configuration also written with --weights raw

# Gains of the random weights (see randomize_parameters).
WEIGHT_GAIN = 2.0
HEAD_GAIN = 4.0
ROUTING_GAIN = 6.0


def progress(message: str) -> None:
    print(f"[make_fixtures] {message}", flush=True)


# --------------------------------------------------------------------------
# model configuration and random weights


def backbone_config(spec: dict) -> dict:
    config = {
        "model": BACKBONE_CLASS,
        "max_num_elements": 100,
        "sphere_channels": 16,
        "hidden_channels": 24,
        "edge_channels": 8,
        "lmax": 2,
        "mmax": 2,
        "num_layers": 2,
        "cutoff": 6.0,
        "max_neighbors": spec["max_neighbors"],
        "distance_function": "gaussian",
        "num_distance_basis": spec["num_distance_basis"],
        "otf_graph": True,
        "direct_forces": False,
        "regress_forces": True,
        "regress_stress": True,
        "norm_type": "rms_norm_sh",
        "act_type": "gate",
        "ff_type": "spectral",
        "grid_resolution": None,
        "chg_spin_emb_type": "rand_emb",
        "cs_emb_grad": True,
        "dataset_emb_grad": False,
        "use_dataset_embedding": True,
        "activation_checkpointing": False,
        "num_experts": spec["num_experts"],
        "moe_dropout": 0.05,
        "use_composition_embedding": True,
        "moe_expert_coefficient_norm": "softmax",
        "moe_layer_type": "pytorch",
    }
    config.update(copy.deepcopy(spec["backbone_extra"]))
    config.update(copy.deepcopy(spec.get("sizes", {})))  # e.g. full UMA-S widths for benchmarks
    return config


def model_config(spec: dict) -> dict:
    if spec["head"] == "single":
        head = {
            "module": SINGLE_HEAD,
            "head_cls": EFS_HEAD,
            "head_kwargs": {"wrap_property": False},
            "dataset_names": list(spec["datasets"]),
        }
    else:
        head = {
            "module": MOE_HEAD,
            "head_cls": EFS_HEAD,
            "head_kwargs": {"wrap_property": False},
            "dataset_mapping": {d: d for d in spec["datasets"]},
        }
    config = {
        "_target_": "fairchem.core.models.base.HydraModel",
        "backbone": backbone_config(spec),
        "heads": {"energyandforcehead": head},
        "pass_through_head_outputs": True,
        "otf_graph": True,
    }
    if spec["model_id"] is not None:
        config["model_id"] = spec["model_id"]
    if spec["supports_single_atoms"]:
        config["supports_single_atoms"] = True
    return config


def tasks_config(spec: dict, rng: np.random.Generator, max_z: int = 100) -> list:
    normalizer_target = "fairchem.core.modules.normalization.normalizer.Normalizer"
    refs_target = "fairchem.core.modules.normalization.element_references.ElementReferences"
    tasks = []
    for dataset in spec["datasets"]:
        normalizer = {"_target_": normalizer_target, "mean": 0.0, "rmsd": RMSD[dataset]}
        refs = [float(v) for v in rng.uniform(-12.0, -0.5, size=max_z)]
        refs[0] = 0.0
        tasks.append(
            {
                "_target_": "fairchem.core.units.mlip_unit.mlip_unit.Task",
                "name": f"{dataset}_energy",
                "level": "system",
                "property": "energy",
                "out_spec": {"dim": [1], "dtype": "float32"},
                "normalizer": dict(normalizer),
                "element_references": {
                    "_target_": refs_target,
                    "element_references": {"_target_": "torch.DoubleTensor", "_args_": [refs]},
                },
                "datasets": [dataset],
            }
        )
        tasks.append(
            {
                "_target_": "fairchem.core.units.mlip_unit.mlip_unit.Task",
                "name": f"{dataset}_forces",
                "level": "atom",
                "property": "forces",
                "out_spec": {"dim": [3], "dtype": "float32"},
                "normalizer": dict(normalizer),
                "datasets": [dataset],
            }
        )
        tasks.append(
            {
                "_target_": "fairchem.core.units.mlip_unit.mlip_unit.Task",
                "name": f"{dataset}_stress",
                "level": "system",
                "property": "stress",
                "out_spec": {"dim": [1, 9], "dtype": "float32"},
                "normalizer": dict(normalizer),
                "datasets": [dataset],
            }
        )
    return tasks


def _uniform_(tensor: torch.Tensor, low: float, high: float, gen: torch.Generator) -> None:
    with torch.no_grad():
        values = torch.rand(tensor.shape, generator=gen, dtype=tensor.dtype)
        tensor.copy_(values * (high - low) + low)


def randomize_parameters(model: torch.nn.Module, gen: torch.Generator) -> None:
    """Seeded, deliberately non-trivial values for every parameter.

    Weights: U(+-gain/sqrt(fan_in)) with gain WEIGHT_GAIN (HEAD_GAIN in the
    energy head, ROUTING_GAIN in the routing MLP); embeddings and biases
    U(+-0.5); norm scales 1 + U(+-0.5).  The gains make forces O(0.1..10) eV/A
    and the expert coefficients clearly non-uniform without being one-hot.
    """
    from fairchem.core.models.uma.nn.layer_norm import (
        EquivariantRMSNormArraySphericalHarmonicsV2,
    )
    from fairchem.core.models.uma.nn.mole import MOLE
    from fairchem.core.models.uma.nn.so3_layers import SO3_Linear

    done = set()

    def fill(param, low, high):
        _uniform_(param, low, high, gen)
        done.add(id(param))

    def gain_for(name: str) -> float:
        if name.startswith("backbone.routing_mlp"):
            return ROUTING_GAIN
        if name.startswith("output_heads."):
            return HEAD_GAIN
        return WEIGHT_GAIN

    for name, module in model.named_modules():
        gain = gain_for(name)
        if isinstance(module, torch.nn.Linear):
            bound = gain / math.sqrt(module.in_features)
            fill(module.weight, -bound, bound)
            if module.bias is not None:
                fill(module.bias, -0.5, 0.5)
        elif isinstance(module, MOLE):
            bound = gain / math.sqrt(module.in_features)
            fill(module.weights, -bound, bound)
            if module.bias is not None:
                fill(module.bias, -0.5, 0.5)
        elif isinstance(module, SO3_Linear):
            bound = gain / math.sqrt(module.weight.shape[-1])
            fill(module.weight, -bound, bound)
            if module.bias is not None:
                fill(module.bias, -0.5, 0.5)
        elif isinstance(module, torch.nn.Embedding):
            fill(module.weight, -0.5, 0.5)
        elif isinstance(module, torch.nn.LayerNorm):
            fill(module.weight, 0.5, 1.5)
            fill(module.bias, -0.5, 0.5)
        elif isinstance(module, EquivariantRMSNormArraySphericalHarmonicsV2):
            fill(module.affine_weight, 0.5, 1.5)
            if module.affine_bias is not None:
                fill(module.affine_bias, -0.5, 0.5)
    leftover = [n for n, p in model.named_parameters() if id(p) not in done]
    if leftover:
        raise RuntimeError(f"parameters without an init rule: {leftover}")


def ema_from_raw(model: torch.nn.Module, raw: dict, gen: torch.Generator) -> dict:
    """EMA weights = raw parameters perturbed; buffers copied; module. prefix."""
    parameter_names = {n for n, _ in model.named_parameters()}
    ema = {}
    for key, value in raw.items():
        if key in parameter_names:
            scale = 1.0 + 0.1 * (2.0 * torch.rand(value.shape, generator=gen) - 1.0)
            shift = 0.02 * (2.0 * torch.rand(value.shape, generator=gen) - 1.0)
            ema["module." + key] = (value * scale + shift).to(value.dtype)
        else:
            ema["module." + key] = value.clone()
    ema["n_averaged"] = torch.tensor(12345, dtype=torch.long)
    return ema


def build_checkpoint(name: str, spec: dict, seed: int, path: str):
    import hydra

    from fairchem.core.units.mlip_unit.api.inference import MLIPInferenceCheckpoint

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    config = model_config(spec)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        model = hydra.utils.instantiate(copy.deepcopy(config))
    finally:
        torch.set_default_dtype(previous)
    randomize_parameters(model, gen)
    raw = {k: v.detach().clone() for k, v in model.state_dict().items()}
    ema = ema_from_raw(model, raw, gen)
    checkpoint = MLIPInferenceCheckpoint(
        model_config=config,
        model_state_dict=raw,
        ema_state_dict=ema,
        tasks_config=tasks_config(spec, rng),
    )
    torch.save(checkpoint, path)
    n_params = sum(p.numel() for p in model.parameters())
    progress(f"{name}: checkpoint with {n_params} parameters -> {os.path.basename(path)}")
    return checkpoint


def checkpoint_with_raw_as_ema(checkpoint, path: str) -> None:
    """A copy whose EMA slot holds the raw weights (fairchem always uses EMA)."""
    from fairchem.core.units.mlip_unit.api.inference import MLIPInferenceCheckpoint

    ema = {"module." + k: v.clone() for k, v in checkpoint.model_state_dict.items()}
    ema["n_averaged"] = torch.tensor(1, dtype=torch.long)
    torch.save(
        MLIPInferenceCheckpoint(
            model_config=copy.deepcopy(checkpoint.model_config),
            model_state_dict=checkpoint.model_state_dict,
            ema_state_dict=ema,
            tasks_config=copy.deepcopy(checkpoint.tasks_config),
        ),
        path,
    )


def verify_model_file(path: str, checkpoint, weights: str) -> None:
    """Every tensor in the file equals the chosen state-dict entry."""
    from safetensors import safe_open

    state = convert_checkpoint.select_state_dict(checkpoint, weights)
    with safe_open(path, framework="pt") as handle:
        keys = set(handle.keys())
        metadata = handle.metadata()
        assert metadata["format"] == "lammps-uma-model", metadata.get("format")
        assert metadata["format_version"] == "1"
        json.loads(metadata["config"])
        weight_keys = {k for k in keys if not k.startswith("tasks.")}
        if weight_keys != set(state):
            raise RuntimeError(
                f"{path}: names differ from the state dict: "
                f"{sorted(weight_keys ^ set(state))[:5]}"
            )
        for key in weight_keys:
            stored = handle.get_tensor(key)
            want = state[key]
            if want.is_floating_point():
                want = want.to(torch.float32)
            if stored.dtype != want.dtype or not torch.equal(stored, want):
                raise RuntimeError(f"{path}: tensor {key} differs from the state dict")


# --------------------------------------------------------------------------
# test systems


def make_systems(seed: int) -> dict:
    """name -> (ase.Atoms with info charge/spin, task)."""
    from ase import Atoms
    from ase.build import add_adsorbate, bulk, fcc111, molecule

    systems = {}

    mol = molecule("CH3CH2OH")
    mol.rattle(stdev=0.03, seed=seed + 1)
    mol.info.update(charge=1, spin=2)
    systems["molecule"] = (mol, "omol")

    cu = bulk("Cu", "fcc", a=3.61, cubic=True)
    cu.rattle(stdev=0.05, seed=seed + 2)
    cu.info.update(charge=0, spin=0)
    systems["cu_bulk"] = (cu, "omat")

    slab = fcc111("Pt", size=(2, 2, 3), vacuum=5.0)
    add_adsorbate(slab, "O", 1.2, "fcc")
    slab.pbc = (True, True, False)
    slab.info.update(charge=0, spin=0)
    systems["slab"] = (slab, "oc20")

    cell = np.array([[3.1, 0.0, 0.0], [2.4, 2.9, 0.0], [-1.7, 1.2, 3.3]])
    frac = np.array([[0.05, 0.10, 0.20], [1.20, -0.15, 0.55], [0.70, 0.65, -0.10]])
    tri = Atoms("ZnON", scaled_positions=frac, cell=cell, pbc=True)
    tri.set_positions(frac @ cell)  # keep the atoms outside the cell, unwrapped
    tri.info.update(charge=0, spin=0)
    systems["triclinic"] = (tri, "omat")

    # fcc cluster: a Ni atom with its first three Cu shells (12 + 6 + 24), so
    # the centre has 42 neighbours inside 6 A; squared distances come in
    # multiples of a^2/4, far apart compared with the 0.01 A^2 tie tolerance.
    a = 3.61
    sites = []
    for i in range(-2, 3):
        for j in range(-2, 3):
            for k in range(-2, 3):
                if (i + j + k) % 2 == 0 and 0 < i * i + j * j + k * k <= 6:
                    sites.append((i * a / 2, j * a / 2, k * a / 2))
    sites.sort()
    crowded = Atoms("Ni" + f"Cu{len(sites)}", positions=[(0.0, 0.0, 0.0)] + sites)
    crowded.info.update(charge=0, spin=0)
    systems["crowded"] = (crowded, "omat")

    direction = np.array([0.48, 0.6, -0.64])
    direction /= np.linalg.norm(direction)
    start = np.array([0.3, -0.2, 0.1])
    dimer = Atoms("CO", positions=[start, start + 2.0 * direction])
    dimer.info.update(charge=0, spin=0)
    systems["dimer"] = (dimer, "omat")

    # a bond exactly along +y / -y: the quaternion charts' special direction
    dimer_y = Atoms("CO", positions=[(0.0, 0.0, 0.0), (0.0, 2.0, 0.0)])
    dimer_y.info.update(charge=0, spin=0)
    systems["dimer_y"] = (dimer_y, "omat")
    return systems


BATCH = ("molecule", "cu_bulk", "slab")


def check_neighbor_margins(systems: dict, cutoff: float, max_neighbors_list) -> None:
    """Warn when a graph decision (cutoff, max-neighbour tie window) is fragile."""
    from ase.neighborlist import neighbor_list

    for name, (atoms, _task) in systems.items():
        work = atoms.copy()
        if not work.pbc.any():
            work.cell = np.eye(3) * 100.0
            work.center()
        i, d = neighbor_list("id", work, cutoff + 0.5)
        if np.any(np.abs(d - cutoff) < 1e-3):
            progress(f"WARNING {name}: a distance lies within 1e-3 A of the cutoff")
        for max_nb in max_neighbors_list:
            for atom in range(len(work)):
                s = np.sort(d[(i == atom) & (d <= cutoff)] ** 2)
                if len(s) > max_nb:
                    limit = s[max_nb] + 0.01
                    if np.min(np.abs(s - limit)) < 1e-3:
                        progress(
                            f"WARNING {name}: atom {atom} has a neighbour within 1e-3 A^2 "
                            f"of the max_neighbors={max_nb} tie window"
                        )


# --------------------------------------------------------------------------
# fairchem evaluation


def patch_gamma_zero(predict_unit) -> dict:
    """Make the backbone's Wigner matrices use roll angle gamma = 0.

    eSCNMDBackbone._get_rotmat_and_wigner calls axis_angle_wigner_hybrid
    (fairchem.core.models.uma.common.quaternion.wigner_d_hybrid) without gamma,
    which then draws gamma ~ U[0, 2pi) per edge.  The instance method is wrapped
    so that, while it runs, the name it calls passes gamma = zeros(E).
    """
    import fairchem.core.models.uma.escn_md as escn_md

    backbone = predict_unit.model.module.backbone
    if not backbone.use_quaternion_wigner:
        raise RuntimeError("expected the quaternion Wigner path")
    original = backbone._get_rotmat_and_wigner
    counter = {"calls": 0}

    def zero_gamma_rotmat_and_wigner(self, edge_distance_vecs):
        real = escn_md.axis_angle_wigner_hybrid

        def with_zero_gamma(edge_distance_vec, lmax, gamma=None, **kwargs):
            counter["calls"] += 1
            n_edges = edge_distance_vec.shape[0] if edge_distance_vec.dim() > 1 else 1
            zeros = torch.zeros(
                n_edges, dtype=edge_distance_vec.dtype, device=edge_distance_vec.device
            )
            return real(edge_distance_vec, lmax, gamma=zeros, **kwargs)

        escn_md.axis_angle_wigner_hybrid = with_zero_gamma
        try:
            return original(edge_distance_vecs)
        finally:
            escn_md.axis_angle_wigner_hybrid = real

    backbone._get_rotmat_and_wigner = types.MethodType(zero_gamma_rotmat_and_wigner, backbone)
    return counter


def load_predictor(path: str, dtype: torch.dtype, zero_gamma: bool = True):
    from fairchem.core.units.mlip_unit import load_predict_unit
    from fairchem.core.units.mlip_unit.api.inference import InferenceSettings

    settings = InferenceSettings(
        tf32=False,
        activation_checkpointing=False,
        merge_mole=False,
        compile=False,
        execution_mode="general",
        internal_graph_gen_version=2,
        base_precision_dtype=dtype,
    )
    predict_unit = load_predict_unit(path, inference_settings=settings, device="cpu")
    counter = patch_gamma_zero(predict_unit) if zero_gamma else None
    return predict_unit, counter


def _floats(tensor: torch.Tensor):
    return tensor.detach().cpu().to(torch.float64).tolist()


def evaluate(predict_unit, counter, systems: dict, names, dtype: torch.dtype) -> dict:
    from fairchem.core.datasets.atomic_data import AtomicData, atomicdata_list_to_batch

    data_list = []
    for name in names:
        atoms, task = systems[name]
        data_list.append(
            AtomicData.from_ase(
                atoms,
                task_name=task,
                r_data_keys=["spin", "charge"],
                target_dtype=dtype,
            )
        )
    batch = atomicdata_list_to_batch(data_list)
    atoms_of = {name: systems[name][0] for name in names}
    records = []
    for index, name in enumerate(names):
        data = data_list[index]
        records.append(
            {
                "name": name,
                "numbers": [int(z) for z in data.atomic_numbers.tolist()],
                # the caller's positions (unwrapped where ASE has them outside
                # the cell): the engine's own wrapping is part of the comparison
                "positions": _floats(torch.as_tensor(atoms_of[name].get_positions()).to(dtype)),
                "cell": _floats(data.cell.reshape(3, 3)),
                "pbc": [bool(p) for p in data.pbc.reshape(3).tolist()],
                "charge": int(data.charge.reshape(-1)[0]),
                "spin": int(data.spin.reshape(-1)[0]),
                "task": systems[name][1],
            }
        )
    before = counter["calls"] if counter is not None else 0
    prediction = predict_unit.predict(batch)
    if counter is not None and counter["calls"] == before:
        raise RuntimeError("the gamma = 0 patch was not used")
    energy = prediction["energy"].detach()
    forces = prediction["forces"].detach()
    stress = prediction["stress"].detach().reshape(len(names), 9)
    natoms = [len(r["numbers"]) for r in records]
    bounds = np.cumsum([0] + natoms)
    return {
        "systems": records,
        "energy": _floats(energy.reshape(-1)),
        "forces": [_floats(forces[bounds[i] : bounds[i + 1]]) for i in range(len(names))],
        "stress": [_floats(stress[i]) for i in range(len(names))],
        "output_dtypes": {
            "energy": str(energy.dtype).replace("torch.", ""),
            "forces": str(forces.dtype).replace("torch.", ""),
            "stress": str(stress.dtype).replace("torch.", ""),
        },
    }


def model_datasets(checkpoint) -> set:
    return {d for t in checkpoint.tasks_config for d in t["datasets"]}


# --------------------------------------------------------------------------
# sanity checks on the produced numbers


def sanity_check(cases: list) -> list:
    problems = []
    for case in cases:
        label = f"{case['model']}/{case['dtype']}/{'+'.join(s['name'] for s in case['systems'])}"
        for index, system in enumerate(case["systems"]):
            energy = case["energy"][index]
            forces = np.array(case["forces"][index])
            stress = np.array(case["stress"][index]).reshape(3, 3)
            finite = np.isfinite(forces).all() and np.isfinite(stress).all()
            if not (math.isfinite(energy) and finite):
                problems.append(f"{label}: non-finite output for {system['name']}")
                continue
            scale = max(1.0, float(np.abs(forces).max()))
            tol = (2e-5 if case["dtype"] == "float32" else 1e-10) * scale * len(forces)
            net = np.abs(forces.sum(axis=0)).max()
            if net > tol:
                problems.append(f"{label}: {system['name']} net force {net:.3g} > {tol:.3g}")
            asym = np.abs(stress - stress.T).max()
            if asym > 1e-12 * max(1.0, float(np.abs(stress).max())):
                problems.append(f"{label}: {system['name']} stress asymmetry {asym:.3g}")
            if np.abs(forces).max() < 1e-3:  # an atol-only comparison would pass anything
                problems.append(f"{label}: {system['name']} forces look trivial")
    return problems


def write_fixtures(path: str, output: dict) -> None:
    """JSON with one case per line (floats as Python repr, i.e. round-trip exact)."""
    lines = ["{"]
    for key, value in output.items():
        if key != "cases":
            lines.append(f" {json.dumps(key)}: {json.dumps(value, allow_nan=False)},")
    lines.append(' "cases": [')
    cases = [
        "  " + json.dumps(case, allow_nan=False, separators=(",", ":")) for case in output["cases"]
    ]
    lines.append(",\n".join(cases))
    lines.append(" ]")
    lines.append("}")
    tmp_path = path + ".tmp"
    with open(tmp_path, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    os.replace(tmp_path, path)
    with open(path) as handle:  # must parse back
        json.load(handle)


# --------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", help="directory to write the model files and fixtures.json")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument(
        "--keep-checkpoints",
        action="store_true",
        help="also keep the fairchem .pt checkpoints in OUTDIR/checkpoints",
    )
    args = parser.parse_args(argv)

    start = time.time()
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    # one thread: multi-threaded CPU backward sums make float32 forces vary in
    # the last bits from run to run
    torch.set_num_threads(1)

    import ase

    os.makedirs(args.outdir, exist_ok=True)
    if args.keep_checkpoints:
        ckpt_dir = os.path.join(args.outdir, "checkpoints")
        os.makedirs(ckpt_dir, exist_ok=True)
        tmp = None
    else:
        tmp = tempfile.TemporaryDirectory(prefix="uma-fixtures-")
        ckpt_dir = tmp.name

    systems = make_systems(args.seed)
    check_neighbor_margins(systems, 6.0, sorted({s["max_neighbors"] for s in MODEL_SPECS.values()}))

    cases = []
    dtypes = (("float32", torch.float32), ("float64", torch.float64))
    for model_index, (name, spec) in enumerate(MODEL_SPECS.items()):
        ckpt_path = os.path.join(ckpt_dir, f"{name}.pt")
        checkpoint = build_checkpoint(name, spec, args.seed + 101 * model_index, ckpt_path)
        model_file = os.path.join(args.outdir, f"{name}.safetensors")
        convert_checkpoint.convert(ckpt_path, model_file, weights="ema", dtype="float32")
        verify_model_file(model_file, checkpoint, "ema")
        if name == RAW_FILE_MODEL:
            raw_file = os.path.join(args.outdir, f"{name}_raw.safetensors")
            convert_checkpoint.convert(ckpt_path, raw_file, weights="raw", dtype="float32")
            verify_model_file(raw_file, checkpoint, "raw")

        datasets = model_datasets(checkpoint)
        usable = [n for n, (_atoms, task) in systems.items() if task in datasets]
        skipped = sorted(set(systems) - set(usable))
        if skipped:
            progress(f"{name}: skipping {skipped} (task not in the model)")
        for dtype_name, dtype in dtypes:
            predictor, counter = load_predictor(ckpt_path, dtype)
            first = None
            for system_name in usable:
                t0 = time.time()
                result = evaluate(predictor, counter, systems, [system_name], dtype)
                case = {"model": f"{name}.safetensors", "dtype": dtype_name, **result}
                if name == "s1p1" and dtype_name == "float32" and system_name == "cu_bulk":
                    backbone = predictor.model.module.backbone
                    coefficients = backbone.global_mole_tensors.expert_mixing_coefficients
                    case["expert_mixing_coefficients"] = _floats(coefficients)
                cases.append(case)
                first = first or case
                natoms = len(result["systems"][0]["numbers"])
                progress(
                    f"{name} {dtype_name} {system_name:9s} natoms={natoms:3d} "
                    f"E={result['energy'][0]:.6f} ({time.time() - t0:.2f} s)"
                )
            if first is not None:  # gamma = 0 makes a repeated call bit-identical
                again = evaluate(predictor, counter, systems, [usable[0]], dtype)
                if again["energy"] != first["energy"] or again["forces"] != first["forces"]:
                    raise RuntimeError(f"{name} {dtype_name}: repeated evaluation differs")
            batch_names = [n for n in BATCH if n in usable]
            if len(batch_names) >= 2:
                t0 = time.time()
                result = evaluate(predictor, counter, systems, batch_names, dtype)
                cases.append({"model": f"{name}.safetensors", "dtype": dtype_name, **result})
                progress(
                    f"{name} {dtype_name} batch {'+'.join(batch_names)} "
                    f"E={[round(e, 6) for e in result['energy']]} ({time.time() - t0:.2f} s)"
                )
            del predictor

        if name == RAW_FILE_MODEL:
            # fairchem as shipped: a random Wigner roll angle per edge.  The
            # results must not depend on it beyond rounding (the engine uses 0).
            predictor, _ = load_predictor(ckpt_path, torch.float64, zero_gamma=False)
            for system_name in ("cu_bulk", "triclinic", "molecule"):
                result = evaluate(predictor, None, systems, [system_name], torch.float64)
                again = evaluate(predictor, None, systems, [system_name], torch.float64)
                if again["forces"] == result["forces"]:
                    raise RuntimeError("two evaluations with a random roll angle are bit-identical")
                cases.append({"model": f"{name}.safetensors", "dtype": "float64", "gamma": "random", **result})
                progress(f"{name} float64 random roll {system_name:9s} E={result['energy'][0]:.6f}")
            del predictor

            raw_ckpt = os.path.join(ckpt_dir, f"{name}_raw_as_ema.pt")
            checkpoint_with_raw_as_ema(checkpoint, raw_ckpt)
            predictor, counter = load_predictor(raw_ckpt, torch.float32)
            for system_name in ("cu_bulk", "molecule"):
                result = evaluate(predictor, counter, systems, [system_name], torch.float32)
                cases.append({"model": f"{name}_raw.safetensors", "dtype": "float32", **result})
                progress(f"{name}_raw float32 {system_name:9s} E={result['energy'][0]:.6f}")
            del predictor

    problems = sanity_check(cases)
    from importlib.metadata import version

    output = {
        "fairchem_core_version": version("fairchem-core"),
        "torch_version": torch.__version__,
        "ase_version": ase.__version__,
        "seed": args.seed,
        "conventions": {
            "units": "positions/cell in A, energy in eV, forces in eV/A, stress in eV/A^3",
            "cell": "rows are lattice vectors",
            "positions": "the input positions (not wrapped; fairchem wraps them with ase "
            "wrap_positions, eps=0), cast to the case dtype",
            "energy": "MLIPPredictUnit output: head energy * rmsd + mean + sum of element "
            "references (float64)",
            "stress": "full 3x3 row-major from fairchem's [1,9] output (virial / |det cell|, "
            "sign +1/V dE/d(strain), symmetric); ASE Voigt would be xx,yy,zz,yz,xz,xy",
            "gamma": "Wigner roll angle gamma patched to 0, except in cases marked "
            "'gamma': 'random' (fairchem as shipped, a random angle per edge)",
            "settings": "InferenceSettings(tf32=False, activation_checkpointing=False, "
            "merge_mole=False, compile=False, execution_mode='general', "
            "internal_graph_gen_version=2, base_precision_dtype=<dtype>), EMA weights",
        },
        "cases": cases,
    }
    path = os.path.join(args.outdir, "fixtures.json")
    write_fixtures(path, output)
    if tmp is not None:
        tmp.cleanup()
    progress(f"wrote {len(cases)} cases to {path} in {time.time() - start:.1f} s")
    for problem in problems:
        progress(f"CHECK FAILED: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
