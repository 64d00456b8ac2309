#!/usr/bin/env python3
"""Write a lammps-uma model file as a fairchem UMA inference checkpoint (.pt).

Usage:
    export_checkpoint.py MODEL.safetensors OUTPUT.pt [--dtype float32|float64]

The reverse of convert_checkpoint.py: MODEL is a model file in the
"lammps-uma-model" format (doc/model_format.md), for instance one written by
`uma train` or `fix uma/train`; OUTPUT is what fairchem loads with
load_predict_unit(OUTPUT) or FAIRChemCalculator: a torch.save of
fairchem.core.units.mlip_unit.api.inference.MLIPInferenceCheckpoint with

  model_config      HydraModel config rebuilt from the file's JSON config:
                    backbone = the constructor arguments the original config
                    named (backbone minus backbone_defaults_filled) plus
                    model: backbone_class; one head (its name, wrapper class,
                    MLP_EFS_Head, dataset names or mapping); model_id and
                    supports_single_atoms.
  model_state_dict  every tensor of the file under its fairchem name, floats
                    cast to --dtype (default float32); fairchem's constant
                    buffers (backbone.Jd_*) come from fairchem itself.
  ema_state_dict    the same tensors as "module.<name>" plus n_averaged = 1
                    (fairchem's loader always takes these weights).
  tasks_config      one fairchem Task per task of the file: name, level,
                    property, datasets, Normalizer(mean, rmsd), and for energy
                    tasks the ElementReferences of tasks.<task>.element_references.

Before writing, the checkpoint is read back the way convert_checkpoint.py
reads one; the configuration that gives must equal the file's (provenance
aside), and the element references bit for bit.  So a model that is not
UMA-S-shaped (what convert_checkpoint.py refuses), or a configuration that
fairchem would build differently, is refused instead of exported.  fairchem
must be importable.  The functions here may also be imported; main(argv) is
the command line.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convert_checkpoint as cc  # noqa: E402  (tools/convert_checkpoint.py)
from convert_checkpoint import ConversionError  # noqa: E402

HYDRA_MODEL = "fairchem.core.models.base.HydraModel"
TASK = "fairchem.core.units.mlip_unit.mlip_unit.Task"
NORMALIZER = "fairchem.core.modules.normalization.normalizer.Normalizer"
ELEMENT_REFERENCES = "fairchem.core.modules.normalization.element_references.ElementReferences"
OUTPUT_DIMS = {"energy": [1], "forces": [3], "stress": [1, 9]}

CONFIG_FIELDS = ("model_id", "composition_mean_include_self", "backbone_class", "backbone",
                 "backbone_defaults_filled", "head", "tasks")
BACKBONE_FIELDS = ("sphere_channels", "hidden_channels", "lmax", "mmax", "num_layers",
                   "edge_channels", "num_distance_basis", "cutoff", "max_neighbors",
                   "max_num_elements")
HEAD_FIELDS = ("name", "kind", "class", "head_class", "datasets")
TASK_FIELDS = ("name", "property", "level", "datasets", "normalizer", "element_references")


def log(message: str) -> None:
    print(f"[export_checkpoint] {message}", file=sys.stderr, flush=True)


def require(mapping, fields, where: str) -> None:
    if not isinstance(mapping, dict):
        raise ConversionError(f"{where} is not a JSON object")
    missing = [f for f in fields if f not in mapping]
    if missing:
        raise ConversionError(f"{where} lacks {', '.join(repr(f) for f in missing)}")


def read_model_file(path: str) -> tuple[dict, dict]:
    """(config, tensors) of a lammps-uma model file."""
    from safetensors import safe_open

    if not os.path.exists(path):
        raise ConversionError(f"input file not found: {path}")
    if not os.path.isfile(path):
        raise ConversionError(f"input is not a regular file: {path}")
    try:
        with safe_open(path, framework="pt") as handle:
            metadata = handle.metadata() or {}
            tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    except Exception as error:  # noqa: BLE001 - anything here means "not readable"
        raise ConversionError(
            f"{path} is not a lammps-uma model file (not a safetensors file: {error})"
        ) from error
    if metadata.get("format") != cc.FORMAT_NAME:
        raise ConversionError(
            f"{path} is not a lammps-uma model file (its metadata has no "
            f"format={cc.FORMAT_NAME})"
        )
    if metadata.get("format_version") != str(cc.FORMAT_VERSION):
        raise ConversionError(
            f"{path}: model file format version {metadata.get('format_version')!r}, "
            f"this tool reads {cc.FORMAT_VERSION}"
        )
    try:
        config = json.loads(metadata["config"])
    except (KeyError, ValueError) as error:
        raise ConversionError(f"{path}: the metadata has no readable JSON config ({error})") from error
    require(config, CONFIG_FIELDS, "the model's config")
    require(config["backbone"], BACKBONE_FIELDS, "the config's backbone")
    require(config["head"], HEAD_FIELDS, "the config's head")
    if not isinstance(config["tasks"], list) or not config["tasks"]:
        raise ConversionError("the config's tasks is not a non-empty list")
    for index, task in enumerate(config["tasks"]):
        require(task, TASK_FIELDS, f"task {index} of the config")
        require(task["normalizer"], ("mean", "rmsd"), f"the normalizer of task {task['name']!r}")
    return config, tensors


# --------------------------------------------------------------------------
# the checkpoint's configuration


def model_config_from(config: dict) -> dict:
    """fairchem's model_config (HydraModel kwargs) for the model file's config."""
    filled = set(config["backbone_defaults_filled"])
    backbone = {k: v for k, v in config["backbone"].items() if k not in filled}
    backbone["model"] = config["backbone_class"]
    if config["backbone_class"].endswith(".eSCNMDBackbone"):
        backbone.pop("num_experts", None)  # added by the converter; not an argument of this class
    head = config["head"]
    if head["kind"] == "single":
        datasets = {"dataset_names": list(head["datasets"])}
    elif head["kind"] == "dataset_moe":
        require(head, ("dataset_mapping",), "the config's dataset_moe head")
        datasets = {"dataset_mapping": dict(head["dataset_mapping"])}
    else:
        raise ConversionError(f"unknown head kind {head['kind']!r} (single or dataset_moe)")
    model_config = {
        "_target_": HYDRA_MODEL,
        "backbone": backbone,
        "heads": {
            head["name"]: {
                "module": head["class"],
                "head_cls": head["head_class"],
                "head_kwargs": {"wrap_property": False, "reduce": head.get("reduce", "sum")},
                **datasets,
            }
        },
        "pass_through_head_outputs": True,
        "otf_graph": True,
    }
    if config["model_id"] is not None:
        model_config["model_id"] = config["model_id"]
    if config.get("supports_single_atoms"):
        model_config["supports_single_atoms"] = True
    return model_config


def tasks_config_from(config: dict, tensors: dict) -> list:
    """fairchem's tasks_config (Task kwargs for hydra) for the model file's tasks."""
    tasks = []
    for task in config["tasks"]:
        if task["property"] not in OUTPUT_DIMS:
            raise ConversionError(f"task {task['name']!r}: unknown property {task['property']!r}")
        entry = {
            "_target_": TASK,
            "name": task["name"],
            "level": task["level"],
            "property": task["property"],
            "out_spec": {"dim": OUTPUT_DIMS[task["property"]], "dtype": "float32"},
            "normalizer": {
                "_target_": NORMALIZER,
                "mean": float(task["normalizer"]["mean"]),
                "rmsd": float(task["normalizer"]["rmsd"]),
            },
            "datasets": list(task["datasets"]),
            "inference_only": bool(task.get("inference_only", False)),
        }
        refs_name = task["element_references"]
        if refs_name is not None:
            if refs_name not in tensors:
                raise ConversionError(f"task {task['name']!r}: the file lacks tensor {refs_name!r}")
            values = tensors[refs_name].double().reshape(-1).tolist()  # exact: Python floats
            entry["element_references"] = {
                "_target_": ELEMENT_REFERENCES,
                "element_references": {"_target_": "torch.DoubleTensor", "_args_": [values]},
            }
        tasks.append(entry)
    return tasks


def first_difference(mine, theirs, where: str) -> str:
    """Where two JSON values first differ, and the two values there."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        for key in sorted(set(mine) | set(theirs)):
            if mine.get(key) != theirs.get(key):
                return first_difference(mine.get(key), theirs.get(key), f"{where}.{key}")
    if isinstance(mine, list) and isinstance(theirs, list) and len(mine) == len(theirs):
        for index, (a, b) in enumerate(zip(mine, theirs)):
            if a != b:
                return first_difference(a, b, f"{where}[{index}]")
    return f"{where} (file {mine!r}, fairchem {theirs!r})"


def check_reads_back(model_config: dict, tasks_config: list, config: dict, tensors: dict) -> None:
    """convert_checkpoint's reading of the checkpoint gives the file's config.

    This is where models that are not UMA-S-shaped are refused (convert's
    ConversionError), and configurations that fairchem would build otherwise.
    """
    import torch

    checkpoint = types.SimpleNamespace(model_config=copy.deepcopy(model_config),
                                       tasks_config=copy.deepcopy(tasks_config))
    again, refs = cc.build_config(checkpoint, "exported.pt", "ema", sha256="")
    config = {"supports_single_atoms": False, **config}  # optional in the file
    differ = [first_difference(config.get(k), again[k], k)
              for k in sorted(again) if k != "provenance" and config.get(k) != again[k]]
    if differ:
        raise ConversionError("fairchem would build a different model from this configuration: "
                              + "; ".join(differ))
    for name, values in refs.items():
        if not torch.equal(values, tensors[name].double().reshape(-1)):
            raise ConversionError(f"element references {name} do not survive the export")


# --------------------------------------------------------------------------
# weights and writing


def state_dict_from(tensors: dict, model_config: dict, model_id, dtype_name: str) -> dict:
    """The model's state dict: the file's tensors plus fairchem's constant buffers."""
    import torch

    dtype = {"float32": torch.float32, "float64": torch.float64}[dtype_name]
    try:
        twin = cc.build_small_twin(model_config, model_id)
    except Exception as error:  # noqa: BLE001
        raise ConversionError(f"fairchem cannot build this model: {error}") from error
    parameters = {name for name, _ in twin.named_parameters()}
    weights = {k: v for k, v in tensors.items() if not k.startswith("tasks.")}
    missing = sorted(parameters - set(weights))
    if missing:
        raise ConversionError(
            f"the model file lacks {len(missing)} tensor(s) the model needs, e.g. {missing[:5]}")
    twin_state = twin.state_dict()
    unexpected = sorted(set(weights) - set(twin_state))
    if unexpected:
        raise ConversionError(f"the model file has tensors the model does not know: {unexpected[:5]}")
    narrowed = [k for k in parameters if weights[k].dtype == torch.float64] if dtype_name == "float32" else []
    if narrowed:
        log(f"note: {len(narrowed)} float64 tensors rounded to float32 (--dtype float64 keeps them)")
    state = {}
    for name, buffer in twin_state.items():
        value = weights[name] if name in parameters else buffer  # buffers: fairchem's own
        if value.is_floating_point():
            value = value.to(dtype)
        state[name] = value.detach().contiguous().clone()
    return state


def export(input_path: str, output_path: str, dtype: str = "float32") -> dict:
    """Export one model file; returns the fairchem model_config that was written."""
    start = time.time()
    if dtype not in ("float32", "float64"):
        raise ConversionError(f"unknown --dtype {dtype!r} (float32 or float64)")
    cc.check_output_path(input_path, output_path, "the model file it exports")
    log(f"reading {input_path}")
    config, tensors = read_model_file(input_path)
    import torch
    from fairchem.core.units.mlip_unit.api.inference import MLIPInferenceCheckpoint

    model_config = model_config_from(config)
    tasks_config = tasks_config_from(config, tensors)
    check_reads_back(model_config, tasks_config, config, tensors)
    state = state_dict_from(tensors, model_config, config["model_id"], dtype)
    ema = {"module." + name: value for name, value in state.items()}  # shared storage
    ema["n_averaged"] = torch.tensor(1, dtype=torch.long)
    checkpoint = MLIPInferenceCheckpoint(
        model_config=model_config,
        model_state_dict=state,
        ema_state_dict=ema,
        tasks_config=tasks_config,
    )
    provenance = config.get("provenance") or {}
    log(f"model_id={config['model_id']!r} head={config['head']['kind']} tasks={len(tasks_config)} "
        f"tensors={len(state)} ({dtype}); model file from {provenance.get('source_file', '?')} "
        f"({provenance.get('weights', '?')} weights)")
    tmp_path = output_path + ".tmp"
    torch.save(checkpoint, tmp_path)
    os.replace(tmp_path, output_path)
    log(f"wrote {output_path} in {time.time() - start:.1f} s")
    return model_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Write a lammps-uma model file (.safetensors) as a fairchem UMA "
        "inference checkpoint (.pt)."
    )
    parser.add_argument("input", help="model file (.safetensors)")
    parser.add_argument("output", help="fairchem inference checkpoint to write (.pt)")
    parser.add_argument(
        "--dtype",
        choices=("float32", "float64"),
        default="float32",
        help="floating-point type of the written weights (default float32, as fairchem's)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)  # fairchem's warnings on the root logger
    try:
        export(args.input, args.output, dtype=args.dtype)
    except ConversionError as error:
        print(f"export_checkpoint: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
