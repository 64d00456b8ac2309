#!/usr/bin/env python3
"""pair_style uma and fix uma/train through real LAMMPS (4 Jul 2026, in the project's sid root).

Each case writes LAMMPS inputs, runs the `lmp` executable (1, 2 or 4 MPI
ranks) with umaplugin.so, and checks what LAMMPS reports -- energies, forces,
compute pe/atom, compute pressure, compute stress/atom -- against the engine
evaluating the whole system (`uma eval --json`, built with the same toolchain).
The cases are the CASES tables of the modules in SUITES; tests/CMakeLists.txt
registers one ctest per case from --list (lammps.pair_uma.CASE and
lammps.fix_uma_train.CASE).  The harness they share is harness.py.

usage: run_case.py [--suite pair|train] ROOT CASE   (ROOT: the sid root; the suite: pair unless given)
       run_case.py --list [pair|train]             the cases, one a line (without a suite: SUITE CASE)
"""
import ast
import importlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# suite -> (its modules here, in the order of the listing; the prefix of its work folders in the root)
SUITES = {
    "pair": (("cases_ranks_halo", "cases_kokkos", "cases_md_physics", "cases_inputs_errors", "cases_examples",
              "cases_gpu_path", "cases_workflows"), ""),
    "train": (("cases_fix_train", "cases_fix_train_errors", "cases_gate"), "train_"),
}


def listed(suite):
    """The suite's case names, read from the source of its CASES tables: listing imports no
    module (neither numpy nor anything of the root), so that CMake can call it at configure time."""
    names = []
    for module in SUITES[suite][0]:
        path = os.path.join(HERE, module + ".py")
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        tables = [n.value for n in tree.body if isinstance(n, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == "CASES" for t in n.targets)]
        if len(tables) != 1 or not isinstance(tables[0], ast.Dict) or \
                not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in tables[0].keys):
            sys.exit(f"{path}: expected one CASES table, a dict literal with the case names as strings")
        names += [k.value for k in tables[0].keys]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        sys.exit(f"suite {suite}: cases defined twice: {' '.join(twice)}")
    return names


def imported(suite):
    """The suite's cases, name -> function, imported from its modules."""
    cases = {}
    for module in SUITES[suite][0]:
        cases.update(importlib.import_module(module).CASES)
    if list(cases) != listed(suite):
        sys.exit(f"suite {suite}: the imported CASES ({' '.join(cases)}) are not the listed ones")
    return cases


def main(argv):
    if argv[1:2] == ["--list"]:
        if len(argv) > 3 or argv[2:] and argv[2] not in SUITES:
            sys.exit(__doc__)
        for suite in argv[2:] or SUITES:
            for name in listed(suite):
                print(name if argv[2:] else f"{suite} {name}")
        return
    suite = "pair"
    if argv[1:2] == ["--suite"]:
        suite = argv[2] if len(argv) > 2 else None
        argv = argv[:1] + argv[3:]
    if suite not in SUITES:
        sys.exit(__doc__ + "suites: " + " ".join(SUITES))
    if len(argv) != 3 or argv[2] not in listed(suite):
        sys.exit(__doc__ + f"cases ({suite}): " + " ".join(listed(suite)))
    import harness
    harness.run_case(imported(suite), argv[2], argv[1], SUITES[suite][1])


if __name__ == "__main__":
    main(sys.argv)
