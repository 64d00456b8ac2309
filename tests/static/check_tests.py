#!/usr/bin/env python3
"""Fails if a test source holds a test that cannot fail or does not run.

Line patterns (on the text with comments removed):
  GTEST_SKIP, DISABLED_ GoogleTest cases, CTest's DISABLED property, a
  search for the empty string, a skipped Python test, an empty
  PASS_REGULAR_EXPRESSION.

Assertions, parsed with balanced brackets across lines and split at
top-level commas (strings, char literals and comments do not count):
  EXPECT_/ASSERT_ EQ NE LT LE GT GE DOUBLE_EQ FLOAT_EQ NEAR STR(CASE)EQ/NE,
  close(a, b, ...) and assert_allclose-like calls:
      the same expression (whitespace aside) as both operands, or two
      constants (EXPECT_EQ(3, 3));
  EXPECT_/ASSERT_ TRUE and FALSE, check(cond, ...), assert(...) in C++ and
  the Python assert statement:
      a constant condition (EXPECT_TRUE(true), EXPECT_FALSE(0),
      check(True, ...), assert "text", x || true), a top-level ==, !=, <=,
      >=, < or > (the last two only with spaces around them) with the same
      expression or two constants on its sides, x.equal(x) or
      allclose(a, a), and a Python assert on a tuple.
A finding is reported at the first line of its assertion.  Scanned: tests/,
fuzz/, scripts/, and the files of bench/ and examples/ that hold assertion
code; suffixes .cpp .h .py .txt .sh .cmake; not this file.

usage: check_tests.py REPO_ROOT | --self-test
"""
import bisect
import pathlib
import re
import sys

PATTERNS = [
    ("GTEST_SKIP", re.compile(r"\bGTEST_SKIP\b")),
    ("disabled GoogleTest case", re.compile(r"\bTEST(?:_F|_P)?\s*\(\s*\w*DISABLED_|\bDISABLED_\w+\s*\)")),
    ("disabled CTest", re.compile(r"\bPROPERTIES\b[^)]*\bDISABLED\s+(?:TRUE|ON|1)\b")),
    ("search for the empty string", re.compile(r"""(?:find\(\s*""\s*\)|(?<![\w"'])(?:""|'')\s+(?:not\s+)?in\s)""")),
    ("skipped Python test", re.compile(r"\b(?:pytest\.skip|unittest\.skip|pytest\.mark\.skip)\b")),
    ("empty pass expression", re.compile(r'PASS_REGULAR_EXPRESSION\s+""')),
]
LANGS = {".cpp": "c", ".h": "c", ".py": "py", ".sh": "sh", ".txt": "cmake", ".cmake": "cmake"}
ALWAYS, IF_ASSERTING = ("tests", "fuzz", "scripts"), ("bench", "examples")
THIS = pathlib.Path(__file__).resolve()

BINARY = {"EQ", "NE", "LT", "LE", "GT", "GE", "DOUBLE_EQ", "FLOAT_EQ", "NEAR",
          "STREQ", "STRNE", "STRCASEEQ", "STRCASENE"}
ASSERTION = re.compile(r"\b(?:(?:EXPECT|ASSERT)_([A-Z_]+)\s*\(|(check|close|assert_allclose|assert_array_equal"
                       r"|assert_array_almost_equal|assert_equal)\s*\(|(assert)\b)")
LOGICAL = re.compile(r"&&|\|\||\band\b|\bor\b")
DISJUNCTION, CONJUNCTION = re.compile(r"\|\||\bor\b"), re.compile(r"&&|\band\b")
COMPARISON = re.compile(r"(?<![=!<>])==(?!=)|!=(?!=)|(?<![<>])<=(?![>=])|(?<![<>=-])>=|(?<=\s)[<>](?=\s)")
NEGATION = re.compile(r"^(?:!|not\b)")
EQUALITY_CALL = re.compile(r"\b(?:allclose|isclose|equal|equals|array_equal)\s*\(")
MODULES = {"torch", "np", "numpy", "math", "at", "std"}
NUMBER = r"[-+]?(?:0[xX][\da-fA-F']+|(?:\d[\d']*\.?[\d']*|\.\d+)(?:[eE][-+]?\d+)?)[uUlLfF]*"
STRING = r"""(?:(?:[rRbBuUL8]*"(?:[^"\\]|\\.)*"|[rRbBu]*'(?:[^'\\]|\\.)*')\s*)+"""
LITERAL = re.compile(rf"{NUMBER}|true|false|True|False|None|nullptr|NULL|{STRING}", re.S)
FALSY = re.compile(r"""[-+]?0*\.?0*(?:[eE][-+]?\d+)?[uUlLfF]*|[-+]?0[xX]0+[uUlL]*|false|False|None|nullptr|NULL|(?:[rRbBuUL8]*(?:""|'')\s*)+""")
OPEN, CLOSE = "([{", ")]}"
COMMA = re.compile(",")


def lex(text, lang):
    """(code, mask): text with comments blanked, and code with string interiors
    blanked too; both keep every offset and newline of text."""
    code, mask = list(text), list(text)

    def blank(a, b, both):
        for k in range(a, b):
            if text[k] != "\n":
                mask[k] = " "
                if both:
                    code[k] = " "

    i, n = 0, len(text)
    while i < n:
        c, prev = text[i], text[i - 1] if i else "\n"
        if lang == "c" and text.startswith(("//", "/*"), i):
            j = text.find("\n" if text[i + 1] == "/" else "*/", i + 2)
            j = n if j < 0 else j + (text[i + 1] == "*") * 2
            blank(i, j, True)
            i = j
        elif lang != "c" and c == "#" and (lang != "sh" or prev in " \t\n;("):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j, True)
            i = j
        elif c == '"' or (c == "'" and lang != "cmake" and not (lang == "c" and (prev.isalnum() or prev == "_"))):
            if prev == "\\":
                i += 1
                continue
            j = string_end(text, i, lang)
            blank(i + 1, j - 1, False)
            i = j
        else:
            i += 1
    return "".join(code), "".join(mask)


def string_end(text, i, lang):
    """The offset just past the string literal opening at text[i]."""
    q, n = text[i], len(text)
    word = re.search(r"\w*$", text[max(0, i - 3):i]).group()
    if lang == "c" and q == '"' and word in ("R", "u8R", "uR", "UR", "LR"):
        delim = text[i + 1:text.find("(", i)]
        j = text.find(")" + delim + '"', i)
        return n if j < 0 else j + len(delim) + 2
    if lang == "py" and text.startswith(q * 3, i):
        j = i + 3
        while j < n and not text.startswith(q * 3, j):
            j += 2 if text[j] == "\\" else 1
        return min(n, j + 3)
    escapes = not (lang == "sh" and q == "'")
    j = i + 1
    while j < n and text[j] != "\n":
        if text[j] == "\\" and escapes:
            j += 2
        elif text[j] == q:
            return j + 1
        else:
            j += 1
    return j  # unterminated: ends with its line


def closing(m, i):
    """Offset of the bracket closing m[i], or None."""
    depth = 0
    for j in range(i, len(m)):
        if m[j] in OPEN:
            depth += 1
        elif m[j] in CLOSE:
            depth -= 1
            if depth == 0:
                return j
    return None


def trim(c, m):
    a, b = len(m) - len(m.lstrip()), len(m.rstrip())
    return c[a:b], m[a:b]


def unwrap(c, m):
    """Trimmed, without enclosing parentheses."""
    c, m = trim(c, m)
    while m.startswith("(") and closing(m, 0) == len(m) - 1:
        c, m = trim(c[1:-1], m[1:-1])
    return c, m


def split(c, m, sep):
    """Split the (code, mask) pair where sep matches the mask outside brackets."""
    parts, start, depth, depths = [], 0, 0, []
    for ch in m:
        depths.append(depth)
        depth += (ch in OPEN) - (ch in CLOSE)
    for hit in sep.finditer(m):
        if depths[hit.start()] == 0 and hit.start() >= start:
            parts.append((c[start:hit.start()], m[start:hit.start()]))
            start = hit.end()
    parts.append((c[start:], m[start:]))
    return parts


def norm(c):
    return re.sub(r"\s+", "", c)


def literal(c):
    return LITERAL.fullmatch(c.strip()) is not None


def same_or_constant(a, b):
    """The reason two operands make a comparison that cannot fail, or None."""
    (ca, _), (cb, _) = unwrap(*a), unwrap(*b)
    if ca and norm(ca) == norm(cb):
        return "both sides the same"
    if literal(ca) and literal(cb):
        return "compares two constants"
    return None


def condition(c, m, want_true):
    """The reason a condition asserted true (or false) is a tautology, or None."""
    c, m = unwrap(c, m)
    if not c:
        return None
    for part in split(c, m, DISJUNCTION if want_true else CONJUNCTION):
        pc, _ = unwrap(*part)
        if literal(pc) and (FALSY.fullmatch(norm(pc)) is None) == want_true:
            return "constant condition"
    for clause in split(c, m, LOGICAL):
        cc, cm = unwrap(*clause)
        while NEGATION.match(cm):
            k = NEGATION.match(cm).end()
            cc, cm = unwrap(cc[k:], cm[k:])
        sides = split(cc, cm, COMPARISON)
        for a, b in zip(sides, sides[1:]):
            why = same_or_constant(a, b)
            if why:
                return why
        if len(sides) == 1:
            why = equality_call(cc, cm)
            if why:
                return why
    return None


def equality_call(c, m):
    """x.equal(x), allclose(a, a), torch::equal(a, a) as a whole clause."""
    for hit in EQUALITY_CALL.finditer(m):
        paren = m.index("(", hit.start())
        if closing(m, paren) != len(m) - 1:
            continue
        args = split(c[paren + 1:-1], m[paren + 1:-1], COMMA)
        receiver = c[:hit.start()]
        if receiver.endswith(".") and receiver[:-1].strip() not in MODULES:
            return same_or_constant((receiver[:-1], m[:hit.start() - 1]), args[0])
        if len(args) >= 2:
            return same_or_constant(args[0], args[1])
    return None


def statement_end(m, i):
    """End of the Python statement starting at m[i]: a newline or ';' outside brackets."""
    depth = 0
    for j in range(i, len(m)):
        ch = m[j]
        depth += (ch in OPEN) - (ch in CLOSE)
        if depth <= 0 and (ch == ";" or (ch == "\n" and m[j - 1] != "\\")):
            return j
    return len(m)


def assertions(code, mask, lang):
    """(offset, text, reason) for each assertion that cannot fail."""
    found = []
    for hit in ASSERTION.finditer(mask):
        macro, call, stmt = hit.groups()
        if stmt and lang == "c":  # C/C++ assert(...) is a call
            if not re.match(r"\s*\(", mask[hit.end():]):
                continue
            call, stmt = "assert", None
        if stmt:  # the Python assert statement: cond [, message]
            end = statement_end(mask, hit.end())
            c, m = code[hit.end():end], mask[hit.end():end]
            args = split(c, m, COMMA)
            if len(args) == 1 and m.strip().startswith("(") and len(split(*unwrap(c, m), COMMA)) > 1:
                why = "assert on a tuple (always true)"
            else:
                why = condition(*args[0], True)
        else:
            paren = mask.index("(", hit.start())
            end = closing(mask, paren)
            if end is None:
                continue
            c, m = code[paren + 1:end], mask[paren + 1:end]
            args = split(c, m, COMMA)
            end += 1
            if macro in BINARY or call not in (None, "check", "assert"):
                why = same_or_constant(args[0], args[1]) if len(args) >= 2 else None
            elif macro in ("TRUE", "FALSE"):
                why = condition(c, m, macro == "TRUE")
            elif call == "check":
                why = condition(*args[0], True)
            elif call == "assert":
                why = condition(c, m, True)
            else:
                why = None  # EXPECT_THROW and the like
        if why:
            found.append((hit.start(), " ".join(code[hit.start():end].split())[:160], why))
    return found


def scan_text(text, lang="c", need_assertion=False):
    """[(line, reason, text)] for one file's text."""
    code, mask = lex(text, lang)
    starts = [0] + [k + 1 for k, ch in enumerate(text) if ch == "\n"]
    line_of = lambda offset: bisect.bisect_right(starts, offset)
    found = [(line_of(at), why, what) for at, what, why in assertions(code, mask, lang)]
    if need_assertion and not found and not ASSERTION.search(mask):
        return []
    lines = text.splitlines()
    seen = set()
    for name, pattern in PATTERNS:
        for hit in pattern.finditer(code):
            line = line_of(hit.start())
            if (line, name) not in seen:
                seen.add((line, name))
                found.append((line, name, lines[line - 1].strip()))
    return sorted(found)


def files(root):
    for folder in ALWAYS + IF_ASSERTING:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in LANGS and path.is_file() and path.resolve() != THIS:
                yield path, folder in IF_ASSERTING


def scan(root):
    failures = 0
    for path, need_assertion in files(root):
        for lineno, name, line in scan_text(path.read_text(errors="replace"), LANGS[path.suffix], need_assertion):
            print(f"FAIL: {path.relative_to(root)}:{lineno}: {name}: {line}")
            failures += 1
    print("test-source scan: all passed" if failures == 0 else f"test-source scan: {failures} finding(s)")
    return 1 if failures else 0


BAD = [  # (language, snippet): each must be flagged
    ("c", '  GTEST_SKIP() << "later";'),
    ("c", "TEST(Engine, DISABLED_Fast) {"),
    ("c", "TEST_F(Suite, DISABLED_Slow) {"),
    ("cmake", "set_tests_properties(x PROPERTIES DISABLED TRUE)"),
    ("cmake", "set_tests_properties(x PROPERTIES\n    TIMEOUT 60\n    DISABLED ON)"),
    ("c", "  EXPECT_TRUE(true);"),
    ("c", "  EXPECT_TRUE(1);"),
    ("c", "  ASSERT_FALSE(false);"),
    ("c", "  EXPECT_FALSE(0) << \"never\";"),
    ("c", "  EXPECT_EQ(checked, checked);"),
    ("c", "  EXPECT_EQ(3, 3);"),
    ("c", "  EXPECT_LT(1, 2);"),
    ("c", "  EXPECT_NEAR(r.energy[0], r.energy[0], 1e-9);"),
    ("c", "  EXPECT_NEAR(f(a), f( a ), tol);"),
    ("c", "  EXPECT_EQ(a.size(0), a.size(0));"),
    ("c", "  EXPECT_NEAR(out.forces[i][k],\n              out.forces[i][k],\n              1e-9);"),
    ("c", "  EXPECT_EQ(\n      engine.evaluate({a}).energy.size(0),\n      engine.evaluate({a}).energy.size(0));"),
    ("c", "  EXPECT_STREQ(name.c_str(), name.c_str());"),
    ("c", "  EXPECT_TRUE(1 == 1);"),
    ("c", "  EXPECT_TRUE(a.numel() == a.numel());"),
    ("c", "  EXPECT_TRUE(x >= x) << \"x\";"),
    ("c", "  ASSERT_TRUE(ok && n != n);"),
    ("c", "  EXPECT_TRUE(x.equal(x));"),
    ("c", "  EXPECT_TRUE(torch::allclose(a, a));"),
    ("c", "  EXPECT_FALSE(!(out.energy ==\n                 out.energy));"),
    ("c", "  EXPECT_TRUE(found || true);"),
    ("c", "  assert(n == n);"),
    ("c", '  EXPECT_NE(text.find(""), std::string::npos);'),
    ("c", '  auto s = "// not a comment"; EXPECT_TRUE(true);'),
    ("c", "#include <gtest/gtest.h>\n/* a comment */ EXPECT_TRUE(true);"),
    ("c", '  EXPECT_EQ(s, s) << "quote \\" and \', comma";'),
    ("py", '  check("" in out, "message")'),
    ("py", '    check(True, "always")'),
    ("py", '    check(a == a, f"{a} vs {b}")'),
    ("py", '    check(rows[-1]["pe"]\n          == rows[-1]["pe"],\n          "energy")'),
    ("py", '    check(x < x, "strict")'),
    ("py", '    check(1 == 1, "one")'),
    ("py", '    check(np.allclose(e, e), "energies")'),
    ("py", "    close(ref, ref, 1e-9, \"forces\")"),
    ("py", "    close(lmp_forces,\n          lmp_forces, tol, 'forces')"),
    ("py", "    assert True"),
    ("py", "    assert x == x, 'same'"),
    ("py", "    assert (a ==\n            a)"),
    ("py", '    assert "always"'),
    ("py", '    assert (n > 0, "a tuple")'),
    ("py", "    x = '#'; assert True"),
    ("py", "@pytest.mark.skip"),
    ("sh", "python3 - <<'EOF'\ncheck(n == n, 'x')\nEOF"),
    ("cmake", 'set_tests_properties(t PROPERTIES PASS_REGULAR_EXPRESSION "")'),
]
GOOD = [  # (language, snippet): none may be flagged
    ("c", "  EXPECT_EQ(stats.skipped, 1);"),
    ("c", "  EXPECT_EQ(checked, 6);"),
    ("c", "  EXPECT_NEAR(a.energy[0], b.energy[0], 1e-9);"),
    ("c", "  EXPECT_EQ(a.size(0), b.size(0));"),
    ("c", "  EXPECT_NEAR(out.forces[i][k],\n              ref.forces[i][k],\n              1e-9);"),
    ("c", "  EXPECT_TRUE(torch::allclose(a, b));"),
    ("c", "  EXPECT_TRUE(x.equal(y));"),
    ("c", "  EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin()));"),
    ("c", '  EXPECT_LT(x, y) << "a, a";'),
    ("c", '  EXPECT_TRUE(a == b) << "a == a";'),
    ("c", "  std::cout << (a == a) << std::endl;"),
    ("c", "  EXPECT_TRUE(out.size() < limit);"),
    ("c", "  EXPECT_TRUE(static_cast<int>(n) >= static_cast<int>(m));"),
    ("c", "  EXPECT_TRUE(std::vector<int>{1, 2} == v);"),
    ("c", "  EXPECT_TRUE(p->next == q->next);"),
    ("c", "  EXPECT_FALSE(true) << \"unreachable\";"),
    ("c", "  if (bad) EXPECT_TRUE(false);"),
    ("c", "  EXPECT_THROW(f(a, a), std::runtime_error);"),
    ("c", '  expect_error([&] { f(a, a); }, "msg");'),
    ("c", '  expect_error([&] { load_model(path); }, "lacks tensor \'a, a\'");'),
    ("c", "  // EXPECT_TRUE(true);\n  /* EXPECT_EQ(a,\n     a); */"),
    ("c", "  const char c = '('; EXPECT_EQ(c, d);"),
    ("c", "  const int big = 1'000'000; EXPECT_EQ(big, n);"),
    ("c", '  auto h = R"({"a": [1, 2]})"; EXPECT_EQ(h, g);'),
    ("c", '  EXPECT_NE(text.find("x"), std::string::npos);'),
    ("c", "  ASSERT_EQ(n, 2);\n  EXPECT_EQ(m, 2);"),
    ("py", '  check(msg in out, f"{name}: expected")'),
    ("py", '  check(a == b, f"x {a} == {a}")'),
    ("py", '  check(len(la) == len(lb) == 3, f"{a}/{b}: expected 3 loss lines")'),
    ("py", '  check(not kk or "pair uma/kk" in log, "-sf kk")'),
    ("py", "  close(lmp, ref, 1e-9, 'a, a')"),
    ("py", "  def close(a, b, tol, what):\n      check(err <= tol, 'x')"),
    ("py", "  f.close()"),
    ("py", '  assert metadata["format"] == "lammps-uma", metadata.get("format")'),
    ("py", '  """assert (uploads, host reads) are the whole truth"""'),
    ("py", "  assert False, 'unreachable'"),
    ("py", "  # check(True, 'x')"),
    ("py", '  s = "" if x else y'),
    ("sh", 'echo "$#" ${#arr[@]}  # check(True, "x")'),
    ("sh", "python3 -c 'import sys; check(a == b, \"x\")'"),
]


def self_test():
    failures = 0
    for lang, text in BAD:
        if not scan_text(text, lang):
            print(f"FAIL: self-test: not flagged: {text!r}")
            failures += 1
    for lang, text in GOOD:
        if scan_text(text, lang):
            print(f"FAIL: self-test: flagged: {text!r} ({scan_text(text, lang)[0][1]})")
            failures += 1
    at = scan_text("int x;\n\n  EXPECT_NEAR(a,\n    a, 1e-9);\n", "c")
    if [line for line, _, _ in at] != [3]:
        print(f"FAIL: self-test: a two-line assertion is reported at {at}, not line 3")
        failures += 1
    print("self-test: all passed" if failures == 0 else f"self-test: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__.strip())
        sys.exit(2)
    sys.exit(self_test() if sys.argv[1] == "--self-test" else scan(pathlib.Path(sys.argv[1]).resolve()))
