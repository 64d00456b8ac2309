#!/usr/bin/env python3
"""`uma eval` on a molecule: the charge and spin labels of the file and the
--charge/--spin options reach the model, and mean the same thing.

STRUCTURE is an omol frame labelled charge=1 spin=2 (the ethanol cation),
evaluated in fp64 (JSON):
- with its labels, and with --charge 1 --spin 2 given: identical results;
- with --charge 0 (spin from the file), --spin 1 (charge from the file) and
  --charge 0 --spin 1: identical to the same frame labelled charge=0 spin=2,
  charge=1 spin=1 and charge=0 spin=1 in a file (one option leaves the other
  label alone); the frame with no charge/spin labels is charge 0, spin 1
  (the omol defaults);
- each of those three moves the energy by more than 1 eV from the labelled
  cation's and from each other's (charge and spin act separately).  Measured
  on the demo model (random weights, so the shifts are large): 72.816 eV
  labelled; charge 0: -23.108 (shift 95.9 eV), spin 1: -33.900 (106.7 eV),
  both: -26.766 (99.6 eV); the closest pair differs by 3.7 eV.

usage: check_charge_spin.py UMA MODEL STRUCTURE.extxyz
"""
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile

failures = []


def check(ok, message):
    if not ok:
        failures.append(message)


def evaluate(uma, model, path, *options):
    p = subprocess.run([uma, "eval", model, path, "--precision", "fp64", "--json", *options],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: uma eval {path} {' '.join(options)}: rc {p.returncode}, {p.stderr!r}")
    return json.loads(p.stdout)


def main():
    if len(sys.argv) != 4:
        print(__doc__.strip())
        return 2
    uma, model, structure = sys.argv[1:4]
    lines = open(structure).read().splitlines()
    n = int(lines[0])
    check(re.search(r"(^| )charge=1( |$)", lines[1]) and re.search(r"(^| )spin=2( |$)", lines[1]),
          f"{structure} is not labelled charge=1 spin=2: {lines[1]!r}")
    pairs = [(0, 2), (1, 1), (0, 1)]
    options = {(0, 2): ["--charge", "0"], (1, 1): ["--spin", "1"], (0, 1): ["--charge", "0", "--spin", "1"]}

    def relabelled(labels):
        head = re.sub(r" ?(charge|spin)=\S+", "", lines[1]) + labels
        return f"{n}\n{head}\n" + "\n".join(lines[2:2 + n]) + "\n"

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "labelled.extxyz")
        with open(path, "w") as f:
            f.write("".join(relabelled(f" charge={c} spin={s}") for c, s in pairs) + relabelled(""))
        by_label = evaluate(uma, model, path)
        base = evaluate(uma, model, structure)[0]
        explicit = evaluate(uma, model, structure, "--charge", "1", "--spin", "2")[0]
        by_option = {pair: evaluate(uma, model, structure, *options[pair])[0] for pair in pairs}

    print(f"labels charge=1 spin=2: energy {base['energy']:.6f} eV; --charge 1 --spin 2: {explicit['energy']:.6f} eV")
    check(explicit == base, "--charge 1 --spin 2 does not reproduce the file's charge=1 spin=2 result exactly")
    energies = {(1, 2): base["energy"]}
    for k, pair in enumerate(pairs):
        e = by_option[pair]["energy"]
        energies[pair] = e
        print(f"{' '.join(options[pair])}: energy {e:.6f} eV (shift {e - base['energy']:+.3f} eV); "
              f"labels charge={pair[0]} spin={pair[1]}: {by_label[k]['energy']:.6f} eV")
        check(by_option[pair] == by_label[k],
              f"{' '.join(options[pair])} differs from the frame labelled charge={pair[0]} spin={pair[1]}")
    print(f"no charge/spin labels: energy {by_label[3]['energy']:.6f} eV")
    check(by_label[3] == by_label[2], "the frame without labels is not evaluated as charge 0, spin 1")
    closest = min(abs(energies[a] - energies[b]) for a, b in itertools.combinations(energies, 2))
    print(f"closest pair of the four (charge, spin) energies: {closest:.3f} eV apart")
    check(closest > 1.0, f"two (charge, spin) pairs give energies only {closest:.2e} eV apart (need > 1 eV)")
    for f in failures:
        print("FAIL:", f)
    print("FAIL" if failures else "PASS tool.eval_molecule_labels")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
