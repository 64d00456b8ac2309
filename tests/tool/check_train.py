#!/usr/bin/env python3
"""`uma test` and `uma train` through the command line, checked by value.

test:  the three MAEs `uma test MODEL DATA` prints equal those computed here
       from DATA's labels and `uma eval MODEL DATA --json --precision fp64`
       (energy |dE|/atoms averaged over frames, forces and stress averaged over
       components), within half a unit of the printed last digit plus 2e-5
       relative (the tool evaluates in fp32; measured <= 1e-5 relative, rounding
       of the print included).
train: two short runs on DATA (lr 1e-3, forces coefficient 20, energy 1,
       --validate DATA):
       - raw weights (--ema 0, 10 steps): the written file loads (`uma info` shows the
         start model's configuration), `uma test` on it prints exactly the
         run's "held-out" line and on the start model its "start" line, the
         MAE check above holds for it, and its forces MAE is at most 0.7 x and
         its energy MAE at most 0.9 x the start model's (measured on the demo
         model for seeds 0..4: 0.38..0.39 x and 0.15..0.77 x; seed 0, used
         here: 0.39 x and 0.33 x);
       - averaged weights (the default --ema 0.999, 3 steps): "(averaged weights, fp32)" is
         written, `uma test` on the file prints the run's "held-out" line, that
         line differs from the raw run's, and the energy MAE is at most 0.9 x
         the start's (measured 0.77..0.81 x for seeds 0..4, with 3 or 10
         steps: the average starts from the first step's weights and at decay
         0.999 stays close to them);
       - an --out in a missing folder or naming an existing folder: exit code
         1 and "uma: error: ..." naming the path, nothing left behind;
       - the training options of fix uma/train's table: --precision fp64 runs
         print every task's loss with 17 digits, twice the same digits, and
         other losses than fp32's (within 1e-4 relative); the lr printed for
         the first step is that step's (--warmup 4: warmup_factor x lr); a
         committee trains and prints its loss; values outside an option's
         range fail with the table's message;
       - --raw-out with --ema 0.5: --out holds the averaged and --raw-out the
         raw weights, both in the training precision (every weight F64 with
         --precision fp64, F32 without; the element references are float64
         in every model file), and they differ.

usage: check_train.py test|train UMA MODEL DATA.extxyz
"""
import json
import os
import re
import subprocess
import sys
import tempfile

failures = []
TRAIN = ["--lr", "1e-3", "--energy-coef", "1", "--forces-coef", "20", "--max-atoms", "32",
         "--print-every", "5", "--seed", "0"]


def check(ok, message):
    if not ok:
        failures.append(message)
    return ok


def run(*args, show=True):
    p = subprocess.run(list(args), capture_output=True, text=True)
    print("$", "uma", " ".join(args[1:]), f"(rc {p.returncode})")
    if show:
        print(p.stdout.rstrip())
    return p


def mae_line(text, label):
    """The three numbers of the tool's '<label> energy MAE ... stress MAE ...' line, as printed."""
    m = re.search(rf"^{label} +energy MAE (\S+) eV/atom +forces MAE (\S+) eV/A +stress MAE (\S+) eV/A\^3$",
                  text, re.M)
    return m.groups() if m else None


def read_labels(path):
    """(atoms, energy, forces flat, stress 9) per frame of a labelled extxyz file."""
    lines, frames, i = open(path).read().splitlines(), [], 0
    while i < len(lines):
        n, head = int(lines[i]), lines[i + 1]
        energy = float(re.search(r"(?:^| )energy=(\S+)", head).group(1))
        stress = [float(x) for x in re.search(r'stress="([^"]+)"', head).group(1).split()]
        props = re.search(r"Properties=(\S+)", head).group(1).split(":")
        names, widths = props[0::3], [int(w) for w in props[2::3]]
        col = sum(widths[:names.index("forces")])   # first column of the forces
        forces = [float(x) for line in lines[i + 2:i + 2 + n] for x in line.split()[col:col + 3]]
        frames.append((n, energy, forces, stress))
        i += 2 + n
    return frames


def check_test(uma, model, data, against_eval=True):
    """`uma test` against MAEs computed from `uma eval` and the labels; returns the printed numbers."""
    p = run(uma, "test", model, data)
    printed = mae_line(p.stdout, "errors")
    if not check(p.returncode == 0 and printed, f"uma test {model}: rc {p.returncode}, {p.stdout!r} {p.stderr!r}"):
        return None
    if not against_eval:
        return printed
    e = run(uma, "eval", model, data, "--json", "--precision", "fp64", show=False)
    if not check(e.returncode == 0, f"uma eval {model}: rc {e.returncode}, {e.stderr!r}"):
        return None
    out, frames = json.loads(e.stdout), read_labels(data)
    check(len(out) == len(frames) == 4, f"{len(out)} results for {len(frames)} frames (4 expected)")
    atoms = sum(n for n, *_ in frames)
    mine = (sum(abs(r["energy"] - en) / n for (n, en, _, _), r in zip(frames, out)) / len(frames),
            sum(abs(a - b) for (_, _, f, _), r in zip(frames, out) for a, b in zip(r["forces"], f)) / (3 * atoms),
            sum(abs(a - b) for (_, _, _, s), r in zip(frames, out) for a, b in zip(r["stress"], s)) / (9 * len(frames)))
    for name, text, value in zip(("energy", "forces", "stress"), printed, mine):
        half_unit = 0.5 * 10.0 ** -len(text.split(".")[1])
        print(f"{name} MAE: uma test {text}, from uma eval fp64 and the labels {value:.8f}")
        check(abs(float(text) - value) <= half_unit + 2e-5 * value,
              f"uma test {model}: {name} MAE {text}, but {value:.8f} from uma eval and the labels")
    return printed


def check_bad_out(uma, model, data, folder):
    missing = os.path.join(folder, "no_such_folder", "model.safetensors")
    p = run(uma, "train", model, data, "--out", missing, "--steps", "1", "--max-atoms", "32")
    check(p.returncode == 1 and f"uma: error: cannot write '{missing}'" in p.stderr,
          f"--out in a missing folder: rc {p.returncode}, stderr {p.stderr!r}")
    check(not os.path.exists(os.path.dirname(missing)), "--out in a missing folder: the folder was created")
    # refused before the data are read and the training runs, not after it
    check("training " not in p.stdout, f"--out in a missing folder: refused only after training: {p.stdout[-300:]!r}")
    same = os.path.join(folder, "same.safetensors")
    p = run(uma, "train", model, data, "--out", same, "--raw-out", same, "--steps", "1", "--max-atoms", "32")
    check(p.returncode == 1 and "--raw-out names the same file as --out" in p.stderr and not os.path.exists(same),
          f"--raw-out equal to --out: rc {p.returncode}, stderr {p.stderr!r}")
    # frames larger than a batch are left out, and the command says so
    p = run(uma, "train", model, data, "--out", same, "--steps", "1", "--max-atoms", "1")
    check(re.search(r"^warning: (\d+) of \1 frames have more than --max-atoms 1 atoms", p.stdout, re.M),
          f"--max-atoms 1: no warning of the frames left out: {p.stdout[-300:]!r}")
    existing = os.path.join(folder, "a_folder")
    os.mkdir(existing)
    p = run(uma, "train", model, data, "--out", existing, "--steps", "1", "--max-atoms", "32")
    check(p.returncode == 1 and re.search(rf"^uma: error: .*'{re.escape(existing)}'", p.stderr, re.M),
          f"--out naming a folder: rc {p.returncode}, stderr {p.stderr!r}")
    check(os.path.isdir(existing) and os.listdir(existing) == [] and not os.path.exists(existing + ".tmp"),
          f"--out naming a folder: left {sorted(os.listdir(folder))}")


def train_run(uma, model, data, out, *extra):
    p = run(uma, "train", model, data, "--out", out, "--validate", data, *TRAIN, *extra)
    start, held = mae_line(p.stdout, "start"), mae_line(p.stdout, "held-out")
    check(p.returncode == 0 and start and held, f"uma train: rc {p.returncode}, {p.stdout!r} {p.stderr!r}")
    return p, start, held


def check_train(uma, model, data):
    with tempfile.TemporaryDirectory() as folder:
        start = check_test(uma, model, data, against_eval=False)   # tool.test checks it against uma eval
        info = run(uma, "info", model)
        raw_path, avg_path = os.path.join(folder, "raw.safetensors"), os.path.join(folder, "avg.safetensors")

        p, printed_start, held = train_run(uma, model, data, raw_path, "--steps", "10", "--ema", "0")
        check(f"wrote {raw_path} (raw weights, fp32)" in p.stdout, "raw run: no 'wrote ... (raw weights, fp32)' line")
        check(printed_start == start, f"train's start line {printed_start} is not uma test's {start}")
        written = run(uma, "info", raw_path)
        same = lambda text: [line for line in text.splitlines() if not line.startswith("model file")]
        check(written.returncode == 0 and same(written.stdout) == same(info.stdout) and same(info.stdout),
              f"uma info on the written model: rc {written.returncode}, {written.stdout!r} vs {info.stdout!r}")
        raw = check_test(uma, raw_path, data)
        check(raw == held, f"uma test on the written model prints {raw}, the run's held-out line {held}")
        if start and raw:
            ratio = [float(b) / float(a) for a, b in zip(start, raw)]
            print(f"raw weights: energy MAE {ratio[0]:.2f} x, forces MAE {ratio[1]:.2f} x the start model's")
            check(ratio[0] <= 0.9, f"energy MAE {raw[0]} is not below 0.9 x the start's {start[0]}")
            check(ratio[1] <= 0.7, f"forces MAE {raw[1]} is not below 0.7 x the start's {start[1]}")

        p, _, held_avg = train_run(uma, model, data, avg_path, "--steps", "3")
        check(f"wrote {avg_path} (averaged weights, fp32)" in p.stdout, "default run: no 'wrote ... (averaged weights, fp32)' line")
        avg = check_test(uma, avg_path, data, against_eval=False)
        check(avg == held_avg, f"uma test on the averaged model prints {avg}, the run's held-out line {held_avg}")
        check(avg is None or avg != raw, f"the averaged and raw runs wrote models with the same MAEs {avg}")
        if start and avg:
            print(f"averaged weights: energy MAE {float(avg[0]) / float(start[0]):.2f} x the start model's")
            check(float(avg[0]) <= 0.9 * float(start[0]), f"averaged: energy MAE {avg[0]} vs start {start[0]}")

        check_bad_out(uma, model, data, folder)
        check_options(uma, model, data, folder)
        check_raw_out(uma, model, data, folder)


def losses(text):
    """{step: {task: loss text}} from the 'losses:' lines after each progress line."""
    out, step = {}, None
    for line in text.splitlines():
        words = line.split()
        if words and words[0].isdigit():
            step = int(words[0])
        elif words[:1] == ["losses:"] and step is not None:
            out[step] = dict(zip(words[1::2], words[2::2]))
    return out


def safetensors_floats(path):
    """{name: (dtype, raw bytes)} of a safetensors file's floating-point tensors."""
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
        body = f.read()
    return {k: (v["dtype"], body[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__" and v["dtype"].startswith(("F", "BF"))}


def weights(path):
    """The network's floating-point tensors (the element references are float64 in every model file)."""
    return {k: v for k, v in safetensors_floats(path).items() if not k.endswith(".element_references")}


def check_raw_out(uma, model, data, folder):
    for precision, dtype in (("fp64", "F64"), ("fp32", "F32")):
        avg, raw = (os.path.join(folder, f"{w}_{precision}.safetensors") for w in ("avg", "raw"))
        p = run(uma, "train", model, data, *TRAIN[:-4], "--steps", "3", "--ema", "0.5", "--precision", precision,
                "--out", avg, "--raw-out", raw)
        check(p.returncode == 0 and f"wrote {avg} (averaged weights, {precision})" in p.stdout
              and f"wrote {raw} (raw weights, {precision})" in p.stdout,
              f"--raw-out {precision}: rc {p.returncode}, {p.stdout[-300:]!r}")
        if p.returncode != 0:
            continue
        a, r = weights(avg), weights(raw)
        dtypes = {d for d, _ in a.values()} | {d for d, _ in r.values()}
        check(dtypes == {dtype}, f"--precision {precision}: weights written as {dtypes}, expected {dtype}")
        check(a.keys() == r.keys() and any(a[k][1] != r[k][1] for k in a),
              f"--raw-out {precision}: the raw and averaged files hold the same weights")


def check_options(uma, model, data, folder):
    out = os.path.join(folder, "options.safetensors")
    short = [*TRAIN[:-4], "--print-every", "1", "--steps", "2", "--ema", "0", "--out", out]
    runs = {}
    for tag, extra in (("fp64", ["--precision", "fp64"]), ("fp64 again", ["--precision", "fp64"]), ("fp32", [])):
        p = run(uma, "train", model, data, *short, *extra)
        runs[tag] = losses(p.stdout)
        check(p.returncode == 0 and sorted(runs[tag]) == [1, 2], f"uma train {extra}: rc {p.returncode}, {runs[tag]}")
    if "fp64" in runs and runs["fp64"]:
        check("fp64" in run(uma, "train", model, data, *short, "--precision", "fp64", show=False).stdout.splitlines()[0],
              "the fp64 run's first line does not name its precision")
        check(runs["fp64"] == runs["fp64 again"], f"two fp64 runs printed different losses: {runs}")
        values = [v for step in runs["fp64"].values() for v in step.values() if float(v) != 0]   # tasks with data
        check(values and all(len(v.replace("-", "").replace(".", "").split("e")[0].lstrip("0")) >= 15 for v in values),
              f"fp64 losses printed with too few digits: {values}")
        for step, tasks in runs["fp64"].items():
            for task, v in tasks.items():
                if float(v) == 0:
                    continue   # a task without data in the batch
                w = runs["fp32"].get(step, {}).get(task)
                check(w is not None and v != w and abs(float(v) - float(w)) <= 1e-4 * abs(float(v)),
                      f"step {step} {task}: fp64 loss {v}, fp32 {w} (expected different, within 1e-4)")
    p = run(uma, "train", model, data, *short, "--warmup", "4")
    first = [l.split() for l in p.stdout.splitlines() if l.split()[:1] == ["1"]]
    check(p.returncode == 0 and first and first[0][6] == "0.0002",
          f"--lr 1e-3 --warmup 4: the first step's lr is 0.2 x 1e-3, printed {first[0][6] if first else None}")
    p = run(uma, "train", model, data, *short, "--committee", "2")
    trained = losses(p.stdout)
    check(p.returncode == 0 and all("committee" in t for t in trained.values()) and len(trained) == 2,
          f"--committee 2: rc {p.returncode}, losses {trained}")
    for flag, value, message in (("--lr", "-1", "lr must be > 0, got '-1'"),
                                 ("--committee", "1", "committee must be 0 (none) or K >= 2, got '1'"),
                                 ("--precision", "tf32", "precision must be fp32 or fp64, got 'tf32'"),
                                 ("--ema", "1", "ema must be >= 0 and < 1, got '1'")):
        p = run(uma, "train", model, data, "--out", out, "--steps", "1", flag, value, show=False)
        check(p.returncode == 1 and f"uma: error: {message}" in p.stderr,
              f"{flag} {value}: rc {p.returncode}, stderr {p.stderr!r}")


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("test", "train"):
        print(__doc__.strip())
        return 2
    mode, uma, model, data = sys.argv[1:5]
    if mode == "test":
        check_test(uma, model, data)
    else:
        check_train(uma, model, data)
    for f in failures:
        print("FAIL:", f)
    print("FAIL" if failures else f"PASS tool.{mode}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
