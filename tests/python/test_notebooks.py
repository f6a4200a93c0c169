"""The notebooks in notebooks/: each one runs top to bottom on the shipped model (their asserts
are the checks), and each is stored with the outputs of a full run.

Every notebook is executed with nbclient in a fresh "python3" kernel, from a copy in a temporary
directory that is also the kernel's working directory, so a run leaves nothing in the checkout.
The kernel inherits this process's environment (AKUNU_VALIDATION=1 from conftest.py), and a
last cell, added to the copy only, fails on any message of the validation layer.
"""
from __future__ import annotations

import pathlib
import shutil

import pytest

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[2] / "notebooks"
ALL = sorted(NOTEBOOKS.glob("*.ipynb"))

try:
    import ipykernel  # noqa: F401  (the kernel nbclient starts)
    import nbclient
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
except ImportError as e:  # pragma: no cover - depends on the environment
    pytest.skip(f"executing notebooks needs nbclient, nbformat and ipykernel ({e}); "
                "scripts/install.sh installs them", allow_module_level=True)

# Notebooks that need an engine part a checkout may lack; they skip, saying so, until it is built
# (then scripts/run_notebooks.py stores them with their outputs).
NEEDS = {"whisper.ipynb": ("akunu.whisper", "engine_available", "the Whisper engine is not built in this checkout")}


def skip_unless_runnable(path):
    if path.name in NEEDS:
        import importlib

        module, check, reason = NEEDS[path.name]
        if not getattr(importlib.import_module(module), check)():
            pytest.skip(reason)


NO_VALIDATION_MESSAGES = """import akunu
_messages = akunu.validation_messages()
assert not _messages, "validation messages:\\n" + "\\n".join(_messages)"""


def test_the_notebooks_are_there():
    names = {p.name for p in ALL}
    assert {"logits_explorer.ipynb", "kv_cache_inspector.ipynb", "memory_budget.ipynb", "attention_maps.ipynb",
            "whisper.ipynb"} <= names


def test_a_python3_kernel_is_installed():
    try:
        KernelSpecManager().get_kernel_spec("python3")
    except NoSuchKernel:
        pytest.fail("no 'python3' Jupyter kernel: run `python -m ipykernel install --sys-prefix` in the venv")


@pytest.mark.parametrize("path", ALL, ids=[p.stem for p in ALL])
def test_notebook_is_stored_with_its_outputs_and_uses_the_public_api(path):
    """Saved after a full run (scripts/run_notebooks.py), so a reader sees the figures without
    running it; the code reaches akunu through its public API only."""
    skip_unless_runnable(path)
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    counts = [cell.get("execution_count") for cell in code]
    assert counts == list(range(1, len(code) + 1)), f"{path.name}: run it top to bottom, then save ({counts})"
    assert any(o.get("output_type") == "display_data" for cell in code for o in cell.outputs), path.name
    assert not any(o.get("output_type") == "error" for cell in code for o in cell.outputs), path.name
    for i, cell in enumerate(code):
        assert "._" not in cell.source.replace("._repr", ""), f"{path.name}: code cell {i} reaches a private name"
    # Figures at a modest dpi keep the stored file small enough to read and to diff.
    assert path.stat().st_size < 800_000, f"{path.name}: {path.stat().st_size:,} bytes; lower its figures' dpi"


# The figures a reader would rather look at than read: per notebook, a piece of the code that
# draws each one; the cell holding it must be stored with its image.
FIGURES = {
    "kv_cache_inspector.ipynb": {"perplexity and KL per kv_dtype": "kv_quality.measure",
                                 "K and V error per kv_dtype and layer": "dequantize=True"},
    "attention_maps.ipynb": {"every layer's and head's attention map": "np.ndenumerate(axes)"},
    "logits_explorer.ipynb": {"top-k bars per greedy step": "steps_top"},
    "memory_budget.ipynb": {"the memory plan by context": "contexts"},
}


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_notebook_shows_its_figures(name):
    code = [c for c in nbformat.read(NOTEBOOKS / name, as_version=4).cells if c.cell_type == "code"]
    for figure, marker in FIGURES[name].items():
        cells = [c for c in code if marker in c.source]
        assert cells, f"{name}: no cell draws {figure} ({marker!r})"
        assert any("image/png" in o.get("data", {}) for c in cells for o in c.outputs), f"{name}: {figure} unsaved"


@pytest.mark.parametrize("path", ALL, ids=[p.stem for p in ALL])
def test_notebook_runs(path, tmp_path):
    skip_unless_runnable(path)
    copy = tmp_path / path.name
    shutil.copyfile(path, copy)
    nb = nbformat.read(copy, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(NO_VALIDATION_MESSAGES))
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as e:
        pytest.fail(f"{path.name} failed:\n{e}", pytrace=False)
    errors = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs if o.output_type == "error"]
    assert not errors, f"{path.name}: {errors}"
