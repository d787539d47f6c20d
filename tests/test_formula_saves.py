"""Every backward formula reads only what its row says it saves (Note [saved
tensor check], csrc/autograd/node.c). At run time a read of a slot never saved
raises SystemError; this test finds such a formula from the source, without
running it: for each row of csrc/ops/ops.def whose backward column is
BW(fn, saves, ...) / BW_NAMED(fn, saves, ...) it collects the IN(k) /
input(s, n, k) / OUT(j) reads of fn (in csrc/autograd/derivatives*.c) and of
the helpers fn passes its node to, and checks each against the mask."""
import pathlib
import re

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "csrc" / "autograd"
FILES = sorted(SRC.glob("derivatives*.c"))
OPS_DEF = SRC.parent / "ops" / "ops.def"
pytestmark = pytest.mark.skipif(not FILES or not OPS_DEF.exists(), reason="needs the C sources")


def _functions(text):
    """name -> body of every top-level function definition."""
    out = {}
    for m in re.finditer(r"^(?:static\s+)?(?:inline\s+)?[\w\s\*]+?\b(\w+)\s*\(([^;{)]*)\)\s*\{", text, re.M):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out[m.group(1)] = text[m.end():i]
    return out


def _mask(expr):
    expr = expr.strip()
    if expr in ("0", "saves"):
        return set(), expr == "saves"
    bits = set()
    for part in expr.split("|"):
        part = part.strip()
        if part == "ALLIN":
            bits.add("all")
        elif part in ("SOUT", "SAUX"):  # SAUX: the outputs after the first
            bits.add("out")
        elif m := re.fullmatch(r"IN(\d)|EM_SAVE_IN\((\d)\)", part):
            bits.add(int(m.group(1) or m.group(2)))
        else:
            raise AssertionError(f"unknown save bit {part!r}")
    return bits, False


def _reads(name, funcs, seen):
    """(set of literal input slots, reads an output) of a formula and the helpers it hands `n`."""
    if name in seen or name not in funcs:
        return set(), False
    seen.add(name)
    body = funcs[name]
    ins = {int(k) for k in re.findall(r"\bIN\((\d+)\)", body)}
    ins |= {int(k) for k in re.findall(r"\b(?:input|optional_in|bound)\(\s*\w+\s*,\s*n\s*,\s*(\d+)\s*\)", body)}
    ins |= {int(k) for k in re.findall(r"\bOPT_IN\((\d+)\)", body)}
    out = bool(re.search(r"\bOUT\(|saved_out", body))
    for callee in set(re.findall(r"\b(\w+)\((?:[^()]*\bn\b[^()]*)\)", body)):
        if callee != name and callee in funcs:
            i2, o2 = _reads(callee, funcs, seen)
            ins |= i2
            out |= o2
    return ins, out


def _rows():
    """(file, op, saves, fn, that file's functions) for every row with a formula."""
    defined = {}  # formula -> (file name, functions of its file)
    for f in FILES:
        funcs = _functions(f.read_text())
        for name in funcs:
            defined.setdefault(name, (f.name, funcs))
    macro_made = {"bw__upsample"}  # derivatives_interp.c's PAIR(f) writes these: no body to read
    rows = []
    for m in re.finditer(r"^OP\((\w+),.*\bBW(?:_NAMED)?\((\w+),\s*([^,]+),\s*[\w\"]+\)\)\s*$",
                         OPS_DEF.read_text(), re.M):
        op, fn, saves = m.groups()
        if fn not in defined:  # its body is a macro's: nothing to read (as before the column moved)
            assert fn.startswith(tuple(macro_made)) or fn in MACRO_DEFINED, f"{op}: no definition of {fn} found"
        fname, funcs = defined.get(fn, ("(a macro)", {}))
        rows.append((fname, op, saves, fn, funcs))
    return rows


# formulas a macro defines (derivatives.c's UNARY(name, expr)): read from the macro's uses
MACRO_DEFINED = set()
for _f in FILES:
    MACRO_DEFINED |= {"bw_" + n for n in re.findall(r"^UNARY\((\w+),", _f.read_text(), re.M)}


ROWS = _rows()

# formulas whose shared helper reads a slot only for some of the ops using it
CONDITIONAL = {
    "bw_var": "var_std(..., root=false) never reads OUT(0); std's row (bw_std) saves it",
}


def test_rows_found():
    assert len(ROWS) > 200  # the parser sees the tables


@pytest.mark.parametrize("fname,op,saves,fn,funcs", ROWS, ids=[f"{r[1]}" for r in ROWS])
def test_formula_reads_only_saved(fname, op, saves, fn, funcs):
    bits, dynamic = _mask(saves)
    if dynamic or "all" in bits or fn in CONDITIONAL:
        return
    ins, out = _reads(fn, funcs, set())
    missing = sorted(k for k in ins if k not in bits)
    assert not missing, f"{fname}: {fn} (op {op}) reads input(s) {missing} but saves only {saves}"
    assert not out or "out" in bits, f"{fname}: {fn} (op {op}) reads its output but saves only {saves}"
