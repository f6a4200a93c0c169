"""Runs the notebooks in notebooks/ top to bottom and saves them with their outputs, so that a
reader on a code host sees the figures: python scripts/run_notebooks.py [NAME.ipynb ...]."""
from __future__ import annotations

import pathlib
import sys

import nbclient
import nbformat

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[1] / "notebooks"


def run(path: pathlib.Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    nbformat.write(nb, path)
    print(f"ran {path.name}")


if __name__ == "__main__":
    names = sys.argv[1:] or sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    for name in names:
        run(NOTEBOOKS / name)
