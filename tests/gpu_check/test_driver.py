#!/usr/bin/env python3
"""The fast test of the GPU check (scripts/gpu_check/), with no GPU, no build and no process of
the real machine's: the stage selection, limits and budget (test_limits.py), whole runs of every
mode on a fake machine that answers each command as the GPU machine did (test_runs.py), every
reader on recorded outputs of earlier GPU runs (test_reports.py), the pip route's stage and
what --prepare packs (test_pip_route.py) and the command line (test_cli.py).  Prints "gpu check
driver: all passed", or exits 1.

usage: test_driver.py
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
MODULES = ("test_limits", "test_runs", "test_pip_route", "test_reports", "test_cli")


def main():
    suite = unittest.defaultTestLoader.loadTestsFromNames(MODULES)
    result = unittest.TextTestRunner(verbosity=1).run(suite)
    if not result.wasSuccessful():
        print("gpu check driver: FAILED (%d failures, %d errors)" % (len(result.failures), len(result.errors)))
        return 1
    print("gpu check driver: all passed (%d tests)" % result.testsRun)
    return 0


if __name__ == "__main__":
    sys.exit(main())
