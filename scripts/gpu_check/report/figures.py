"""The figures of the summary: from each stage's details, what a reader of the summary looks at
first (counts, deviations, speeds, the memory plan), by stage."""
import os

from .common import load


def pick(d, keys):
    return {k: d[k] for k in keys if k in d}


def ranks_case(c):
    """The figures of one ranks case: deviation, probe counts, the last step's transfer counts."""
    if "skipped" in c:
        return {"skipped": c["skipped"]}
    out = pick(c, ("passed", "worst_relative_deviation", "checks_failed"))
    out["mpi_calls_per_rank"] = [p["calls"] if p else None for p in c.get("probe", [])]
    for tag in ("np1", "np2"):
        runs = c.get(tag, {}).get("transfers_per_step", [])
        if runs and runs[-1].get("step"):
            out[tag + "_last_step"] = {k: v[-1] for k, v in runs[-1].items()}
    return out


def versus(d):
    return {struct: ({"not_run": e["not_run"]} if "not_run" in e else
                     {"atoms": e.get("atoms"), "passed": e.get("passed"), "ratios": e.get("ratios"),
                      "checks_failed": e.get("checks_failed"),
                      "runs": {n: pick(r, ("ms_per_step", "steps_per_s", "peak_device_mb", "first_call_s",
                                           "load_s", "compile_s", "compile_s_over_eager",
                                           "energy_per_atom_error", "force_max_abs_error",
                                           "version", "torch", "cut", "error"))
                               for n, r in e.get("runs", {}).items()}})
            for struct, e in d.get("structures", {}).items()}


def tests(d):
    out = pick(d, ("total", "passed", "failed", "failed_tests", "skipped", "not_run", "not_run_tests",
                   "shard_errors", "ctest_incomplete"))
    g = d.get("gtest") or {}
    if g:
        out["shards"] = g.get("shards")
        out["gtest_seconds"] = g.get("seconds")
        out["slowest_ms"] = g.get("slowest_ms", [])[:5]
    return out


def kokkos(d):
    out = pick(d, ("atoms", "speed", "reference_transfers_per_step", "passed", "checks_failed"))
    out["runs"] = {n: pick(r, ("max_relative_deviation", "steady_transfers_per_step", "error"))
                   for n, r in d.get("runs", {}).items()}
    return out


def train(d):
    out = pick(d, ("device", "loss_first", "loss_last", "passed", "checks_failed", "error"))
    out["loss_lines"] = len(d.get("losses", []))
    out["host_reads_per_optimizer_step"] = [t["host_reads"] for t in d.get("transfers_per_optimizer_step", [])]
    out["uploads_per_optimizer_step"] = [t["uploads"] for t in d.get("transfers_per_optimizer_step", [])]
    return out


def tf32(d):
    return {struct: dict({"atoms": e.get("atoms"), "passed": e.get("passed")},
                         **{p: pick(r, ("energy_per_atom_error", "force_max_abs_error", "force_mean_abs_error",
                                        "error"))
                            for p, r in e.get("runs", {}).items() if p != e.get("reference")})
            for struct, e in d.get("structures", {}).items()}


BENCH_KEYS = ("run", "atoms", "edges", "device", "precision", "ms_per_step", "steps_per_s", "peak_device_mb",
              "resident_device_mb", "evaluation_peak_mb", "predicted_peak_mb", "predicted_over_peak",
              "model_gflops_per_s", "graph_replays", "graph_refusal", "step_kernels", "step_memory_ops", "profile",
              "rc", "error")
# stage -> (the name of its figures, what of its details; the details a dict, unless marked list)
FROM_DETAILS = {
    "tests": ("tests", tests),
    "profile": ("uma_profile", lambda d: [pick(r, ("run", "atoms", "ms_per_step", "profile", "rc", "error"))
                                          for r in d]),
    "bench": ("uma_bench", lambda d: [pick(r, BENCH_KEYS) for r in d]),
    "lammps_md": ("lammps_md", lambda d: pick(d, ("performance", "timesteps_per_s", "atoms", "steps", "device",
                                                  "loop_s", "error"))),
    "mpi": ("mpi", lambda d: pick(d, ("library", "allreduce_ranks_ok", "passed", "checks_failed"))),
    "ranks": ("ranks", lambda d: {name: ranks_case(c) for name, c in d.get("cases", {}).items()}),
    "devices": ("devices", lambda d: pick(d, ("devices", "rehearsal", "max_relative_deviation",
                                              "nve_drift_ev_per_atom", "passed", "checks_failed"))),
    "kokkos": ("kokkos", kokkos),
    "kernels": ("kernels", lambda d: pick(d, ("device", "max_relative", "passed", "checks_failed"))),
    "train": ("train", train),
    "versus_fairchem": ("versus_fairchem", versus),
    "versus_fairchem_compiled": ("versus_fairchem_compiled", versus),
    "largest": ("largest", lambda d: pick(d, ("atoms", "steps", "timesteps_per_s", "memory_plan", "recomputed",
                                              "chunk_edges", "predicted_gb", "budget_gb", "peak_gpu_gb",
                                              "predicted_over_peak", "peak_within_budget", "error"))),
    "versus_train": ("versus_train", lambda d: d.get("batches")),
    "tf32": ("tf32", tf32),
    "pip_route": ("pip_route", lambda d: pick(d, ("device", "seconds", "lean_cuda_kernels", "plugin_loaded",
                                                  "steps_per_s", "max_relative_deviation", "passed",
                                                  "checks_failed"))),
}
LISTS = ("profile", "bench")
REPLAY_KEYS = ("passed", "worst_difference", "eager_timesteps_per_s", "replayed_timesteps_per_s", "replay_speedup",
               "checks_failed")


def figures(stages, details_dir):
    """The figures of every stage recorded in STAGES, in their order."""
    out = {}
    for s in stages:
        d, name = s.get("details"), s["name"]
        if name in FROM_DETAILS and (isinstance(d, list) if name in LISTS else bool(d)):
            key, extract = FROM_DETAILS[name]
            out[key] = extract(d)
        if name == "lammps_md":
            replay = load(os.path.join(details_dir, "lammps_md_replay.json"))
            if replay:
                out["lammps_md_replay"] = pick(replay, REPLAY_KEYS)
    return out
