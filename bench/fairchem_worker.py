"""Times fairchem-core's ASE calculator on structures; prints one JSON line per run.

usage: fairchem_worker.py CHECKPOINT.pt STRUCTURE.extxyz [STRUCTURE.extxyz ...] --repeats N
                          [--settings fast|general] [--checkpointing] [--compile]
                          [--device cpu|cuda] [--precision fp32 [tf32]] [--tf32]
                          [--task TASK [TASK ...]] [--forces-out PATH]

One run per structure and precision, structures outer, each with a predict unit
of its own (a merged unit serves one composition only: fairchem falls back to
its general model for another), the one before freed first; the imports and
the CUDA context are paid once.  Each run's line is printed (and flushed) as it
ends, so a run cut short keeps the lines of the runs before it.

fast: merge_mole=True, activation_checkpointing=False, and fairchem's fastest
      backend for the device: the block-GEMM backend (umas_fast_pytorch) on the
      CPU, the Triton one (umas_fast_gpu) on CUDA; torch.compile when --compile,
      TF32 matrix multiplies for --precision tf32 (CUDA only; --tf32 is
      --precision tf32).  On CUDA each timed call ends with a device
      synchronisation, and the peak memory of the caching allocator during the
      run (its load included) is reported.
general: the reference settings of the parity fixtures (unmerged, general backend).
--checkpointing: fairchem's activation checkpointing on (its memory-saving mode);
      its block-GEMM backend refuses checkpointing, so this runs the general
      backend (merged experts with fast).
--task: one dataset head for every structure, or one per structure.
--forces-out: the energy and forces of each run's first call (JSON); with
      several runs the path must hold {name} (the structure file's stem) and,
      with several precisions, {precision}.
The fields load_s and first_call_s are the run's own: a later run's first call
finds the libraries and the device warm.  peak_rss_mb is the process's so far.
"""
import argparse
import gc
import json
import os
import resource
import sys
import time

import torch


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("checkpoint")
    p.add_argument("structures", nargs="+")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--settings", choices=["fast", "general"], default="fast")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--task", nargs="+", default=["omat"])
    p.add_argument("--checkpointing", action="store_true")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--precision", nargs="+", choices=["fp32", "tf32"], default=["fp32"])
    p.add_argument("--tf32", action="store_true", help="the same as --precision tf32")
    p.add_argument("--forces-out", help="write the energy and forces of each run's first call here (JSON)")
    a = p.parse_args()
    if a.tf32:
        a.precision = ["tf32"]
    if "tf32" in a.precision and a.device != "cuda":
        p.error("tf32 needs --device cuda")
    if len(a.task) not in (1, len(a.structures)):
        p.error("--task takes one head, or one per structure (%d structures, %d heads)"
                % (len(a.structures), len(a.task)))
    if a.forces_out and len(a.structures) > 1 and "{name}" not in a.forces_out:
        p.error("--forces-out with several structures must hold {name}")
    if a.forces_out and len(a.precision) > 1 and "{precision}" not in a.forces_out:
        p.error("--forces-out with several precisions must hold {precision}")
    stems = [os.path.splitext(os.path.basename(s))[0] for s in a.structures]
    if len(set(stems)) != len(stems):
        p.error("two structures share a file name: %s" % " ".join(a.structures))
    return a


def main() -> int:
    a = parse()
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
    tasks = a.task * len(a.structures) if len(a.task) == 1 else a.task

    def run(structure: str, task: str, precision: str) -> None:
        tf32 = precision == "tf32"
        settings = InferenceSettings(
            tf32=tf32,
            activation_checkpointing=a.checkpointing,
            merge_mole=fast,
            compile=a.compile,
            execution_mode=backend,
            internal_graph_gen_version=2,
        )
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        unit = load_predict_unit(a.checkpoint, inference_settings=settings, device=a.device)
        calc = FAIRChemCalculator(unit, task_name=task)
        load_s = time.perf_counter() - t0
        baseline_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        atoms = read(structure)
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
        name = os.path.splitext(os.path.basename(structure))[0]
        if a.forces_out:
            with open(a.forces_out.format(name=name, precision=precision), "w") as f:
                json.dump({"energy": float(energy), "forces": atoms.get_forces().tolist()}, f)
        times = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            evaluate()
            times.append(time.perf_counter() - t0)
        ts = sorted(times)
        print(json.dumps({
            "engine": "fairchem-core " + ("fast" if fast else "general") + (" compiled" if a.compile else "")
            + (" checkpointed" if a.checkpointing else "") + (" tf32" if tf32 else ""),
            "structure": name,
            "precision": precision,
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
        }), flush=True)

    for structure, task in zip(a.structures, tasks):
        for precision in a.precision:
            run(structure, task, precision)
            gc.collect()  # the unit and its calculator, before the next run's peak is reset
            if cuda:
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
