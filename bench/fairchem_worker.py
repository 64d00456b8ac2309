"""Times fairchem-core's ASE calculator on one structure; prints one JSON line.

usage: fairchem_worker.py CHECKPOINT.pt STRUCTURE.extxyz --repeats N [--settings fast|general]
                          [--checkpointing] [--compile] [--device cpu|cuda] [--tf32]
                          [--forces-out FORCES.json]

fast: merge_mole=True, activation_checkpointing=False, and fairchem's fastest
      backend for the device: the block-GEMM backend (umas_fast_pytorch) on the
      CPU, the Triton one (umas_fast_gpu) on CUDA; torch.compile when --compile,
      TF32 matrix multiplies when --tf32 (CUDA only).  On CUDA each timed call
      ends with a device synchronisation, and the peak memory of the caching
      allocator is reported.
general: the reference settings of the parity fixtures (unmerged, general backend).
--checkpointing: fairchem's activation checkpointing on (its memory-saving mode);
      its block-GEMM backend refuses checkpointing, so this runs the general
      backend (merged experts with fast).
"""
import argparse
import json
import resource
import sys
import time

import torch


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("checkpoint")
    p.add_argument("structure")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--settings", choices=["fast", "general"], default="fast")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--task", default="omat")
    p.add_argument("--checkpointing", action="store_true")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--tf32", action="store_true")
    p.add_argument("--forces-out", help="write the energy and forces of the first call here (JSON)")
    a = p.parse_args()
    if a.tf32 and a.device != "cuda":
        p.error("--tf32 needs --device cuda")
    cuda = a.device == "cuda"

    from ase.io import read
    from importlib.metadata import version

    from fairchem.core import FAIRChemCalculator
    from fairchem.core.units.mlip_unit import load_predict_unit
    from fairchem.core.units.mlip_unit.api.inference import InferenceSettings

    fairchem_version = version("fairchem-core")
    fast = a.settings == "fast"
    backend = "general"
    if fast and not a.checkpointing:
        backend = "umas_fast_gpu" if cuda else "umas_fast_pytorch"
    settings = InferenceSettings(
        tf32=a.tf32,
        activation_checkpointing=a.checkpointing,
        merge_mole=fast,
        compile=a.compile,
        execution_mode=backend,
        internal_graph_gen_version=2,
    )
    t0 = time.perf_counter()
    unit = load_predict_unit(a.checkpoint, inference_settings=settings, device=a.device)
    calc = FAIRChemCalculator(unit, task_name=a.task)
    load_s = time.perf_counter() - t0
    baseline_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0   # libraries and model
    atoms = read(a.structure)
    atoms.calc = calc

    def evaluate():
        calc.reset()  # no result caching between repeats
        e = atoms.get_potential_energy()
        atoms.get_forces()
        atoms.get_stress()
        if cuda:
            torch.cuda.synchronize()
        return e

    t0 = time.perf_counter()
    energy = evaluate()
    first_s = time.perf_counter() - t0
    if a.forces_out:
        with open(a.forces_out, "w") as f:
            json.dump({"energy": float(energy), "forces": atoms.get_forces().tolist()}, f)
    times = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        evaluate()
        times.append(time.perf_counter() - t0)
    ts = sorted(times)
    print(json.dumps({
        "engine": "fairchem-core " + ("fast" if fast else "general") + (" compiled" if a.compile else "")
        + (" checkpointed" if a.checkpointing else "") + (" tf32" if a.tf32 else ""),
        "version": fairchem_version,
        "torch": torch.__version__,
        "device": a.device,
        "backend": backend,
        "atoms": len(atoms),
        "threads": torch.get_num_threads(),
        "load_s": load_s,
        "first_call_s": first_s,
        "time_s": {"min": ts[0], "median": ts[len(ts) // 2], "max": ts[-1], "all": times},
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "baseline_rss_mb": baseline_mb,
        "peak_device_mb": torch.cuda.max_memory_allocated() / 2**20 if cuda else -1.0,
        "energy": float(energy),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
