#!/usr/bin/env python3
"""Fails if a test source holds a test that cannot fail or does not run:
GTEST_SKIP, DISABLED_ tests, CTest's DISABLED property, tautological
assertions (EXPECT_TRUE(true), the same expression on both sides of a
comparison), a search for the empty string, or a skipped Python check.

usage: check_tests.py REPO_ROOT | --self-test
"""
import pathlib
import re
import sys

PATTERNS = [
    ("GTEST_SKIP", re.compile(r"\bGTEST_SKIP\b")),
    ("disabled GoogleTest case", re.compile(r"\bTEST(?:_F|_P)?\s*\(\s*\w*DISABLED_|\bDISABLED_\w+\s*\)")),
    ("disabled CTest", re.compile(r"\bPROPERTIES\b[^)]*\bDISABLED\s+(?:TRUE|ON|1)\b")),
    ("constant assertion",
     re.compile(r"\b(?:EXPECT|ASSERT)_(?:TRUE\s*\(\s*(?:true|1)\s*\)|FALSE\s*\(\s*(?:false|0)\s*\))")),
    ("both sides the same",
     re.compile(r"\b(?:EXPECT|ASSERT)_(?:EQ|NE|LE|GE|DOUBLE_EQ|FLOAT_EQ|NEAR)\s*\(\s*([^,()]+?)\s*,\s*\1\s*[,)]")),
    ("search for the empty string", re.compile(r"""(?:find\(\s*""\s*\)|(?<![\w"'])(?:""|'')\s+(?:not\s+)?in\s)""")),
    ("constant Python check", re.compile(r"\b(?:check|assert)\s*\(?\s*True\b")),
    ("skipped Python test", re.compile(r"\b(?:pytest\.skip|unittest\.skip|pytest\.mark\.skip)\b")),
    ("empty pass expression", re.compile(r'PASS_REGULAR_EXPRESSION\s+""')),
]
SUFFIXES = {".cpp", ".h", ".py", ".txt", ".sh"}
THIS = pathlib.Path(__file__).resolve()


def scan_text(text):
    found = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for name, pattern in PATTERNS:
            if pattern.search(line):
                found.append((lineno, name, line.strip()))
    return found


def scan(root):
    failures = 0
    for path in sorted((root / "tests").rglob("*")):
        if path.suffix not in SUFFIXES or path.resolve() == THIS or not path.is_file():
            continue
        for lineno, name, line in scan_text(path.read_text(errors="replace")):
            print(f"FAIL: {path.relative_to(root)}:{lineno}: {name}: {line}")
            failures += 1
    print("test-source scan: all passed" if failures == 0 else f"test-source scan: {failures} finding(s)")
    return 1 if failures else 0


def self_test():
    bad = [
        "  GTEST_SKIP() << \"later\";",
        "TEST(Engine, DISABLED_Fast) {",
        "TEST_F(Suite, DISABLED_Slow) {",
        "set_tests_properties(x PROPERTIES DISABLED TRUE)",
        "  EXPECT_TRUE(true);",
        "  ASSERT_FALSE(false);",
        "  EXPECT_EQ(checked, checked);",
        "  EXPECT_NEAR(r.energy[0], r.energy[0], 1e-9);",
        "  check(\"\" in out, \"message\")",
        "  EXPECT_NE(text.find(\"\"), std::string::npos);",
        "    check(True, \"always\")",
        "@pytest.mark.skip",
        'set_tests_properties(t PROPERTIES PASS_REGULAR_EXPRESSION "")',
    ]
    good = [
        "  EXPECT_EQ(stats.skipped, 1);",
        "  EXPECT_EQ(checked, 6);",
        "  EXPECT_NEAR(a.energy[0], b.energy[0], 1e-9);",
        "  check(msg in out, f\"{name}: expected\")",
        "  EXPECT_TRUE(torch::allclose(a, b));",
        "  expect_error([&] { f(); }, \"no atoms\");",
        '  s = "" if x else y',
    ]
    failures = 0
    for line in bad:
        if not scan_text(line):
            print(f"FAIL: self-test: not flagged: {line}")
            failures += 1
    for line in good:
        if scan_text(line):
            print(f"FAIL: self-test: flagged: {line} ({scan_text(line)[0][1]})")
            failures += 1
    print("self-test: all passed" if failures == 0 else f"self-test: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__.strip())
        sys.exit(2)
    sys.exit(self_test() if sys.argv[1] == "--self-test" else scan(pathlib.Path(sys.argv[1]).resolve()))
