"""autocast('cpu') gives torch's result dtypes: every call of
tests/autocast_cases.py (lower-precision ops, float32 ops, promoting ops and
ops autocast leaves alone) against the dtypes PyTorch 2.15 produced for the same
calls, stored by tests/data/make_autocast_reference.py, for bfloat16 and float16."""
import json
import os

import pytest

import ember
from autocast_cases import cases

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "data", "autocast_cpu_torch_reference.json")) as f:
    REF = json.load(f)


@pytest.mark.parametrize("low", ["bfloat16", "float16"])
@pytest.mark.parametrize("case", sorted(REF["bfloat16"]))
def test_result_dtype_is_torchs(low, case):
    dt = getattr(ember, low)
    call = cases(ember, dt)[case]
    with ember.autocast("cpu", dtype=dt):
        got = call()
    assert str(got.dtype).split(".")[-1] == REF[low][case], f"{case} under autocast({low})"


def test_the_cases_are_the_reference():
    assert set(cases(ember, ember.bfloat16)) == set(REF["bfloat16"]) == set(REF["float16"])
