"""The uncertainty gate of fix uma/train (`label auto THRESHOLD`, `committee`, `check`,
`min_interval`, `max_interval`, `holdout_data`, `calibration`) through real LAMMPS.

CASES: name -> case(host_dir, root_dir), run by run_case.py --suite train (each a ctest,
lammps.fix_uma_train.NAME).
"""
import os
import re

import numpy as np

import harness
from cases_fix_train import HEAD, POTENTIALS, head
from harness import MODEL, PLUGIN, check, in_root, lammps, thermo_runs

# EAM frames through the states the gated example visits (300, 600, 900 K, then a vacancy at 900 K),
# labelled as ../../examples/cu_otf/heldout_frames.py labels them.
EAM_STATES = HEAD.split("pair_style")[0].replace("displace_atoms all random 0.1 0.1 0.1 777 units box\n", "") + """\
pair_style eam
pair_coeff 1 1 Cu_u3.eam
timestep 0.002
compute virial all pressure NULL virial
variable pe equal pe
velocity all create 300.0 51413 loop geom
fix bath all nvt temp 300.0 300.0 0.1
run 200
fix out all print 50 "$(step) $(v_pe:%.15g) $(c_virial[1]:%.15g) $(c_virial[2]:%.15g) $(c_virial[3]:%.15g) $(c_virial[4]:%.15g) $(c_virial[5]:%.15g) $(c_virial[6]:%.15g)" file heldout.thermo screen no
dump frames all custom 50 heldout.dump id type x y z fx fy fz
dump_modify frames sort id format float %.15g
run 250
fix bath all nvt temp 600.0 600.0 0.1
run 250
fix bath all nvt temp 900.0 900.0 0.1
run 250
group gone id 11
delete_atoms group gone compress no
run 250
"""


def heldout_frames(h, r):
    """21 labelled EAM frames: 6 at 300 K (steps 200-450), then 5 at 600 K, 5 at 900 K, 5 with the vacancy."""
    lammps(h, r, "in.eam_states", EAM_STATES.format(plugin=PLUGIN), env=POTENTIALS)
    in_root(f"cd {r} && python3 {harness.SRC}/examples/cu_otf/heldout_frames.py")
    n = open(os.path.join(h, "heldout.extxyz")).read().count("energy=")
    check(n == 21, f"expected 21 held-out frames, got {n}")


def checks(log, every):
    """Per check step: (step, uncertainty f_ID[13], reference calls f_ID[14]); the first thermo row
    (the run's start, not a check) comes first."""
    table = "\n".join(line for line in log.splitlines() if not line.startswith("fix uma/train"))
    rows = [row for run in thermo_runs(table) for row in run]
    seen = {}
    for row in rows:
        step = int(row["Step"])
        if step % every == 0:
            seen.setdefault(step, (row["f_t[13]"], int(row["f_t[14]"])))
    return sorted((s, u, c) for s, (u, c) in seen.items())


def decisions(log, every):
    """The steps the gate labelled (reference calls rose) and the uncertainty at each check."""
    trace = checks(log, every)
    labelled, calls = [], trace[0][2]   # at the start: the frames labelled so far (1 at setup)
    for step, _, c in trace[1:]:
        if c > calls:
            labelled.append(step)
        calls = c
    return labelled, {s: u for s, u, _ in trace[1:]}


GATED = ("fix t all uma/train 1 label auto {threshold} check 2 min_interval 4 max_interval 8 lr 2e-3 max_atoms {atoms} "
         "print 4 {extra} reference eam coeff 1 1 Cu_u3.eam\n"
         "thermo 2\nthermo_style custom step pe f_t[13] f_t[14]\nthermo_modify format float %.15g\n")
THRESHOLD = 0.004


def case_gate_decisions(h, r):
    """label auto on 1 and 2 ranks: the committee is evaluated on every check step (2); a frame is
    labelled when its uncertainty exceeds the threshold and at least min_interval (4) steps have
    passed, or when max_interval (8) steps have passed, and at no other step; the log says which.
    On 2 ranks rank 0 evaluates and every rank takes the decision it broadcasts: each rank adds the
    frames it decided to label, and the checkpoint's hash check finds the same weights on both."""
    base = head() + "velocity all create 500 4242 loop geom\nfix nve all nve\n"
    for np_ in (1, 2):
        log = lammps(h, r, f"in.gate{np_}", base + GATED.format(threshold=THRESHOLD, atoms=32,
                                                                extra="checkpoint gate.safetensors 40") +
                     "run 40\n", np_=np_, env=POTENTIALS)
        labelled, u = decisions(log, 2)
        print(f"  {np_} rank(s): labelled at steps {labelled}")
        print("    uncertainty per check: " + " ".join(f"{s}:{v:.3g}" for s, v in sorted(u.items())))
        gated = [int(s) for s in re.findall(r"step (\d+) labelled: uncertainty", log)]
        forced = [int(s) for s in re.findall(r"step (\d+) labelled: \d+ steps since the last label", log)]
        check(sorted(gated + forced) == labelled, f"log lines (gate {gated}, forced {forced}) != label steps {labelled}")
        check(gated and forced, f"expected both gated and forced labels in 40 steps: gated {gated}, forced {forced}")
        check(sorted(u) == list(range(2, 41, 2)), f"checks at steps {sorted(u)}, expected every 2nd step")
        last = 0
        for s in sorted(u):
            since = s - last
            want = (u[s] > THRESHOLD and since >= 4) or since >= 8
            check((s in labelled) == want, f"step {s}: uncertainty {u[s]:.4g}, {since} steps since the last label: "
                                           f"{'labelled' if s in labelled else 'not labelled'}, expected the opposite")
            if s in labelled:
                last = s
        check(f"identical on {np_} rank(s)" in log, f"{np_} ranks: the checkpoint's hash check did not pass")
        print(f"    {len(gated)} labels by the threshold, {len(forced)} by max_interval, none elsewhere; "
              f"weights identical on {np_} rank(s)")


def case_gate_restart(h, r):
    """write_restart in the middle of a gated run, then read_restart with the frames labelled so far
    given back as data: training continues exactly (the loss of the first print after the restart
    equals the uninterrupted run's: optimizer, committee and sampler state restored, the epoch's
    batches planned from the frames it was first planned from), and the second half labels at the
    same steps.  The uncertainties agree to 1e-2 relative, not exactly: LAMMPS recomputes the forces
    at the restart step with the updated weights, where the uninterrupted run used the weights from
    before that step's optimizer step, so the two trajectories differ slightly."""
    base = head() + "velocity all create 500 4242 loop geom\nfix nve all nve\n"
    fix = GATED.format(threshold=THRESHOLD, atoms=32, extra="state t.state {more}")
    whole = lammps(h, r, "in.whole", base + fix.format(more="") + "run 40\n", env=POTENTIALS)
    lammps(h, r, "in.half", base + fix.format(more="write_frames half.extxyz") + "run 20\nwrite_restart half.restart\n",
           env=POTENTIALS)
    second = lammps(h, r, "in.second", f"plugin load {PLUGIN}\nread_restart half.restart\n"
                    f"pair_style uma task omat\npair_coeff * * {MODEL} Cu\nfix nve all nve\n" +
                    fix.format(more="data half.extxyz") + "run 20\n", env=POTENTIALS)
    check("restarted after 20 optimizer steps" in second, "the fix did not say it restarted")
    loss = r"fix uma/train: step 24 optimizer step 24 frames \d+ loss (\S+)"
    la, lb = re.search(loss, whole).group(1), re.search(loss, second).group(1)
    check(la == lb, f"loss of steps 21-24: {lb} after the restart, {la} uninterrupted")
    a, ua = decisions(whole, 2)
    b, ub = decisions(second, 2)
    a2 = [s for s in a if s > 20]
    check(b == a2, f"after the restart labelled at {b}; the uninterrupted run at {a2}")
    worst = max(abs(ub[s] - ua[s]) / ua[s] for s in ub)
    check(worst < 1e-2, f"uncertainties after the restart differ by up to {worst:.2e} relative")
    print(f"  loss of steps 21-24 equal ({la}); steps 21-40 labelled at {b} in both runs; "
          f"uncertainties within {worst:.1e} relative")


def case_gate_calibration(h, r):
    """On held-out EAM frames in states the training never saw (600 K, 900 K, a vacancy; trained at
    300 K only), the committee's uncertainty ranks the per-frame force error: Spearman's rank
    correlation over the 21 frames, logged by the fix and recomputed here from its calibration file, is
    at least 0.5 after 100 training steps (measured: 0.857 after 50 steps, 0.870 after 100; 0.71 after 200)."""
    heldout_frames(h, r)
    text = (head() + "velocity all create 300 4242 loop geom\nfix bath all langevin 300 300 0.05 48279\n"
            "fix nve all nve\n"
            "fix t all uma/train 1 label 5 committee 4 lr 3e-3 warmup 20 energy_coef 5 forces_coef 10 stress_coef 20 "
            "ema 0 print 50 holdout_data heldout.extxyz calibration calibration.txt reference eam coeff 1 1 Cu_u3.eam\n"
            "thermo 50\nthermo_style custom step pe f_t[11] f_t[15]\nrun 100\n")
    log = lammps(h, r, "in.calibration", text, env=POTENTIALS)
    rho = [float(v) for v in re.findall(r"held-out rank correlation of uncertainty and force MAE (\S+) \(21 frames\)",
                                        log)]
    check(len(rho) == 2, f"expected two calibration lines, got {rho}")
    rows = np.loadtxt(os.path.join(h, "calibration.txt"))
    last = rows[rows[:, 0] == 100]
    check(len(last) == 21, f"calibration file: {len(last)} rows at step 100")

    def ranks(v):
        order = np.argsort(v, kind="stable")
        out = np.empty(len(v))
        out[order] = np.arange(1, len(v) + 1)
        for x in np.unique(v):   # ties: mean rank
            out[v == x] = out[v == x].mean()
        return out
    mine = np.corrcoef(ranks(last[:, 3]), ranks(last[:, 5]))[0, 1]
    check(abs(mine - rho[-1]) < 2e-3, f"rank correlation from the file {mine:.4f} != the fix's {rho[-1]:.4f}")
    by_state = [last[0:6], last[6:11], last[11:16], last[16:21]]
    print("  per state (300 K, 600 K, 900 K, vacancy): mean uncertainty " +
          ", ".join(f"{s[:, 3].mean():.4g}" for s in by_state) + " eV; mean force MAE " +
          ", ".join(f"{s[:, 5].mean():.4g}" for s in by_state) + " eV/A")
    check(rho[-1] >= 0.5, f"rank correlation of the uncertainty with the held-out force error {rho[-1]:.3f} < 0.5")
    print(f"  Spearman rank correlation on 21 held-out frames: {rho[-1]:.3f} after 100 steps "
          f"({rho[0]:.3f} after 50)")


def case_gate_refusals(h, r):
    """Settings the gate cannot honour are refused with a message that says why."""
    cases = [
        ("no_reference", "fix t all uma/train 1 label auto 0.01\n", "label auto needs a reference pair style"),
        ("no_committee", "fix t all uma/train 1 label auto 0.01 committee 0 reference eam coeff 1 1 Cu_u3.eam\n",
         "label auto needs a committee"),
        ("one_member", "fix t all uma/train 1 label 5 committee 1 reference eam coeff 1 1 Cu_u3.eam\n",
         "committee must be 0 (none) or K >= 2"),
        ("threshold", "fix t all uma/train 1 label auto -1 reference eam coeff 1 1 Cu_u3.eam\n",
         "THRESHOLD must be > 0"),
        ("not_multiple", "fix t all uma/train 1 label auto 0.01 check 3 max_interval 10 "
                         "reference eam coeff 1 1 Cu_u3.eam\n", "max_interval 10 must be a multiple of check 3"),
        ("below_min", "fix t all uma/train 1 label auto 0.01 check 2 min_interval 10 max_interval 4 "
                      "reference eam coeff 1 1 Cu_u3.eam\n", "max_interval 4 is below min_interval 10"),
        ("fixed_interval", "fix t all uma/train 1 label 5 max_interval 10 reference eam coeff 1 1 Cu_u3.eam\n",
         "apply to 'label auto THRESHOLD' only"),
        ("calibration", "fix t all uma/train 1 label 5 calibration c.txt reference eam coeff 1 1 Cu_u3.eam\n",
         "calibration FILE needs a committee"),
    ]
    for name, fix, msg in cases:
        out = lammps(h, r, "in." + name, head() + fix + "run 1\n", env=POTENTIALS, fail=True)
        check(msg in out, f"{name}: expected the error to say \"{msg}\"; got:\n{out[-1500:]}")
        print(f"  {name}: refused with \"{msg}\"")


CASES = {"gate_decisions": case_gate_decisions, "gate_restart": case_gate_restart,
         "gate_calibration": case_gate_calibration, "gate_refusals": case_gate_refusals}
