"""The C core's layers have no cycles (docs/architecture.md, "Layers"):

    core  <-  cpu  <-  ops  <-  autograd  <-  distributed  <-  python

A file may call only into its own layer and the layers below it. The check
reads the sources (so it runs on a clean checkout, where the build's object
files are gone): every non-static function and global a .c file defines is
that file's, and every `em_*` / `Em*Type` name another file mentions must be
defined in the same layer or a lower one. Names only declared in headers
(inline helpers, macros) belong to no layer. cuda/ (the backend behind
cuda_backend.h's function table) and testing/ (test doubles) are outside the
stack and are not checked here.
"""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1] / "csrc"
LAYERS = ["core", "cpu", "ops", "autograd", "distributed", "python"]

COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
NAME = re.compile(r"\b(em_\w+|Em\w+Type)\b")
# a definition at the start of a line: `type name(args...) {` (possibly over
# several lines) or `type name[...] = ...;` / `type name;` at file scope
FUNC_DEF = re.compile(r"^(?!static\b|extern\b|typedef\b|#)[A-Za-z_][\w \t\*]*?\b(em_\w+)\s*\([^;{]*?\)\s*\{",
                      re.M | re.S)
VAR_DEF = re.compile(r"^(?!static\b|extern\b|typedef\b|#|return\b)[A-Za-z_][\w \t\*]*?\b(em_\w+|Em\w+Type)"
                     r"\s*(?:\[[^\]]*\])?\s*(?:=|;)", re.M)


def sources():
    for layer in LAYERS:
        for path in sorted((ROOT / layer).glob("*.c")):
            text = STRING.sub('""', COMMENT.sub(" ", path.read_text()))
            yield layer, path.relative_to(ROOT).as_posix(), text


def test_layers_have_no_upward_calls():
    files = list(sources())
    assert len(files) > 50
    owner = {}
    for layer, name, text in files:
        for m in FUNC_DEF.finditer(text):
            owner.setdefault(m.group(1), (layer, name))
        for m in VAR_DEF.finditer(text):
            owner.setdefault(m.group(1), (layer, name))
    assert {"em_call_run", "em_iter_run", "EmTensorType", "em_op_defs"} <= set(owner)
    upward = []
    for layer, name, text in files:
        for sym in sorted(set(NAME.findall(text))):
            if sym not in owner:
                continue
            to_layer, to_file = owner[sym]
            if LAYERS.index(to_layer) > LAYERS.index(layer):
                upward.append(f"{name} uses {sym} from {to_file}")
    assert not upward, "calls from a lower layer into a higher one:\n  " + "\n  ".join(upward)


def test_every_c_file_is_in_a_layer_or_outside_the_stack():
    known = set(LAYERS) | {"cuda", "testing"}
    for path in ROOT.rglob("*.c"):
        assert path.relative_to(ROOT).parts[0] in known, f"{path}: not in a layer folder"


# An op's C entry point: a function taking the call (EmCall *c) up to its
# closing brace at the start of a line.
OP_BODY = re.compile(r"^(?:static )?[A-Za-z_][\w \t\*]*?\b(\w+)\(EmCall \*c\b[^)]*\)\s*\{\n(.*?)^\}", re.M | re.S)
DEVICE_TEST = re.compile(r"em_is_cpu\(|em_is_cuda\(|\.type\s*[!=]=\s*EM_(?:CUDA|CPU)\b|EM_(?:CUDA|CPU)\s*[!=]=")
# The dispatcher is where the device is chosen; these files are it.
DISPATCHER = {"dispatch.c", "dispatch_device.c", "autocast.c"}


def test_front_ends_never_test_the_device():
    """docs/architecture.md, "Devices": the dispatcher picks the device's
    slot from the row and passes `gpu` to the body; an op's C entry point
    does not ask where its tensors live. A line that tests a device for
    another reason (where a factory allocates, a 0-d CPU operand beside GPU
    ones, a value read on the host) says so with "not dispatch:"."""
    found = []
    for path in sorted((ROOT / "ops").glob("*.c")):
        if path.name in DISPATCHER:
            continue
        for m in OP_BODY.finditer(path.read_text()):
            if m.group(1).endswith("_cuda"):  # the CUDA slot itself
                continue
            for line in m.group(2).split("\n"):
                if DEVICE_TEST.search(line) and "not dispatch" not in line:
                    found.append(f"{path.name}: {m.group(1)}: {line.strip()}")
    assert not found, "front-ends that test the device:\n  " + "\n  ".join(found)
