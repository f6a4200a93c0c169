"""Datasets of the local lm_eval tasks: the JSONL files beside this module, read without any
download (lm_eval's custom_dataset hook)."""
from __future__ import annotations

import json
import pathlib

HERE = pathlib.Path(__file__).resolve().parent


def _load(name: str):
    import datasets

    rows = [json.loads(line) for line in (HERE / name).read_text(encoding="utf-8").splitlines() if line.strip()]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})


def mc(**kwargs):
    return _load("code_mc.jsonl")


def gen(**kwargs):
    return _load("code_gen.jsonl")
