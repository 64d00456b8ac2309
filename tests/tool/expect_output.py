#!/usr/bin/env python3
"""Runs a command; passes only if it exits with the expected code and its
output (stdout and stderr together) matches the regular expression (searched,
with '.' matching newlines).  Unlike CTest's PASS_REGULAR_EXPRESSION, a crash
or a wrong exit code after the right text fails.

usage: expect_output.py CODE REGEX -- COMMAND [ARG ...]
"""
import re
import subprocess
import sys


def main():
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        print(__doc__.strip())
        return 2
    code, pattern, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[4:]
    p = subprocess.run(cmd, capture_output=True, text=True)
    output = p.stdout + p.stderr
    matched = re.search(pattern, output, re.DOTALL) is not None
    print(output[-3000:])
    print(f"exit code {p.returncode} (expected {code}); output {'matches' if matched else 'does not match'} {pattern!r}")
    ok = p.returncode == code and matched
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
