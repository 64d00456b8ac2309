#!/usr/bin/env python3
"""Training-step benchmark: lammps-uma (`uma bench-train`) against fairchem's
own training pieces, side by side in one run on the CPU.

Model: the perf_check-like K4L2 configuration of tests/reference (4 blocks,
lmax 2, 64 experts, 5 dataset heads, fairchem weights).  Batch: synthetic
labelled systems from three datasets (omat bulk, oc20 slab, omol molecule),
scaled down from perf_check's max_atoms 350 to what two cores can do.  Task
settings are perf_check's (energy PerAtomMAE x10, forces L2 per_structure
x50, stress MAE x5); AdamW, clip 100, EMA 0.999 on both sides.

fairchem's step is MLIPTrainEvalUnit.train_step's sequence: forward (training
mode, create_graph), compute_loss, zero_grad, backward, clip_grad_norm_,
AdamW.step, EMA update, scheduler.step, plus the loss .item() its logging
does.  Host reads: Python-level calls of Tensor.item/.cpu/.tolist/.numpy
during one step.  ATen ops: aten:: operator calls during one step (torch
profiler on the fairchem side, a RecordFunction callback on ours; nested calls
count on both sides).

Ours runs twice: with the lean edge operators (the default) and with the
LibTorch composition (--edge-ops reference, what training ran before the lean
operators had second derivatives), with the step's phases timed.

With --recompute C, a third run of ours recomputes the edge work in chunks
of C edges in both backward passes (fix uma/train's recompute keyword): its
time against the stored lean step and its peak memory.

With --device cuda, both sides run on the GPU (the GPU check's train_versus
stage): each timed step ends when the device is done (fairchem's step ends
with its loss read; ours synchronises), peak GPU memory is each side's
allocator peak.

Rounds of (lean, reference, fairchem) run interleaved (--rounds, default 3)
and the speed-ups are the medians of the rounds' ratios: the shared machines'
load drifts over a minute by more than the differences measured.

usage: train_step.py UMA_TOOL OUT.json [--steps N] [--threads T] [--rounds R] [--batches k4l2 large]
                     [--recompute C] [--device cpu|cuda]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
import make_fixtures as mf  # noqa: E402
import make_train_fixture as mtf  # noqa: E402
import convert_checkpoint  # noqa: E402

COEF = {"energy": 10.0, "forces": 50.0, "stress": 5.0}


def labelled(structures, rng):
    out = []
    for atoms, task in structures:
        n = len(atoms)
        stress = rng.normal(0, 0.01, (3, 3))
        stress = (stress + stress.T) / 2
        out.append((atoms, task, float(rng.uniform(-4, -2) * n), rng.normal(0, 0.4, (n, 3)),
                    stress if atoms.pbc.all() else None))
    return out


def systems(seed=5):
    """The 71-atom batch: Cu bulk (omat), Pt slab (oc20), benzene (omol)."""
    from ase.build import bulk, fcc100, molecule

    rng = np.random.default_rng(seed)
    cu = bulk("Cu", "fcc", a=3.61, cubic=True).repeat((2, 2, 2))      # 32 atoms, omat
    cu.rattle(0.05, seed=seed)
    slab = fcc100("Pt", size=(3, 3, 3), vacuum=8.0)                   # 27 atoms, oc20
    slab.pbc = (True, True, True)
    slab.rattle(0.05, seed=seed + 1)
    mol = molecule("C6H6")                                             # 12 atoms, omol
    mol.center(vacuum=6.0)
    mol.info.update(charge=0, spin=1)
    return labelled(((cu, "omat"), (slab, "oc20"), (mol, "omol")), rng)


def large_systems(seed=7):
    """A 350-atom batch, perf_check's max_atoms per rank: two Cu bulks and an
    Al bulk (omat), Pt(100) and Cu(111) slabs (oc20), benzene (omol)."""
    from ase.build import bulk, fcc100, fcc111, molecule

    rng = np.random.default_rng(seed)
    out = []
    for k, (atoms, task) in enumerate((
            (bulk("Cu", "fcc", a=3.61, cubic=True).repeat((3, 3, 3)), "omat"),   # 108
            (fcc100("Pt", size=(4, 4, 6), vacuum=8.0), "oc20"),                  # 96
            (bulk("Cu", "fcc", a=3.61, cubic=True).repeat((2, 2, 3)), "omat"),   # 48
            (bulk("Al", "fcc", a=4.05, cubic=True).repeat((2, 2, 2)), "omat"),   # 32
            (fcc111("Cu", size=(3, 3, 6), vacuum=8.0), "oc20"),                  # 54
            (molecule("C6H6"), "omol"))):                                        # 12
        if task == "oc20":
            atoms.pbc = (True, True, True)
        if task == "omol":
            atoms.center(vacuum=6.0)
            atoms.info.update(charge=0, spin=1)
        atoms.rattle(0.05, seed=seed + k)
        out.append((atoms, task))
    return labelled(out, rng)


def write_extxyz(path, samples):
    lines = []
    for atoms, task, e, f, s in samples:
        lat = " ".join(repr(float(v)) for v in atoms.cell.array.reshape(-1))
        extra = f' stress="{" ".join(repr(float(v)) for v in s.reshape(-1))}"' if s is not None else ""
        pbc = " ".join("T" if p else "F" for p in atoms.pbc)
        lines.append(str(len(atoms)))
        lines.append(f'Lattice="{lat}" Properties=species:S:1:pos:R:3:forces:R:3 energy={e!r}{extra} task={task} '
                     f'charge={atoms.info.get("charge", 0)} spin={atoms.info.get("spin", 0)} pbc="{pbc}"')
        for sym, p, ff in zip(atoms.get_chemical_symbols(), atoms.positions, f):
            lines.append(f"{sym} " + " ".join(repr(float(v)) for v in (*p, *ff)))
    open(path, "w").write("\n".join(lines) + "\n")


class HostReads:
    """Counts Python-level device-to-host reads (Tensor.item/.cpu/.tolist/.numpy)."""

    NAMES = ("item", "cpu", "tolist", "numpy")

    def __enter__(self):
        self.count = 0
        self.saved = {n: getattr(torch.Tensor, n) for n in self.NAMES}
        for n, f in self.saved.items():
            def wrapped(t, *a, _f=f, **k):
                self.count += 1
                return _f(t, *a, **k)
            setattr(torch.Tensor, n, wrapped)
        return self

    def __exit__(self, *exc):
        for n, f in self.saved.items():
            setattr(torch.Tensor, n, f)


def fairchem_side(checkpoint, samples, device):
    """Returns a function that times `steps` steps of fairchem's training loop on `device`."""
    from fairchem.core.modules.scheduler import CosineLRLambda
    from fairchem.core.units.mlip_unit.mlip_unit import compute_loss
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    model, _ = mtf.fairchem_model(checkpoint, torch.float32)
    model = model.to(device)
    tasks = mtf.fairchem_tasks(checkpoint, COEF, "per_structure")
    for t in tasks:   # their element references and normalizers index the batch on its device
        for part in (t.element_references, t.normalizer, t.loss_fn):
            if isinstance(part, torch.nn.Module):
                part.to(device)
    batch, _ = mtf.fairchem_batch(samples, tasks, torch.float32)
    batch = batch.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, CosineLRLambda(1, 0.2, 100, 0.01))
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))

    def step():
        pred = model(batch)
        loss = sum(compute_loss(tasks, pred, batch).values())
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=100)
        optimizer.step()
        ema.update_parameters(model)
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
        return loss.item()   # what the trainer's logging reads

    cuda = torch.device(device).type == "cuda"
    for _ in range(2):
        step()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    with HostReads() as reads:
        step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step()
    ops = sum(1 for e in prof.events() if e.name.startswith("aten::"))
    peak_mb = torch.cuda.max_memory_allocated() / 2**20 if cuda else -1.0

    def timed(steps):
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        times.sort()
        return {"engine": "fairchem-core", "seconds_per_step": times,
                "median_seconds": times[len(times) // 2], "host_reads_per_step": reads.count,
                "aten_ops_per_step": ops, "threads": torch.get_num_threads(), "device": device,
                "peak_device_mb": peak_mb}
    return timed


def median(values):
    return sorted(values)[len(values) // 2]


def ours(uma_tool, model_file, data, steps, threads, edge_ops, recompute=0, device="cpu"):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    return json.loads(subprocess.run([uma_tool, "bench-train", model_file, data, "--steps", str(steps),
                                      "--edge-ops", edge_ops, "--recompute", str(recompute), "--phases",
                                      "--device", device],
                                     check=True, capture_output=True, text=True, env=env).stdout)


def phases(r):
    p = r["phase_seconds_per_step"]
    return ", ".join(f"{k} {1000 * p[k]:.0f}" for k in
                     ("batch", "graph", "forward", "gradient", "loss", "backward", "optimizer") if k in p)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("uma_tool")
    p.add_argument("out")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3,
                   help="rounds of (lean, reference, fairchem), interleaved against drifting machine load; "
                        "the speed-ups are the medians of the rounds' ratios")
    p.add_argument("--batches", nargs="+", choices=("k4l2", "large"), default=["k4l2", "large"],
                   help="k4l2: the 71-atom batch; large: 350 atoms, perf_check's max_atoms per rank")
    p.add_argument("--recompute", type=int, default=0,
                   help="also run ours with the edge work recomputed in chunks of this many edges")
    p.add_argument("--device", default="cpu", help="cpu or cuda: where both sides train")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    import logging
    import warnings
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    tmp = tempfile.TemporaryDirectory(prefix="uma-train-bench-")
    ckpt = os.path.join(tmp.name, "k4l2.pt")
    checkpoint = mf.build_checkpoint("k4l2", mf.MODEL_SPECS["k4l2"], 99, ckpt)
    model_file = os.path.join(tmp.name, "k4l2.safetensors")
    convert_checkpoint.convert(ckpt, model_file, weights="raw", dtype="float32")
    result = {"model": "K4L2 perf_check-like (4 blocks, lmax 2, 64 experts, 5 datasets)",
              "threads": args.threads, "device": args.device, "batches": {}}
    for name in args.batches:
        samples = systems() if name == "k4l2" else large_systems()
        data = os.path.join(tmp.name, f"{name}.extxyz")
        write_extxyz(data, samples)
        fairchem_steps = fairchem_side(checkpoint, samples, args.device)
        run_ours = lambda edge_ops, recompute=0: ours(args.uma_tool, model_file, data, args.steps, args.threads,
                                                      edge_ops, recompute, args.device)
        rounds = []
        for _ in range(args.rounds):
            rounds.append({"lean": run_ours("lean"), "reference": run_ours("reference"),
                           "fairchem": fairchem_steps(args.steps)})
            if args.recompute > 0:
                rounds[-1]["recomputed"] = run_ours("lean", args.recompute)
        # the round with the median lean time stands for the run; the speed-ups are per-round medians
        by_lean = sorted(rounds, key=lambda x: x["lean"]["median_seconds"])
        lean, reference, theirs = (by_lean[len(by_lean) // 2][k] for k in ("lean", "reference", "fairchem"))
        ratio = lambda a, b: median([x[a]["median_seconds"] / x[b]["median_seconds"] for x in rounds])
        r = {"atoms_per_batch": sum(len(s[0]) for s in samples), "systems": [s[1] for s in samples],
             "lammps_uma": lean, "lammps_uma_reference_edge_ops": reference, "fairchem": theirs,
             "rounds": [{k: x[k]["median_seconds"] for k in x} for x in rounds],
             "speedup": ratio("fairchem", "lean"),
             "speedup_reference_edge_ops": ratio("fairchem", "reference"),
             "op_ratio": lean["aten_ops_per_step"] / theirs["aten_ops_per_step"]}
        if args.recompute > 0:
            mine = by_lean[len(by_lean) // 2]["recomputed"]
            r["lammps_uma_recomputed"] = mine
            r["recomputed_time_ratio"] = ratio("recomputed", "lean")
            print(f"  recomputed in chunks of {args.recompute} edges: {mine['median_seconds']:.3f} s/step "
                  f"({r['recomputed_time_ratio']:.2f}x the stored step's time, median of rounds), "
                  f"peak RSS {mine['peak_rss_mb']:.0f} MB against {lean['peak_rss_mb']:.0f} MB, "
                  f"loss {mine['loss']:.10g} against {lean['loss']:.10g}", flush=True)
        result["batches"][name] = r
        gpu = (f"; peak GPU memory: lean {lean['peak_device_mb']:.0f} MB, reference "
               f"{reference['peak_device_mb']:.0f} MB, fairchem {theirs['peak_device_mb']:.0f} MB"
               if args.device != "cpu" else "")
        print(f"{name}: {r['atoms_per_batch']} atoms/batch, {args.threads} threads, {args.device}{gpu}\n"
              f"  lammps-uma (lean)      {lean['median_seconds']:.3f} s/step, {lean['host_reads_per_step']} host "
              f"reads, {lean['aten_ops_per_step']} ATen ops, peak RSS {lean['peak_rss_mb']:.0f} MB; "
              f"ms: {phases(lean)}\n"
              f"  lammps-uma (reference) {reference['median_seconds']:.3f} s/step, "
              f"{reference['aten_ops_per_step']} ATen ops, peak RSS {reference['peak_rss_mb']:.0f} MB; "
              f"ms: {phases(reference)}\n"
              f"  fairchem               {theirs['median_seconds']:.3f} s/step, {theirs['host_reads_per_step']} "
              f"host reads, {theirs['aten_ops_per_step']} ATen ops\n"
              f"  speed-up {r['speedup']:.2f}x (reference edge ops {r['speedup_reference_edge_ops']:.2f}x; "
              f"median of {args.rounds} interleaved rounds: "
              f"{', '.join('%.2fx' % (x['fairchem'] / x['lean']) for x in r['rounds'])}), "
              f"op ratio {r['op_ratio']:.2f}", flush=True)
    json.dump(result, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
