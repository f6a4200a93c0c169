"""Model.plan(): the choices each table is built from (engine/plan.h) agree with the dispatch
table they give, and follow the tuning. A plan that says "fused" where the table records three
GEMVs, or "folded" where a norm has its own dispatch, fails here."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

import akunu
from support.fixture_paths import FIXTURES

pytestmark = pytest.mark.usefixtures("backend")

MAKE_RANDOM = pathlib.Path(os.environ.get("AKUNU_MAKE_RANDOM_GGUF")
                           or FIXTURES.parent / "tools" / "make_random_gguf.py")


@pytest.fixture(scope="module", params=["f16", "q8_0", "q4_k"])
def path(request, tmp_path_factory):
    if not MAKE_RANDOM.exists():
        pytest.skip(f"{MAKE_RANDOM} is not on this machine")
    out = tmp_path_factory.mktemp("plan") / f"tiny-{request.param}.gguf"
    subprocess.run([sys.executable, str(MAKE_RANDOM), "--shape", "tiny", "--type", request.param, "-o", str(out)],
                   check=True, capture_output=True)
    return out


def labels(table, layer):
    return {c["label"].split(".", 2)[2] for c in table if c["label"].startswith(f"blk.{layer}.")}


@pytest.mark.parametrize("tuning", [None, {"gemv_handoff": True}, {"norm_forward": False}])
def test_decode_plan_is_what_the_table_records(path, tuning):
    m = akunu.Model(path, context=64, progress=False, tuning=tuning)
    plan, table = m.plan(), m.dispatch_table()
    assert plan["pass"] == "decode" and plan["rows"] == 1 and len(plan["layers"]) == m.config.n_layers
    for i, lp in enumerate(plan["layers"]):
        seen = labels(table, i)
        assert ("attn_qkv" in seen) == lp["qkv_fused"], (i, seen)
        assert ("rope_kv" not in seen) == lp["rope_folded"], (i, seen)
        assert ("ffn_gate_up" in seen) == (lp["gate_up_fused"] or lp["gate_up_parts"]), (i, seen)
        assert ("ffn_act" not in seen) == (lp["gate_up_fused"] or lp["activation_folded"]), (i, seen)
        forwarded_attn = i > 0 and plan["layers"][i - 1]["down_norm_forward"]
        assert ("attn_norm" not in seen) == (lp["attn_norm_folded"] or forwarded_attn), (i, seen)
        assert ("ffn_norm" not in seen) == (lp["ffn_norm_folded"] or lp["o_norm_forward"]), (i, seen)
        assert not (lp["rope_folded"] and not lp["qkv_fused"])
    waits = sorted(c["label"] for c in table if c["awaits_previous"])
    places = {"attention->o": "attn_output", "o->gate_up": "ffn_gate_up", "gate_up->down": "ffn_down"}
    want = [f"blk.{i}.{places[p]}" for i, lp in enumerate(plan["layers"]) for p in lp["handoffs"] if p in places]
    want += [f"blk.{i + 1}.attn_qkv" for i, lp in enumerate(plan["layers"]) if "down->next_qkv" in lp["handoffs"]]
    assert waits == sorted(want)
    assert plan["handoffs"] == bool(want)


def test_tuning_turns_plan_choices(path, backend):
    on = akunu.Model(path, context=64, progress=False, tuning={"gemv_handoff": True}).plan()
    off = akunu.Model(path, context=64, progress=False, tuning={"gemv_handoff": False, "norm_forward": False}).plan()
    assert not off["handoffs"] and not any(lp["handoffs"] for lp in off["layers"])
    assert not any(lp["o_norm_forward"] or lp["down_norm_forward"] for lp in off["layers"])
    if backend == "cpu":  # the CPU backend runs one command after another: nothing to hand off
        assert not on["handoffs"]
    elif "q8_0" in path.name:  # tile GEMVs of few workgroups: every place takes part
        assert on["handoffs"] and on["layers"][0]["handoffs"][:3] == ["attention->o", "o->gate_up", "gate_up->down"]


def test_prefill_plan_is_what_the_table_records(path):
    m = akunu.Model(path, context=64, progress=False, prefill_chunk=32)
    plan, table = m.plan(prefill=True), m.dispatch_table(prefill=True)
    assert plan["pass"] == "prefill" and plan["rows"] == 32
    for i, lp in enumerate(plan["layers"]):
        assert set(lp) == {"gemm_gated", "gemm_gated_from", "attn_out_dtype"}
        assert ("ffn_act" not in labels(table, i)) == (lp["gemm_gated"] and lp["gemm_gated_from"] == 0)
    dequantizes = any(c["kernel"].startswith("dequant") for c in table)
    assert dequantizes == (plan["dequant_rows"] > 0 and "f16" not in path.name)
