"""The include graph of cpp/akunu/ follows the module table in docs/architecture.md: a module
includes only the modules listed for it, so that, for one, vulkan/ never includes engine/ or
cpu/ and model/ never includes the kernels."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "cpp" / "akunu"

# module -> the modules its files may include (docs/architecture.md, "module | includes").
ALLOWED = {
    "core": set(),
    "formats": {"core"},
    "model": {"core", "formats"},
    "tokenizer": {"core", "formats"},
    "vulkan": {"core", "formats"},
    "cpu": {"core", "formats", "vulkan"},
    "backend": {"core", "vulkan", "cpu"},
    "engine": {"core", "formats", "model", "vulkan"},
    "api": {"core", "formats", "model", "tokenizer", "vulkan", "engine"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"akunu/([a-z_]+)/', re.M)


def included_modules(module):
    """{(file, included module)} for every include of another module by `module`'s files."""
    found = set()
    for path in sorted((SOURCES / module).iterdir()):
        if path.suffix in (".h", ".cpp"):
            found |= {(path.name, m) for m in INCLUDE.findall(path.read_text()) if m != module}
    return found


def test_every_module_is_in_the_table():
    on_disk = {p.name for p in SOURCES.iterdir() if p.is_dir()}
    assert on_disk == set(ALLOWED), "a module folder was added or removed: update ALLOWED and docs/architecture.md"


def test_modules_include_only_what_the_table_allows():
    broken = [f"{module}/{name} includes {m}/" for module in ALLOWED
              for name, m in sorted(included_modules(module)) if m not in ALLOWED[module]]
    assert not broken, "\n".join(broken)


def test_the_architecture_document_names_every_module():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    for module in ALLOWED:
        assert f"| `{module}/` |" in doc, module
