"""How the Python layer is laid out: every Tensor method written in Python is
attached in one place (ember/_tensor.py), and no module is named for the
batch of work that added it."""
import pathlib
import re

import ember

ROOT = pathlib.Path(ember.__file__).parent


def _sources():
    return sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts)


def test_tensor_methods_are_attached_in_one_module():
    attach = re.compile(r"_add_attrs\(\s*(_C\.)?Tensor\b|setattr\(\s*(_C\.)?Tensor\b|^\s*(_C\.)?Tensor\.\w+\s*=[^=]",
                        re.M)
    owners = [p.relative_to(ROOT).as_posix() for p in _sources() if attach.search(p.read_text())]
    assert owners == ["_tensor.py"], owners


def test_python_methods_reach_the_tensor_type():
    # a few from each module the table takes them from, by object identity
    assert ember.Tensor.cov is ember.cov and ember.Tensor.histc is ember.histc
    assert ember.Tensor.diag is ember.diag and ember.Tensor.equal is ember.equal
    assert ember.Tensor.inverse is ember.linalg.inv and ember.Tensor.svd is ember.svd
    assert ember.Tensor.stft is ember.stft and ember.Tensor.quantile is ember.quantile
    t = ember.tensor([[4.0, 1.0], [2.0, 3.0]])
    assert abs(t.det().item() - 10.0) < 1e-6  # 4 * 3 - 1 * 2
    assert t.clone().renorm_(2, 0, 1.0).norm(dim=1).max().item() <= 1.0 + 1e-6


def test_no_module_named_for_its_history():
    bad = [p.relative_to(ROOT).as_posix() for p in _sources()
           if re.search(r"(_more|_extra|_misc|_compat)(_|\.py$)", p.name)]
    assert bad == [], bad
