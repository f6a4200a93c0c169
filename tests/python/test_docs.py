"""The documentation against the code: docs/api.md is what scripts/api_docs.py generates,
docs/token-flow.md's dispatch table is the shipped model's, and every relative link in
docs/*.md and README.md reaches a file (and, for a #fragment into Markdown, a heading)."""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

import akunu
import akunu.models

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]


def test_api_reference_is_current():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "api_docs.py"), "--check"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, f"docs/api.md is out of date (python scripts/api_docs.py):\n{r.stdout}{r.stderr}"


# ---- docs/token-flow.md ------------------------------------------------------------------------
def _table_rows(text: str, header_start: str) -> list[list[str]]:
    """The body rows of every Markdown table whose header row starts with `header_start`."""
    rows, inside = [], False
    for line in text.splitlines():
        if line.startswith(header_start):
            inside = True
            continue
        if inside and re.match(r"^\|[-| :]+\|$", line):
            continue
        if inside and line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
            continue
        inside = False
    return rows


@pytest.fixture(scope="module")
def dispatch_table():
    m = akunu.Model(akunu.models.shipped(), context=256, progress=False)
    return m.dispatch_table()


def test_token_flow_table_is_the_shipped_models(dispatch_table):
    text = (DOCS / "token-flow.md").read_text(encoding="utf-8")
    rows = _table_rows(text, "| # | label | kernel | groups |")
    assert len(rows) >= 8, "the dispatch table is missing from docs/token-flow.md"
    kernels = {cmd["kernel"] for cmd in dispatch_table}
    for cells in rows:
        index, label, kernel, groups = int(cells[0]), cells[1].strip("`"), cells[2].strip("`"), cells[3]
        assert kernel in kernels, f"docs/token-flow.md names kernel {kernel}, which the dispatch table does not run"
        assert index < len(dispatch_table), f"row {index}: the table has {len(dispatch_table)} commands"
        cmd = dispatch_table[index]
        assert (label, kernel) == (cmd["label"], cmd["kernel"]), f"row {index}: the table now has {cmd}"
        assert tuple(int(g) for g in groups.split(",")) == tuple(cmd["groups"]), f"row {index}: the table now has {cmd}"
    # The tail: the last rows of the page are the last commands of the table.
    assert int(rows[-1][0]) == len(dispatch_table) - 1, "the tail rows no longer end the dispatch table"


def test_token_flow_names_only_kernels_that_exist():
    """Kernel names in the prose (the prefill GEMMs, flash attention, ...) are embedded kernels."""
    text = (DOCS / "token-flow.md").read_text(encoding="utf-8")
    known = set(akunu.kernel_names())
    kernel = re.compile(r"(embed|gemv|gemv_dot|gemm|gemm_cm|dequant_f16|rmsnorm|add|fill|copy)"
                        r"_(f32|f16|bf16|q8_0|q4_0|q4_1|q4_k|q5_k|q6_k|u32)(_t32v?)?"
                        r"|act_[a-z_]+|attention_split|flash_attention|flash_cm_d[0-9]+|last_row|rope_kv")
    named = {w for w in re.findall(r"`([a-z0-9_]+)`", text) if kernel.fullmatch(w)}
    assert named, "no kernel names found in docs/token-flow.md"
    assert named <= known, f"not kernels of this build: {sorted(named - known)}"


# ---- links -------------------------------------------------------------------------------------
def _anchors(page: pathlib.Path) -> set[str]:
    """GitHub's anchors for the headings of a Markdown page."""
    out = set()
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if not in_code and (m := re.match(r"^#{1,6} (.+)$", line)):
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def _links(page: pathlib.Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)  # not code blocks
    return re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_relative_links_reach_files(page):
    links = _links(page)
    for link in links:
        if re.match(r"^[a-z][a-z0-9+.-]*:", link):  # http:, https:, mailto:
            continue
        path, _, fragment = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        assert target.exists(), f"{page.name}: link {link} points to a missing file"
        assert ROOT in target.parents or target == ROOT, f"{page.name}: link {link} leaves the repository"
        if fragment and target.suffix == ".md":
            assert fragment in _anchors(target), f"{page.name}: link {link} names no heading of {target.name}"
