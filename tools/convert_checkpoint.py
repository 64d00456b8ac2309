#!/usr/bin/env python3
"""Convert a fairchem UMA inference checkpoint (.pt) into a lammps-uma model file.

Usage:
    convert_checkpoint.py INPUT.pt OUTPUT.safetensors [--weights ema|raw]
                          [--dtype float32|float64]

INPUT.pt is what fairchem's inference checkpoints are: a torch.save of the
dataclass fairchem.core.units.mlip_unit.api.inference.MLIPInferenceCheckpoint
(model_config, model_state_dict, ema_state_dict, tasks_config).  Reading it
unpickles arbitrary Python objects, so only convert files you trust.  fairchem
must be importable (the pickle refers to its classes).

The output is a safetensors file in the "lammps-uma-model" format, version 1:

  tensors
    * every entry of the chosen state dict under its fairchem name, e.g.
      backbone.blocks.0.edge_wise.so2_conv_1.fc_m0.weights; floating tensors
      are cast to --dtype and made contiguous, integer/bool tensors are kept.
      --weights ema (default) takes ema_state_dict without its n_averaged
      counter and with the leading "module." removed, --weights raw takes
      model_state_dict.
    * tasks.<task>.element_references: float64 [max Z + 1], indexed by Z, for
      every task that has element references.

  __metadata__ (all values are strings)
    format          "lammps-uma-model"
    format_version  "1"
    config          JSON: model_id, composition_mean_include_self,
                    supports_single_atoms, backbone_class, backbone,
                    backbone_defaults_filled, head, tasks, provenance
                    (see build_config below for each field).

The functions here may also be imported (tests/reference/make_fixtures.py does).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import importlib
import inspect
import json
import logging
import math
import os
import sys
import time
from typing import Any

FORMAT_NAME = "lammps-uma-model"
FORMAT_VERSION = 1
CONVERTER_NAME = "lammps-uma tools/convert_checkpoint.py"

# Backbone settings this project implements, keyed by constructor argument.
REQUIRED_BACKBONE_VALUES = {
    "lmax": 2,
    "mmax": 2,
    "act_type": "gate",
    "ff_type": "spectral",
    "norm_type": "rms_norm_sh",
    "chg_spin_emb_type": "rand_emb",
    "distance_function": "gaussian",
}
# Extra requirements that only matter when the backbone has experts.
REQUIRED_MOE_VALUES = {
    "moe_type": "so2",
    "moe_expert_coefficient_norm": "softmax",
    "layers_moe": None,
    "moe_single": False,
}

_SUPPORTED_BACKBONES = ("eSCNMDMoeBackbone", "eSCNMDBackbone")
_SUPPORTED_WRAPPERS = {
    "DatasetSpecificSingleHeadWrapper": "single",
    "DatasetSpecificMoEWrapper": "dataset_moe",
}


class ConversionError(Exception):
    """A problem with the input that the user has to fix."""


def log(message: str) -> None:
    print(f"[convert_checkpoint] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# small helpers


def sha256_of_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fairchem_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fairchem-core")
    except PackageNotFoundError:
        return "unknown"


def _dotted_name(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


def to_plain(value: Any) -> Any:
    """Turn OmegaConf containers, tuples, numpy/torch scalars into JSON values."""
    import torch

    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(value, (DictConfig, ListConfig)):
            value = OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf ships with fairchem
        pass
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return value
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [to_plain(v) for v in value]
    if isinstance(value, torch.dtype):
        return str(value).replace("torch.", "")
    if isinstance(value, torch.Tensor):
        return to_plain(value.tolist())
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        try:
            return to_plain(value.item())
        except (TypeError, ValueError):
            pass
    if inspect.isclass(value) or inspect.isfunction(value):
        return _dotted_name(value)
    return str(value)


def strip_module_prefix(key: str) -> str:
    while key.startswith("module."):
        key = key[len("module.") :]
    return key


# --------------------------------------------------------------------------
# reading the checkpoint


def load_checkpoint(path: str):
    """torch.load the inference checkpoint and check that it is one."""
    if not os.path.exists(path):
        raise ConversionError(f"input file not found: {path}")
    if not os.path.isfile(path):
        raise ConversionError(f"input is not a regular file: {path}")
    import torch

    try:
        # the pickle refers to MLIPInferenceCheckpoint in this module
        importlib.import_module("fairchem.core.units.mlip_unit.api.inference")
    except ImportError as error:
        raise ConversionError(
            f"fairchem-core is needed to read fairchem checkpoints ({error})"
        ) from error
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as error:  # noqa: BLE001 - anything here means "not readable"
        raise ConversionError(
            f"{path} is not a fairchem checkpoint (torch.load failed: "
            f"{type(error).__name__}: {error})"
        ) from error
    fields = ("model_config", "model_state_dict", "ema_state_dict", "tasks_config")
    if isinstance(checkpoint, dict) and "unit_state" in checkpoint:
        raise ConversionError(
            f"{path} looks like a fairchem training checkpoint, not an inference "
            "checkpoint; convert it first with fairchem's "
            "convert_train_checkpoint_to_inference_checkpoint"
        )
    missing = [f for f in fields if not hasattr(checkpoint, f)]
    if missing:
        raise ConversionError(
            f"{path} is not a fairchem inference checkpoint (MLIPInferenceCheckpoint): "
            f"the loaded {type(checkpoint).__name__} has no {', '.join(missing)}"
        )
    if not isinstance(checkpoint.model_config, dict) and not hasattr(
        checkpoint.model_config, "keys"
    ):
        raise ConversionError(f"{path}: model_config is not a mapping")
    return checkpoint


def select_state_dict(checkpoint, weights: str) -> dict:
    """The chosen state dict with fairchem names (no "module.", no n_averaged)."""
    import torch

    if weights == "ema":
        source = checkpoint.ema_state_dict
        label = "ema_state_dict"
    elif weights == "raw":
        source = checkpoint.model_state_dict
        label = "model_state_dict"
    else:
        raise ConversionError(f"unknown --weights {weights!r} (ema or raw)")
    if not source:
        hint = " (try --weights raw)" if weights == "ema" else ""
        raise ConversionError(f"the checkpoint's {label} is empty{hint}")
    result = {}
    for key, value in source.items():
        if key == "n_averaged":
            continue
        if not isinstance(value, torch.Tensor):
            log(f"skipping non-tensor entry {key!r} in {label}")
            continue
        name = strip_module_prefix(key)
        if name in result:
            raise ConversionError(f"{label} has {name!r} twice (after removing module.)")
        result[name] = value
    return result


# --------------------------------------------------------------------------
# configuration


def resolve_backbone_class(name: str):
    from fairchem.core.common.registry import registry

    # importing the UMA modules registers their short names
    # (escnmd_backbone, escnmd_moe_backbone) with fairchem's registry
    importlib.import_module("fairchem.core.models.uma.escn_moe")

    try:
        return registry.get_model_class(name)
    except Exception as error:  # noqa: BLE001
        raise ConversionError(
            f"unsupported backbone {name!r} (cannot import it: {error}); only "
            + " / ".join(_SUPPORTED_BACKBONES)
            + " are supported"
        ) from error


def constructor_defaults(cls) -> dict:
    """Default values of every named constructor argument along the MRO."""
    defaults: dict = {}
    for klass in reversed(cls.__mro__):
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        try:
            signature = inspect.signature(init)
        except (TypeError, ValueError):
            continue
        for param in signature.parameters.values():
            if param.name == "self" or param.kind in (
                param.VAR_POSITIONAL,
                param.VAR_KEYWORD,
            ):
                continue
            if param.default is not inspect.Parameter.empty:
                defaults[param.name] = param.default
    return defaults


def derive_model_id(model_config: dict, source_path: str | None = None) -> str | None:
    """model_id as fairchem sees it after its compat shim (compat.py).

    UMA 1.1 checkpoints have no model_id but backbone.model_version 1.1: fairchem
    back-fills "UMA-1.1".  A UMA MoE backbone with neither is refused by fairchem
    (UMA 1.0), so we refuse it too.  Anything else keeps its model_id (or None).
    """
    from fairchem.core.models.uma import compat

    class _Holder:  # apply_uma_compat_fixups only reads .model_config
        pass

    holder = _Holder()
    holder.model_config = copy.deepcopy(model_config)
    try:
        compat.apply_uma_compat_fixups(holder, checkpoint_location=source_path)
    except RuntimeError as error:
        raise ConversionError(f"fairchem refuses this checkpoint: {error}") from error
    model_id = holder.model_config.get("model_id")
    if model_id is None:
        return None
    return str(model_id)


def resolve_mapping(names, mapping, what: str) -> dict:
    from fairchem.core.models.uma.escn_md import resolve_dataset_mapping

    try:
        return dict(to_plain(resolve_dataset_mapping(names, mapping, what)))
    except ValueError as error:
        raise ConversionError(f"bad dataset mapping in {what}: {error}") from error


def build_backbone_section(model_config: dict) -> tuple[str, dict, list, type]:
    backbone_cfg = to_plain(model_config.get("backbone"))
    if not isinstance(backbone_cfg, dict):
        raise ConversionError("model_config has no 'backbone' section")
    class_name = backbone_cfg.pop("model", None)
    if not isinstance(class_name, str):
        raise ConversionError("model_config['backbone'] has no 'model' class path")
    cls = resolve_backbone_class(class_name)
    from fairchem.core.models.uma.escn_md import eSCNMDBackbone
    from fairchem.core.models.uma.escn_moe import eSCNMDMoeBackbone

    if cls not in (eSCNMDMoeBackbone, eSCNMDBackbone):
        raise ConversionError(
            f"unsupported backbone {class_name!r} ({_dotted_name(cls)}); only "
            + " / ".join(_SUPPORTED_BACKBONES)
            + " are supported"
        )
    class_path = _dotted_name(cls)

    defaults = constructor_defaults(cls)
    unknown = sorted(k for k in backbone_cfg if k not in defaults)
    if unknown:
        log(f"note: backbone config keys that {cls.__name__} does not name: {unknown}")
    filled = sorted(k for k in defaults if k not in backbone_cfg)
    effective = {k: to_plain(v) for k, v in defaults.items()}
    effective.update(backbone_cfg)

    problems = []
    for key, wanted in REQUIRED_BACKBONE_VALUES.items():
        if effective.get(key) != wanted:
            problems.append(f"{key}={effective.get(key)!r} (need {wanted!r})")
    num_experts = effective.get("num_experts", 0) if cls is eSCNMDMoeBackbone else 0
    if cls is eSCNMDMoeBackbone and num_experts:
        for key, wanted in REQUIRED_MOE_VALUES.items():
            if effective.get(key) != wanted:
                problems.append(f"{key}={effective.get(key)!r} (need {wanted!r})")
    if problems:
        raise ConversionError(
            f"unsupported backbone configuration for {cls.__name__}: " + "; ".join(problems)
        )

    if cls is eSCNMDBackbone:
        effective.setdefault("num_experts", 0)  # a plain (or merged) backbone
    if effective.get("use_dataset_embedding", True):
        effective["dataset_mapping"] = resolve_mapping(
            effective.get("dataset_list"), effective.get("dataset_mapping"), "dataset_list"
        )
    elif effective.get("dataset_mapping") is None and effective.get("dataset_list"):
        effective["dataset_mapping"] = {d: d for d in effective["dataset_list"]}
    return class_path, effective, filled, cls


def build_head_section(model_config: dict) -> dict:
    heads = to_plain(model_config.get("heads"))
    if not isinstance(heads, dict) or not heads:
        raise ConversionError("model_config has no 'heads' section")
    if len(heads) != 1:
        raise ConversionError(
            f"only models with one output head are supported, found {sorted(heads)}"
        )
    head_name, head_cfg = next(iter(heads.items()))
    head_cfg = dict(head_cfg)
    module = head_cfg.get("module")
    if not isinstance(module, str):
        raise ConversionError(f"head {head_name!r} has no 'module'")
    from fairchem.core.common.registry import registry
    from fairchem.core.models.uma.escn_md import MLP_EFS_Head
    from fairchem.core.models.uma.escn_moe import (
        DatasetSpecificMoEWrapper,
        DatasetSpecificSingleHeadWrapper,
    )

    try:
        wrapper_cls = registry.get_model_class(module)
    except Exception as error:  # noqa: BLE001
        raise ConversionError(f"cannot resolve head class {module!r}: {error}") from error
    if wrapper_cls not in (DatasetSpecificSingleHeadWrapper, DatasetSpecificMoEWrapper):
        raise ConversionError(
            f"unsupported head {module!r}; only "
            + " / ".join(_SUPPORTED_WRAPPERS)
            + " wrapping MLP_EFS_Head are supported"
        )
    inner_name = head_cfg.get("head_cls")
    try:
        inner_cls = registry.get_model_class(inner_name)
    except Exception as error:  # noqa: BLE001
        raise ConversionError(f"cannot resolve head_cls {inner_name!r}: {error}") from error
    if inner_cls is not MLP_EFS_Head:
        raise ConversionError(f"unsupported head_cls {inner_name!r}; only MLP_EFS_Head")
    head_kwargs = dict(head_cfg.get("head_kwargs") or {})
    reduce = head_kwargs.get("reduce", "sum")
    if reduce != "sum":
        raise ConversionError(f"unsupported MLP_EFS_Head reduce={reduce!r}; only 'sum'")

    section = {
        "name": head_name,
        "kind": _SUPPORTED_WRAPPERS[wrapper_cls.__name__],
        "class": module,
        "head_class": inner_name,
        "reduce": reduce,
    }
    if wrapper_cls is DatasetSpecificSingleHeadWrapper:
        names = head_cfg.get("dataset_names")
        if not names:
            raise ConversionError(f"head {head_name!r} has no dataset_names")
        # fairchem keeps them sorted; every listed dataset uses the one MLP
        section["datasets"] = sorted(names)
    else:
        mapping = resolve_mapping(
            head_cfg.get("dataset_names"), head_cfg.get("dataset_mapping"), "dataset_names"
        )
        # Expert index = position of the mapped name among the sorted unique
        # mapped names (DatasetSpecificMoEWrapper._build_expert_mapping).
        experts = sorted(set(mapping.values()))
        section["datasets"] = experts
        section["dataset_mapping"] = mapping
        section["dataset_to_expert"] = {
            name: experts.index(mapping[name]) for name in sorted(mapping)
        }
    return section


def _instantiate_tasks(tasks_config) -> list:
    import hydra
    import torch

    previous = torch.get_default_dtype()
    # float64 default so that normalizer floats keep their config value
    torch.set_default_dtype(torch.float64)
    try:
        return [hydra.utils.instantiate(cfg) for cfg in tasks_config]
    except Exception as error:  # noqa: BLE001
        raise ConversionError(f"cannot instantiate tasks_config: {error}") from error
    finally:
        torch.set_default_dtype(previous)


def build_task_sections(tasks_config, direct_forces: bool) -> tuple[list, dict]:
    """Task list for the metadata plus the element-reference tensors to write."""
    import torch

    if not tasks_config:
        raise ConversionError("the checkpoint has no tasks_config")
    tasks = _instantiate_tasks(tasks_config)
    sections = []
    extra_tensors = {}
    seen = set()
    for task in tasks:
        if task.name in seen:
            raise ConversionError(f"task {task.name!r} appears twice")
        seen.add(task.name)
        if task.property not in ("energy", "forces", "stress"):
            # the engine reads energy, forces and stress tasks only (and refuses others)
            log(f"note: task {task.name!r} predicts {task.property!r}, which the engine "
                "does not compute: left out of the model file")
            continue
        normalizer = task.normalizer
        mean = float(normalizer.mean) if normalizer is not None else 0.0
        rmsd = float(normalizer.rmsd) if normalizer is not None else 1.0
        ref_name = None
        if task.element_references is not None:
            refs = getattr(task.element_references, "element_references", None)
            if not isinstance(refs, torch.Tensor):
                raise ConversionError(
                    f"task {task.name!r}: element references of unexpected type "
                    f"{type(task.element_references).__name__}"
                )
            ref_name = f"tasks.{task.name}.element_references"
            extra_tensors[ref_name] = (
                refs.detach().to(torch.float64).reshape(-1).contiguous().clone()
            )
        sections.append(
            {
                "name": task.name,
                "property": task.property,
                "level": task.level,
                "datasets": list(task.datasets),
                "normalizer": {"mean": mean, "rmsd": rmsd},
                "element_references": ref_name,
                "inference_only": bool(task.inference_only),
            }
        )

    # fairchem's predictor adds a stress task for every dataset that has an energy
    # task but no stress task (eSCNMDBackbone.get_default_untrained_tasks), sharing
    # the energy task's normalizer; forces models computed by autograd only.
    if not direct_forces:
        stress_sets = {d for t in sections if t["property"] == "stress" for d in t["datasets"]}
        energy_tasks = {}
        for t in sections:
            if t["property"] == "energy":
                for d in t["datasets"]:
                    energy_tasks[d] = t
        for dataset in sorted(set(energy_tasks) - stress_sets):
            energy = energy_tasks[dataset]
            name = "stress" if energy["name"] == "energy" else f"{dataset}_stress"
            if name in seen:
                continue
            seen.add(name)
            sections.append(
                {
                    "name": name,
                    "property": "stress",
                    "level": "system",
                    "datasets": [dataset],
                    "normalizer": dict(energy["normalizer"]),
                    "element_references": None,
                    "inference_only": True,
                }
            )
    return sections, extra_tensors


def build_config(checkpoint, source_path: str, weights: str, sha256: str | None = None):
    """The metadata config dict plus element-reference tensors.

    Fields:
      model_id                      fairchem's model_id after its compat shim
      composition_mean_include_self True exactly when model_id == "UMA-S-1.2"
                                    (eSCNMDMoeBackbone.set_MOLE_coefficients)
      supports_single_atoms         HydraModel flag (False: fairchem answers
                                    isolated single atoms from a lookup table)
      backbone_class                class path of the backbone
      backbone                      backbone constructor kwargs (config values
                                    over constructor defaults), dataset_mapping
                                    resolved to a dict
      backbone_defaults_filled      keys of 'backbone' taken from the defaults
      head                          name, kind (single|dataset_moe), class,
                                    head_class, reduce, datasets (dataset_moe:
                                    experts in index order; single: datasets
                                    served), dataset_mapping + dataset_to_expert
                                    (dataset_moe only)
      tasks                         list of {name, property, level, datasets,
                                    normalizer {mean, rmsd}, element_references
                                    (tensor name or null), inference_only}
      provenance                    converter, source_file, source_sha256,
                                    fairchem_core_version, weights
    """
    model_config = to_plain(checkpoint.model_config)
    if not isinstance(model_config, dict):
        raise ConversionError("model_config is not a mapping")
    model_id = derive_model_id(model_config, source_path)
    class_path, backbone, filled, _cls = build_backbone_section(model_config)
    head = build_head_section(model_config)
    tasks, extra = build_task_sections(
        checkpoint.tasks_config, bool(backbone.get("direct_forces", False))
    )
    config = {
        "model_id": model_id,
        "composition_mean_include_self": model_id == "UMA-S-1.2",
        "supports_single_atoms": bool(model_config.get("supports_single_atoms", False)),
        "backbone_class": class_path,
        "backbone": backbone,
        "backbone_defaults_filled": filled,
        "head": head,
        "tasks": tasks,
        "provenance": {
            "converter": CONVERTER_NAME,
            "source_file": os.path.basename(source_path),
            "source_sha256": sha256 if sha256 is not None else sha256_of_file(source_path),
            "fairchem_core_version": fairchem_version(),
            "weights": weights,
        },
    }
    return config, extra


# --------------------------------------------------------------------------
# checking names against the model and writing


def build_small_twin(model_config: dict, model_id: str | None):
    """The HydraModel of model_config with tiny layer widths (fast to build).

    State-dict names, and the constant buffers (backbone.Jd_*), do not depend
    on the widths.  Raises whatever fairchem raises when it cannot be built.
    """
    import hydra
    import torch

    config = copy.deepcopy(to_plain(model_config))
    backbone = config["backbone"]
    for key, small in (
        ("sphere_channels", 8),
        ("hidden_channels", 8),
        ("edge_channels", 8),
        ("num_distance_basis", 4),
    ):
        if key in backbone:
            backbone[key] = small
    if backbone.get("num_experts"):
        backbone["num_experts"] = 2
    if model_id is not None:
        config["model_id"] = model_id
    config.setdefault("_target_", "fairchem.core.models.base.HydraModel")
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with torch.device("cpu"):
            return hydra.utils.instantiate(config)
    finally:
        root.setLevel(level)


def expected_state_keys(model_config: dict, model_id: str | None) -> set | None:
    """Persistent state-dict names of the model, from a shrunken twin
    (build_small_twin); None when that fails (then no name check is done)."""
    try:
        return set(build_small_twin(model_config, model_id).state_dict().keys())
    except Exception as error:  # noqa: BLE001
        log(f"note: could not build the model to check tensor names ({error})")
        return None


def prepare_tensors(state: dict, dtype_name: str, expected: set | None) -> dict:
    import torch

    dtype = {"float32": torch.float32, "float64": torch.float64}[dtype_name]
    if expected is not None:
        missing = sorted(expected - set(state))
        if missing:
            raise ConversionError(
                f"state dict lacks {len(missing)} tensor(s) the model needs, e.g. {missing[:5]}"
            )
        dropped = sorted(set(state) - expected)
        if dropped:
            log(f"dropping {len(dropped)} entries the model does not persist: {dropped[:5]}")
            state = {k: v for k, v in state.items() if k in expected}
    tensors = {}
    seen_storage = set()
    for name in sorted(state):
        value = state[name].detach()
        if value.is_floating_point():
            value = value.to(dtype)
        value = value.contiguous()
        pointer = (value.untyped_storage().data_ptr(), value.storage_offset())
        if value.numel() and pointer in seen_storage:
            value = value.clone()
        seen_storage.add(pointer)
        tensors[name] = value
    return tensors


def check_output_path(input_path: str, output_path: str, what: str) -> None:
    """The output can be written and is not the input (what: the input, in words)."""
    out_dir = os.path.dirname(os.path.abspath(output_path))
    if not os.path.isdir(out_dir):
        raise ConversionError(f"output directory does not exist: {out_dir}")
    if os.path.isdir(output_path):
        raise ConversionError(f"the output is a directory, not a file name: {output_path}")
    if os.path.exists(output_path) and os.path.exists(input_path) and \
            os.path.samefile(input_path, output_path):
        raise ConversionError(f"the output would replace {what}: {output_path}")


def convert(
    input_path: str,
    output_path: str,
    weights: str = "ema",
    dtype: str = "float32",
    check_names: bool = True,
) -> dict:
    """Convert one checkpoint; returns the config that was written."""
    start = time.time()
    if dtype not in ("float32", "float64"):
        raise ConversionError(f"unknown --dtype {dtype!r} (float32 or float64)")
    check_output_path(input_path, output_path, "the checkpoint it converts")
    log(f"reading {input_path}")
    sha256 = sha256_of_file(input_path) if os.path.isfile(input_path) else None
    checkpoint = load_checkpoint(input_path)
    config, extra = build_config(checkpoint, input_path, weights, sha256=sha256)
    log(
        f"model_id={config['model_id']!r} backbone={config['backbone_class'].rsplit('.', 1)[-1]} "
        f"experts={config['backbone'].get('num_experts', 0)} head={config['head']['kind']} "
        f"tasks={len(config['tasks'])}"
    )
    state = select_state_dict(checkpoint, weights)
    log(f"{weights} weights: {len(state)} tensors")
    expected = None
    if check_names:
        expected = expected_state_keys(checkpoint.model_config, config["model_id"])
    tensors = prepare_tensors(state, dtype, expected)
    clash = sorted(set(tensors) & set(extra))
    if clash:
        raise ConversionError(f"tensor names clash with element references: {clash}")
    tensors.update(extra)
    metadata = {
        "format": FORMAT_NAME,
        "format_version": str(FORMAT_VERSION),
        "config": json.dumps(config, sort_keys=True, allow_nan=False),
    }
    n_values = sum(t.numel() for t in tensors.values())
    log(f"writing {len(tensors)} tensors ({n_values} values, {dtype}) to {output_path}")
    tmp_path = output_path + ".tmp"
    from safetensors.torch import save_file   # (imports torch: after the checks of the paths)

    save_file(tensors, tmp_path, metadata=metadata)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp_path, 0o666 & ~umask)
    os.replace(tmp_path, output_path)
    log(f"done in {time.time() - start:.1f} s")
    return config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Convert a fairchem UMA inference checkpoint (.pt) to a "
        "lammps-uma model file (.safetensors)."
    )
    parser.add_argument("input", help="fairchem inference checkpoint (.pt)")
    parser.add_argument("output", help="model file to write (.safetensors)")
    parser.add_argument(
        "--weights",
        choices=("ema", "raw"),
        default="ema",
        help="ema_state_dict (default, what fairchem uses for inference) or "
        "model_state_dict",
    )
    parser.add_argument(
        "--dtype",
        choices=("float32", "float64"),
        default="float32",
        help="floating-point type of the stored weights (default float32)",
    )
    parser.add_argument(
        "--no-name-check",
        action="store_true",
        help="do not build a small twin model to check the tensor names",
    )
    args = parser.parse_args(argv)
    # fairchem logs deprecation warnings (e.g. about dataset_list) on the root
    # logger; keep stderr to our own progress lines and errors.
    logging.basicConfig(level=logging.ERROR)
    try:
        convert(
            args.input,
            args.output,
            weights=args.weights,
            dtype=args.dtype,
            check_names=not args.no_name_check,
        )
    except ConversionError as error:
        print(f"convert_checkpoint: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
