"""fix uma/train through real LAMMPS (the project's sid root), on 1, 2 and 4 MPI ranks.

CASES: name -> case(host_dir, root_dir), run by run_case.py --suite train (each a ctest,
lammps.fix_uma_train.NAME).
"""
import math
import os
import re

import numpy as np
from ase.build import bulk
from ase.calculators.emt import EMT
from ase.io import write
from safetensors.numpy import load_file

import harness
from harness import MODEL, NKTV2P, PLUGIN, check, lammps, read_dump, thermo

POTENTIALS = f"LAMMPS_POTENTIALS={harness.LAMMPS_POTENTIALS}"
HEAD = """plugin load {plugin}
units metal
atom_style atomic
boundary p p p
lattice fcc 3.615
region box block 0 2 0 2 0 2
create_box 1 box
create_atoms 1 box
mass * 63.546
displace_atoms all random 0.1 0.1 0.1 777 units box
pair_style uma task omat
pair_coeff * * {model} Cu
"""


def head():
    return HEAD.format(plugin=PLUGIN, model=MODEL)


def emt_frames(lattices, rattle, first_seed):
    """Labelled 32-atom copper frames (ASE's EMT), one per lattice constant, rattled with seeds from first_seed."""
    frames = []
    for k, a0 in enumerate(lattices):
        a = bulk("Cu", "fcc", a=a0, cubic=True).repeat((2, 2, 2))
        a.rattle(rattle, seed=first_seed + k)
        a.calc = EMT()
        a.get_potential_energy(), a.get_forces(), a.get_stress()
        a.info["task"] = "omat"
        frames.append(a)
    return frames


def write_frames(host_dir, count=8):
    """Labelled 32-atom copper frames (ASE's EMT), as extended XYZ."""
    write(os.path.join(host_dir, "frames.extxyz"), emt_frames([3.615] * count, 0.08, 100))


def weights(host_dir, name):
    t = load_file(os.path.join(host_dir, name))
    return np.concatenate([t[k].ravel().astype(np.float64) for k in sorted(t) if not k.startswith("tasks.")])


def update(host_dir, name):
    """Checkpoint NAME's weights minus the start model's (MODEL, as the root holds it), in weights()' order."""
    t, s = load_file(os.path.join(host_dir, name)), load_file(harness.ROOT + MODEL)
    return np.concatenate([t[k].astype(np.float64).ravel() - s[k].astype(np.float64).ravel()
                           for k in sorted(t) if not k.startswith("tasks.")])


def losses(log):
    return [float(m) for m in re.findall(r"fix uma/train: step \d+ optimizer step \d+ frames \d+ loss (\S+)", log)]


def case_data_parallel(h, r):
    """Same global batches: 1 rank with 2 frames per step = 2 ranks with 1 each = 4 ranks (4 frames per step
    on 4 ranks vs 1 rank); every rank holds bit-identical weights (checked by the fix's hash at checkpoints)."""
    write_frames(h)
    fix = ("fix t all uma/train 1 data frames.extxyz max_atoms {m} shuffle no lr 1e-3 ema 0 print 1 "
           "precision {p} checkpoint {out} 3{extra}\nrun 3\n")
    runs = {}
    for name, np_, max_atoms, precision in (("one", 1, 64, "fp64"), ("two", 2, 32, "fp64"), ("one4", 1, 128, "fp64"),
                                            ("four", 4, 32, "fp64"), ("one32", 1, 64, "fp32"), ("two32", 2, 32, "fp32"),
                                            ("two_recomputed", 2, 32, "fp64")):
        # the last: the edge work recomputed in chunks of 1000 edges (several per frame) in both backward passes
        extra = " recompute 1000" if name == "two_recomputed" else ""
        text = head() + fix.format(m=max_atoms, p=precision, out=name + ".safetensors", extra=extra)
        log = lammps(h, r, "in." + name, text, np_=np_)
        check(f"identical on {np_} rank(s)" in log, f"{name}: no replica check in the log")
        runs[name] = (losses(log), weights(h, name + ".safetensors"))
        print(f"  {name}: {np_} rank(s), max_atoms {max_atoms}, {precision}, "
              f"losses {['%.10g' % v for v in runs[name][0]]}")
    # fp64: k ranks with one frame each equal one rank with a batch of k frames
    # to 1e-6 relative (losses, and every weight; the checkpoint stores float32,
    # so two weights may differ by one float32 rounding, 6e-8 relative).
    # fp32: the GEMM shapes differ, so float32 rounding differs, and AdamW's
    # first steps (update ~ sign of the gradient) amplify it in components whose
    # gradient is near zero: 1.3e-5 relative in the losses was measured.  The
    # weights: most agree to float32 rounding (median |dw| < 1e-7) and none by
    # more than 1% of the largest update the 3 steps made (|w - w_start|, about
    # 3 lr = 3e-3): measured 3.1e-7, 1.4e-4 of the largest update (2.2e-3),
    # on 2026-12-01.
    for a, b, loss_tol, weight_tol in (("one", "two", 1e-6, 1e-6), ("one4", "four", 1e-6, 1e-6),
                                       ("one32", "two32", 3e-5, None)):
        la, wa = runs[a]
        lb, wb = runs[b]
        check(len(la) == len(lb) == 3, f"{a}/{b}: expected 3 loss lines")
        rel = max(abs(x - y) / abs(x) for x, y in zip(la, lb))
        check(rel < loss_tol, f"{a} vs {b}: losses differ by {rel:.2e} relative (bound {loss_tol:g})")
        dw = np.abs(wa - wb)
        if weight_tol is not None:
            worst = np.max(dw / np.maximum(np.abs(wa), 1e-6))
            check(worst < weight_tol, f"{a} vs {b}: a weight differs by {worst:.2e} relative (bound {weight_tol:g})")
            print(f"  {a} vs {b}: losses within {rel:.1e} relative, every weight within {worst:.1e} relative")
        else:
            step = np.abs(update(h, a + ".safetensors")).max()
            check(np.median(dw) < 1e-7 and dw.max() < 0.01 * step,
                  f"{a} vs {b}: weights differ (median {np.median(dw):.2e}, max {dw.max():.2e}; "
                  f"bound 1% of the largest update {step:.2e})")
            print(f"  {a} vs {b}: losses within {rel:.1e} relative, weights median |dw| {np.median(dw):.1e}, "
                  f"max {dw.max():.1e} = {dw.max() / step:.1e} x the largest update {step:.1e} (fp32)")
    # recomputed edge work: the stored run's losses (printed to 10 digits) and float32 checkpoint
    la, wa = runs["two"]
    lb, wb = runs["two_recomputed"]
    rel = max(abs(x - y) / abs(x) for x, y in zip(la, lb))
    worst = np.max(np.abs(wa - wb) / np.maximum(np.abs(wa), 1e-6))
    check(len(la) == len(lb) == 3 and rel < 1e-9 and worst < 1e-6,
          f"two vs two_recomputed: losses {la} vs {lb} ({rel:.2e} relative, bound 1e-9), "
          f"a weight differs by {worst:.2e} relative (bound 1e-6)")
    print(f"  two vs two_recomputed: losses within {rel:.1e} relative, every weight within {worst:.1e} relative")
    moved = np.abs(runs["one"][1] - weights(h, "one4.safetensors")).max()
    check(moved > 1e-4, "the weights did not change with the batch")


def case_on_the_fly(h, r):
    """Frames from the running MD, labelled by EAM, on 1, 2 and 4 ranks, and on 2 ranks with pair_style
    uma/kk (-sf kk, which must train as uma does): the first frame's labels equal a plain EAM run on the
    same structure; frames go to extxyz; thermo shows the fix's vector."""
    eam = lammps(h, r, "in.eam", HEAD.split("pair_style")[0].format(plugin=PLUGIN) +
                 "pair_style eam\npair_coeff 1 1 Cu_u3.eam\ncompute p all pressure NULL virial\n"
                 "thermo_style custom step pe c_p[*]\nthermo_modify format float %.15g\n"
                 "dump d all custom 1 dump.eam id x y z fx fy fz\ndump_modify d format float %.15g sort id\nrun 0\n",
                 env=POTENTIALS)
    t, _ = thermo(eam)
    _, _, cols = read_dump(os.path.join(h, "dump.eam"))
    f_eam = np.stack([cols["fx"], cols["fy"], cols["fz"]], 1)
    x_eam = np.stack([cols["x"], cols["y"], cols["z"]], 1)
    final = {}
    for np_, kk in ((1, False), (2, False), (4, False), (2, True)):
        tag = f"{np_}kk" if kk else f"{np_}"
        text = head() + (f"velocity all create 500 4242 loop geom\nfix nve all nve\n"
                         f"fix learn all uma/train 2 label 5 holdout 3 lr 2e-3 print 2 write_frames f{tag}.extxyz "
                         f"checkpoint c{tag}.safetensors 10 reference eam coeff 1 1 Cu_u3.eam\n"
                         f"thermo 4\nthermo_style custom step pe f_learn[1] f_learn[3] f_learn[8] f_learn[11]\n"
                         f"run 20\n")
        # the last run: the same under the KOKKOS package (-sf kk picks pair_style uma/kk)
        log = lammps(h, r, f"in.otf{tag}", text, np_=np_, env=POTENTIALS, flags="-k on t 1 -sf kk" if kk else "")
        check(not kk or "pair uma/kk: model" in log, "-sf kk did not pick pair_style uma/kk")
        _, rows = thermo("\n".join(l for l in log.splitlines() if not l.startswith("fix uma/train")))
        check(rows[-1]["f_learn[8]"] == 5, f"{np_} ranks: expected 5 training frames, thermo says {rows[-1]}")
        check(all(math.isfinite(rows[-1][k]) for k in ("f_learn[1]", "f_learn[3]", "f_learn[11]")),
              f"{np_} ranks: non-finite training statistics {rows[-1]}")
        check(f"identical on {np_} rank(s)" in log, f"{np_} ranks: no replica check")
        final[tag] = rows[-1]
        text = open(os.path.join(h, f"f{tag}.extxyz")).read()
        check(text.count("energy=") == 5, f"{np_} ranks: expected 5 frames written (steps 0, 5, 10, 15, 20)")
        first = text.split("\n")[1]
        e0 = float(re.search(r'energy="([^"]+)"', first).group(1))
        check(abs(e0 - t["PotEng"]) < 1e-9, f"first frame energy {e0} != EAM {t['PotEng']}")
        rows0 = [l.split() for l in text.split("\n")[2:34]]
        x0 = np.array([[float(v) for v in row[1:4]] for row in rows0])
        f0 = np.array([[float(v) for v in row[4:7]] for row in rows0])
        # atom IDs depend on the rank count (create_atoms): match atoms by position
        d = x0[:, None, :] - x_eam[None, :, :]
        d -= 7.23 * np.round(d / 7.23)
        match = np.argmin((d ** 2).sum(-1), axis=1)
        check(len(set(match)) == len(match), "frame atoms do not match the EAM run's atoms one to one")
        err = np.abs(f0 - f_eam[match]).max()
        check(err < 1e-9, f"first frame forces differ from EAM by {err:.2e}")
        s0 = [float(v) for v in re.search(r'stress="([^"]+)"', first).group(1).split()]
        p = [t[f"c_p[{k}]"] for k in range(1, 7)]
        want = [-p[0], -p[3], -p[4], -p[3], -p[1], -p[5], -p[4], -p[5], -p[2]]
        err = max(abs(a - b / NKTV2P) for a, b in zip(s0, want))
        check(err < 1e-12, f"first frame stress differs from EAM's virial by {err:.2e} eV/A^3")
        if kk:   # the same MD and training as with pair_style uma on as many ranks
            for k in ("PotEng", "f_learn[1]", "f_learn[11]"):
                check(abs(rows[-1][k] - final[str(np_)][k]) <= 1e-6 * max(1.0, abs(final[str(np_)][k])),
                      f"uma/kk: {k} {rows[-1][k]} differs from pair_style uma's {final[str(np_)][k]}")
        print(f"  {np_} rank(s){' with uma/kk (-sf kk)' if kk else ''}: 5 frames labelled by EAM (first frame equals plain EAM: energy, forces, "
              f"stress), 4 trained on, 1 held out, loss {rows[-1]['f_learn[1]']:.4g}, held-out force MAE "
              f"{rows[-1]['f_learn[11]']:.4g} eV/A")


def case_learning(h, r):
    """On-the-fly training learns: 40 MD steps, EAM labels every 5 steps (every 3rd held out), 4
    optimizer steps every 2 MD steps.  The loss falls at least 5x (mean of the first three prints
    against the last three), and while the held-out set stays the same (frames 6-8: two held-out
    frames) its force MAE falls by at least 10% and ends below 0.35 eV/A (measured: 0.387 -> 0.323;
    the demo model's random weights start near 0.38)."""
    text = head() + ("velocity all create 500 4242 loop geom\nfix nve all nve\n"
                     "fix learn all uma/train 2 label 5 holdout 3 lr 2e-3 steps 4 print 1 "
                     "reference eam coeff 1 1 Cu_u3.eam\n"
                     "thermo 2\nthermo_style custom step pe f_learn[1] f_learn[8] f_learn[11]\nrun 40\n")
    log = lammps(h, r, "in.learning", text, np_=1, env=POTENTIALS)
    _, rows = thermo("\n".join(l for l in log.splitlines() if not l.startswith("fix uma/train")))
    rows = rows[1:]   # step 0: nothing trained yet
    loss = [x["f_learn[1]"] for x in rows]
    first, last = sum(loss[:3]) / 3, sum(loss[-3:]) / 3
    print(f"  loss: first three prints {first:.3g}, last three {last:.3g} ({first / last:.1f}x lower)")
    check(last < first / 5, f"the loss fell only from {first:.3g} to {last:.3g} (expected at least 5x)")
    same = [x["f_learn[11]"] for x in rows if int(x["f_learn[8]"]) in (6, 7, 8)]
    check(len(same) >= 4 and all(math.isfinite(v) for v in same), f"held-out MAE rows: {same}")
    print(f"  held-out force MAE over frames 6-8 (same held-out set): {same[0]:.4g} -> {same[-1]:.4g} eV/A")
    check(same[-1] < 0.9 * same[0] and same[-1] < 0.35,
          f"held-out force MAE {same[0]:.4g} -> {same[-1]:.4g} eV/A (expected a 10% fall, below 0.35)")


def case_restart(h, r):
    """write_restart mid-training, read_restart and the same fix: the weights after 6 steps equal an
    uninterrupted run bit for bit, and so does the MD: the restarted run's first force evaluation and
    every thermo row after it equal those of a second `run 3` in the same process (the restarted
    weights are in place before the setup's forces).  An older restart file than the state file's is
    refused: the state file holds the latest restart's weights."""
    write_frames(h)
    md = ("velocity all create 300 4242 loop geom\nfix nve all nve\nthermo 1\n"
          "thermo_style custom step pe ke press\nthermo_modify format float %.15g\n")
    fix = "fix t all uma/train 1 data frames.extxyz max_atoms 64 lr 1e-3 print 1 state t.state checkpoint {out} {n}\n"
    twice = lammps(h, r, "in.whole", head() + md + fix.format(out="whole.safetensors", n=6) + "run 3\nrun 3\n")
    lammps(h, r, "in.first", head() + md + fix.format(out="first.safetensors", n=3) + "run 3\nwrite_restart half.restart\n")
    again = (f"plugin load {PLUGIN}\nread_restart {{restart}}\npair_style uma task omat\npair_coeff * * {MODEL} Cu\n"
             "fix nve all nve\nthermo 1\nthermo_style custom step pe ke press\nthermo_modify format float %.15g\n")
    log = lammps(h, r, "in.second", again.format(restart="half.restart") + fix.format(out="second.safetensors", n=6) +
                 "run 3\n")
    check("restarted after 3 optimizer steps" in log, "the fix did not say it restarted")
    a, b = weights(h, "whole.safetensors"), weights(h, "second.safetensors")
    check(np.array_equal(a, b), f"restarted weights differ from the uninterrupted run by {np.abs(a - b).max():.2e}")
    want, got = last_run_rows(twice), last_run_rows(log)
    check(len(got) == 4, f"expected thermo rows at steps 3-6 after the restart, got {got}")
    check(got == want, "the restarted MD differs from a second run in one process:\n"
          + "\n".join(f"  {x}\n  {y}" for x, y in zip(want, got) if x != y))
    print(f"  6 steps straight = 3 steps, write_restart, read_restart, 3 steps (bit-identical weights; "
          f"thermo at steps {int(got[0]['Step'])}-{int(got[-1]['Step'])} identical to a second run)")
    lammps(h, r, "in.later", again.format(restart="half.restart") + fix.format(out="later.safetensors", n=6) +
           "run 1\nwrite_restart later.restart\n")
    out = lammps(h, r, "in.stale", again.format(restart="half.restart") + fix.format(out="stale.safetensors", n=6) +
                 "run 1\n", fail=True)
    msg = "the restart file was written after 3 optimizer steps, but the optimizer state in t.state holds 4"
    check(msg in out, f"expected the older restart file to be refused with \"{msg}\"; got:\n{out[-1500:]}")
    print(f"  an older restart file than the state file's: refused (\"{msg}\")")


def case_keep_trained(h, r):
    """The weights a fix trained stay in use: a pair_style issued again (fp64 now) keeps them, and a new
    fix after unfix starts from them, not from the model file (its checkpoint after one step of lr 1e-30
    equals the first fix's, which a start from the file's weights cannot give); pair_coeff issued again
    while a fix is defined gets that fix's weights back at the next run, and after unfix reads the file's
    weights, with a warning."""
    write_frames(h)
    pe = "thermo_style custom step pe\nthermo_modify format float %.15g\n"
    log = lammps(h, r, "in.keep", head() + pe +
                 "fix t all uma/train 1 data frames.extxyz max_atoms 64 lr 1e-3 ema 0 print 1 "
                 "checkpoint first.safetensors 3\nrun 3\nunfix t\nrun 0\n"
                 "pair_style uma task omat precision fp64\nrun 0\n"
                 "fix u all uma/train 1 data frames.extxyz max_atoms 64 lr 1e-30 ema 0 print 1 "
                 f"checkpoint second.safetensors 1\nrun 1\npair_coeff * * {MODEL} Cu\nrun 0\nunfix u\n"
                 f"pair_coeff * * {MODEL} Cu\nrun 0\n")
    # run 3, run 0 after unfix, run 0 in fp64, run 1 of the new fix, run 0 after pair_coeff with the fix
    # still defined, run 0 after unfix and pair_coeff
    runs = run_rows(log)
    check(len(runs) == 6, f"expected 6 runs' thermo output, got {len(runs)}")
    start, trained, kept, fix_back, reread = (runs[k][0]["PotEng"] for k in (0, 1, 2, 4, 5))
    tol = 1e-5 * abs(trained)   # fp32 and fp64 of the same weights (measured 4e-7 relative)
    check(abs(trained - start) > 1000 * tol, f"the trained energy {trained} is the start's {start}: nothing to tell")
    check(abs(kept - trained) <= tol, f"pair_style again: energy {kept} against the trained {trained}")
    check(abs(fix_back - kept) <= tol, f"pair_coeff again with the fix defined: energy {fix_back}, not the fix's {kept}")
    a, b = weights(h, "first.safetensors"), weights(h, "second.safetensors")
    check(np.array_equal(a, b), f"the new fix did not start from the trained weights: {np.abs(a - b).max():.2e} apart")
    check("with the weights fix uma/train trained (not the file's)" in log, "the pair style did not say it kept them")
    check("starts from the weights the pair style evaluates" in log, "the new fix did not say where it starts")
    check("reads" in log and "again: the weights fix uma/train trained are replaced" in log,
          "pair_coeff again: no warning that the trained weights are replaced")
    check(abs(reread - start) <= 1e-4 * abs(start), f"pair_coeff again: energy {reread}, the file's {start}")
    print(f"  energy: file {start:.6f}, trained {trained:.6f}, fp64 pair_style again {kept:.6f}, "
          f"pair_coeff again under the fix {fix_back:.6f}, after unfix {reread:.6f}; the new fix starts "
          "from the trained weights (checkpoints equal)")


def run_rows(log):
    """Each run's thermo rows, between its header and 'Loop time', past the fix's own log lines."""
    lines, runs = log.splitlines(), []
    for head in [i for i, l in enumerate(lines) if l.split()[:1] == ["Step"]]:
        cols, rows = lines[head].split(), []
        for l in lines[head + 1:]:
            if l.startswith("Loop time"):
                break
            if len(l.split()) == len(cols) and re.match(r"^\s*\d", l):
                rows.append(dict(zip(cols, map(float, l.split()))))
        runs.append(rows)
    return runs


def last_run_rows(log):
    return run_rows(log)[-1]


def case_final_checkpoint(h, r):
    """A run that ends between two checkpoint steps writes its last weights at its end: checkpoint every
    3 steps over runs of 5 and 1 holds the weights of 6 steps, as checkpoint every 6 over one run of 6
    does; a run that ends on a checkpoint step, takes no optimizer step, or a minimize (no training)
    writes nothing more."""
    write_frames(h)
    fix = "fix t all uma/train 1 data frames.extxyz max_atoms 64 lr 1e-3 print 1 checkpoint {out} {n}\n"
    whole = lammps(h, r, "in.whole", head() + fix.format(out="whole.safetensors", n=6) + "run 6\nrun 0\n")
    log = lammps(h, r, "in.split", head() + fix.format(out="split.safetensors", n=3) +
                 "minimize 0 0 1 1\nreset_timestep 0\nrun 5\nrun 1\nrun 0\n")
    steps = [int(s) for s in re.findall(r"checkpoint split\.safetensors at step (\d+)", log)]
    check(steps == [3, 5, 6], f"checkpoints at steps {steps}, expected [3, 5, 6] (5 and 6: the runs' ends)")
    steps = [int(s) for s in re.findall(r"checkpoint whole\.safetensors at step (\d+)", whole)]
    check(steps == [6], f"checkpoints at steps {steps}, expected [6] (its run ends on a checkpoint step)")
    a, b = weights(h, "whole.safetensors"), weights(h, "split.safetensors")
    check(np.array_equal(a, b), f"the end-of-run checkpoint differs from 6 steps by {np.abs(a - b).max():.2e}")
    print("  checkpoint 3 over runs of 5 and 1: written at steps 3, 5 and 6, equal to 6 steps straight")


def case_other_task(h, r):
    """The fix trains another task than the pair style's (pair_style uma task omat, fix ... task omol): the
    running frames take that task's charge 0 and spin 1 (the pair style cannot set them for omat), and
    train."""
    log = lammps(h, r, "in.other", head() + "velocity all create 300 4242 loop geom\nfix nve all nve\n"
                 "fix learn all uma/train 2 task omol label 2 lr 1e-3 print 2 write_frames other.extxyz "
                 "reference eam coeff 1 1 Cu_u3.eam\nrun 4\n", env=POTENTIALS)
    check("Loop time" in log, "the run did not finish")
    heads = [line for line in open(os.path.join(h, "other.extxyz")) if "Properties=" in line]
    want = ('task="omol"', 'spin="1"', 'charge="0"')
    check(len(heads) == 3 and all(all(w in l for w in want) for l in heads),
          f"{len(heads)} frames written, expected 3 with {want}: {[re.findall(r'(?:task|spin|charge)=[^ ]*', l) for l in heads]}")
    print("  pair task omat, fix task omol: 3 frames labelled with charge 0 and spin 1, trained")


def write_density_pair(host_dir, lattice=(3.615, 2.9)):
    """Two labelled 32-atom copper frames (ASE's EMT) at very different densities (an equation-of-state
    pair: the second has about twice the neighbours within the cutoff), written in both orders."""
    frames = emt_frames(lattice, 0.05, 200)
    write(os.path.join(host_dir, "dense_last.extxyz"), frames)
    write(os.path.join(host_dir, "dense_first.extxyz"), frames[::-1])


def case_frame_order(h, r):
    """An equation-of-state pair of frames (equal atom counts, very different densities) trains the same in
    either order in the data file: fp64 losses equal to every printed digit, the checkpoints' weights to 1e-9.
    Before the trainer measured each frame's edges under the engine's capacity policy, the denser frame read
    second was trained on a truncated neighbour list (losses 90% apart)."""
    write_density_pair(h)
    fix = ("fix t all uma/train 1 data {data} max_atoms 64 shuffle no lr 1e-3 ema 0 print 1 precision fp64 "
           "checkpoint {out} 2\nrun 2\n")
    runs = {}
    for name in ("dense_last", "dense_first"):
        log = lammps(h, r, "in." + name, head() + fix.format(data=name + ".extxyz", out=name + ".safetensors"))
        runs[name] = (losses(log), weights(h, name + ".safetensors"))
        print(f"  {name}: losses {runs[name][0]}")
    (la, wa), (lb, wb) = runs["dense_last"], runs["dense_first"]
    check(len(la) == len(lb) == 2, f"expected 2 loss lines each, got {la} and {lb}")
    check(la == lb, f"the frames' order changed the fp64 losses: {la} vs {lb}")
    # The batch holds both frames in the file's order, so sums over its systems run in the other order:
    # float64 rounding, which AdamW's first steps amplify where a gradient is near zero (measured
    # 4.9e-12 relative at worst; a step with lr 1e-3 moves a weight by about 1e-3).
    worst = np.max(np.abs(wa - wb) / np.maximum(np.abs(wa), 1e-6))
    check(worst < 1e-9, f"the frames' order changed the trained weights by {worst:.2e} relative (bound 1e-9)")
    print(f"  both orders: losses {la} equal as printed (10 digits), every weight within {worst:.1e} relative")


CASES = {"data_parallel": case_data_parallel, "frame_order": case_frame_order, "on_the_fly": case_on_the_fly,
         "learning": case_learning, "restart": case_restart, "final_checkpoint": case_final_checkpoint,
         "keep_trained": case_keep_trained, "other_task": case_other_task}
