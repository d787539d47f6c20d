"""examples/quickstart.ipynb keeps working: its code cells run in order in one
namespace (here, in-process: no Jupyter needed; a cell that raises fails the
test), again with `import torch` in place of ember where PyTorch is installed,
and in a real Jupyter kernel through nbclient (nbclient and ipykernel are in
the test extra; those tests skip where they are missing). The committed notebook carries the outputs
of a real run."""
import json
import os
import pathlib
import re

import pytest

import ember

NOTEBOOK = pathlib.Path(__file__).resolve().parents[1] / "examples" / "quickstart.ipynb"
EMBER_ROOT = pathlib.Path(ember.__file__).resolve().parents[1]  # the folder that holds the ember package
# IPython's own syntax: magics (%time, %%bash), shell escapes (!pip), help (obj?)
IPYTHON_ONLY = re.compile(r"^\s*(%|!)|^\s*[\w.]+\?{1,2}\s*$")


def code_cells(path):
    cells = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))["cells"]
    return [cell for cell in cells if cell["cell_type"] == "code"]


def cell_source(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def run_cells(path, replace_ember_with=None):
    """Execute the notebook's code cells in order in one namespace, like a
    kernel would; returns the namespace. Raises whatever a cell raises."""
    namespace = {"__name__": "__main__"}
    for number, cell in enumerate(code_cells(path), 1):
        source = cell_source(cell)
        for line in source.splitlines():
            if IPYTHON_ONLY.search(line):
                raise SyntaxError(f"code cell {number} uses IPython-only syntax, which plain Python "
                                  f"can't run: {line.strip()!r}")
        if replace_ember_with:
            source = re.sub(r"\bember\b", replace_ember_with, source)
        exec(compile(source, f"<{pathlib.Path(path).name} code cell {number}>", "exec"), namespace)
    return namespace


def write_notebook(path, sources):
    cells = [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
              "source": source} for i, source in enumerate(sources)]
    path.write_text(json.dumps({"cells": cells, "metadata": {"kernelspec": {"name": "python3", "language": "python",
                                                                             "display_name": "Python 3"}},
                                "nbformat": 4, "nbformat_minor": 5}))
    return path


def test_committed_notebook_has_the_outputs_of_a_clean_run():
    cells = code_cells(NOTEBOOK)
    assert len(cells) >= 5
    assert [cell["execution_count"] for cell in cells] == list(range(1, len(cells) + 1))
    outputs = [out for cell in cells for out in cell["outputs"]]
    assert outputs and not [out for out in outputs if out["output_type"] == "error"]
    assert "import ember as torch" in cell_source(cells[0])


def test_notebook_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = run_cells(NOTEBOOK)
    assert namespace["accuracy"] > 0.9  # the little circle classifier learned
    assert namespace["same"] is True  # the reloaded model predicts the same


def test_notebook_runs_on_torch(torch, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = run_cells(NOTEBOOK, replace_ember_with="torch")
    assert namespace["torch"] is torch
    assert namespace["accuracy"] > 0.9 and namespace["same"] is True


def test_a_cell_that_raises_fails_the_run(tmp_path):
    bad = write_notebook(tmp_path / "bad.ipynb", ["x = 1", "raise ValueError('cell 2 broke')", "y = 2"])
    with pytest.raises(ValueError, match="cell 2 broke"):
        run_cells(bad)
    magic = write_notebook(tmp_path / "magic.ipynb", ["%time x = 1"])
    with pytest.raises(SyntaxError, match="IPython-only"):
        run_cells(magic)


def execute_in_kernel(path, tmp_path, monkeypatch):
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    # the kernel is a new process started in tmp_path: give it this ember
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(EMBER_ROOT), os.environ.get("PYTHONPATH")])))
    nbformat = pytest.importorskip("nbformat")  # comes with nbclient
    notebook = nbformat.reads(pathlib.Path(path).read_text(encoding="utf-8"), as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError when a cell raises
    return notebook


def test_notebook_runs_in_a_jupyter_kernel(tmp_path, monkeypatch):
    notebook = execute_in_kernel(NOTEBOOK, tmp_path, monkeypatch)
    text = "".join(out.get("text", "") for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs)
    assert "same predictions: True" in text and "training accuracy" in text


def test_a_cell_that_raises_fails_in_a_jupyter_kernel(tmp_path, monkeypatch):
    nbclient = pytest.importorskip("nbclient")
    bad = write_notebook(tmp_path / "bad.ipynb", ["x = 1", "raise ValueError('cell 2 broke')"])
    with pytest.raises(nbclient.exceptions.CellExecutionError, match="cell 2 broke"):
        execute_in_kernel(bad, tmp_path, monkeypatch)
