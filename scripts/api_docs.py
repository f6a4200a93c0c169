#!/usr/bin/env python3
"""Writes docs/api.md, the Python API reference, from the docstrings of akunu's public objects.

    python scripts/api_docs.py            # rewrites docs/api.md
    python scripts/api_docs.py --check    # exits 1 when docs/api.md is out of date
    python scripts/api_docs.py --missing  # lists the public names that have no docstring

Python objects are read with inspect (signatures, dataclass fields, properties). Objects of the
compiled module (pybind11) have no inspectable signature: their docstrings start with one, which
is taken from there, with pybind11's spelling of types (typing.SupportsInt | ...) normalised so
the page does not depend on the pybind11 version. Nothing here needs a Vulkan device.
"""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import inspect
import pathlib
import re
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "api.md"

import akunu  # noqa: E402
import akunu.audio  # noqa: E402
import akunu.batch  # noqa: E402
import akunu.constrained  # noqa: E402
import akunu.controls  # noqa: E402
import akunu.distributed  # noqa: E402
import akunu.encoder  # noqa: E402
import akunu.hub  # noqa: E402
import akunu.model  # noqa: E402
import akunu.models  # noqa: E402
import akunu.ops  # noqa: E402
import akunu.plan  # noqa: E402
import akunu.sampling  # noqa: E402
import akunu.tokenizer  # noqa: E402
import akunu.whisper  # noqa: E402
import akunu.whisper.model  # noqa: E402

# ---- what the page covers ----------------------------------------------------------------------
# (title, module whose docstring opens the section, [(qualified name, object)])
SECTIONS = [
    ("Loading and running a model", akunu.model, [
        ("akunu.Model", akunu.Model),
        ("Model.kv_cache", akunu.model.KVCacheView),
        ("Model.scratch", akunu.model.ScratchView),
        ("akunu.profile_table", akunu.profile_table),
        ("akunu.load", akunu.load),
    ]),
    ("Many sequences at once: akunu.Batch", akunu.batch, [
        ("akunu.Batch", akunu.Batch),
        ("akunu.KVCache", akunu.KVCache),
    ]),
    ("Embedding models", akunu.encoder, [
        ("akunu.Encoder", akunu.Encoder),
    ]),
    ("Speech to text: akunu.Whisper", akunu.whisper.model, [
        ("akunu.Whisper", akunu.Whisper),
        ("akunu.whisper.TranscribeOptions", akunu.whisper.TranscribeOptions),
        ("akunu.whisper.Transcription", akunu.whisper.Transcription),
        ("akunu.whisper.Segment", akunu.whisper.Segment),
        ("akunu.whisper.Word", akunu.whisper.Word),
        ("akunu.whisper.pad_or_trim", akunu.whisper.pad_or_trim),
    ]),
    ("Sampling and generation", akunu.sampling, [
        ("akunu.Sampler", akunu.Sampler),
        ("akunu.Generation", akunu.Generation),
        ("akunu.Piece", akunu.Piece),
        ("akunu.Stream", akunu.Stream),
        ("akunu.controls.LogitControls", akunu.controls.LogitControls),
        ("akunu.controls.completion_logprobs", akunu.controls.completion_logprobs),
        ("akunu.controls.chat_logprobs", akunu.controls.chat_logprobs),
    ]),
    ("Tokenizers", akunu.tokenizer, [
        ("akunu.Tokenizer", akunu.Tokenizer),
        ("akunu.StreamDecoder", akunu.StreamDecoder),
    ]),
    # akunu.plan is the function (it shadows its module): the module comes from sys.modules.
    ("Model files, configs and the memory plan", sys.modules["akunu.plan"], [
        ("akunu.open", akunu.open),
        ("akunu.ModelFiles", akunu.ModelFiles),
        ("akunu.load_config", akunu.load_config),
        ("akunu.ModelConfig", akunu.ModelConfig),
        ("akunu.plan", akunu.plan),
        ("akunu.MemoryPlan", akunu.MemoryPlan),
        ("akunu.arch_table", akunu.arch_table),
        ("akunu.supported_architectures", akunu.supported_architectures),
    ]),
    ("Devices and buffers", None, [
        ("akunu.Device", akunu.Device),
        ("akunu.Buffer", akunu.Buffer),
        ("akunu.devices", akunu.devices),
        ("akunu.validation_enabled", akunu.validation_enabled),
        ("akunu.validation_messages", akunu.validation_messages),
        ("akunu.clear_validation_messages", akunu.clear_validation_messages),
    ]),
    ("Single kernels: akunu.ops", akunu.ops,
     [(f"akunu.ops.{name}", f) for name, f in vars(akunu.ops).items()
      if inspect.isfunction(f) and f.__module__ == "akunu.ops" and not name.startswith("_")]
     + [("akunu.kernel_names", akunu.kernel_names)]),
    ("Constrained output: akunu.constrained", akunu.constrained,
     [(f"akunu.constrained.{name}", f) for name, f in vars(akunu.constrained).items()
      if inspect.isfunction(f) and f.__module__ == "akunu.constrained" and not name.startswith("_")]),
    ("Evaluation sweeps on Ray: akunu.distributed", akunu.distributed, [
        ("akunu.distributed.map", akunu.distributed.map),
        ("akunu.distributed.Task", akunu.distributed.Task),
        ("akunu.distributed.ItemError", akunu.distributed.ItemError),
        ("akunu.distributed.Results", akunu.distributed.Results),
    ]),
    ("Models by name: akunu.hub", akunu.hub,
     [(f"akunu.hub.{name}", f) for name, f in vars(akunu.hub).items()
      if inspect.isfunction(f) and f.__module__ == "akunu.hub" and not name.startswith("_")]),
    ("Models without a file: akunu.models", akunu.models,
     [(f"akunu.models.{name}", f) for name, f in vars(akunu.models).items()
      if inspect.isfunction(f) and f.__module__ == "akunu.models" and not name.startswith("_")]),
    ("Audio input: akunu.audio", akunu.audio, [("akunu.audio.load_audio", akunu.audio.load_audio)]),
]

# Instance attributes assigned in __init__ (invisible to class introspection): (name, type, what).
# Each is checked against the __init__ source, so a renamed attribute fails the generator.
ATTRIBUTES = {
    akunu.Model: [("path", "str", "the model path as given"),
                  ("tokenizer", "Tokenizer", "the model's tokenizer (tokenizer.json or the GGUF vocabulary)"),
                  ("kv_cache", "KVCacheView", "the KV cache, below"),
                  ("scratch", "ScratchView", "the named scratch buffers, below")],
    akunu.Batch: [("model", "Model", "the model whose weights the batch runs")],
    akunu.Encoder: [("path", "str", "the model path as given"),
                    ("tokenizer", "Tokenizer", "the model's tokenizer (tokenizer.json or the GGUF vocabulary)")],
    akunu.Tokenizer: [("bos_token", "str | None", "the BOS token's text, for chat templates"),
                      ("eos_token", "str | None", "the EOS token's text, for chat templates")],
    akunu.Stream: [("result", "Generation", "fills in as pieces arrive")],
}

# Where objects of the compiled module's classes without a constructor come from.
OBTAINED = {
    akunu.ModelFiles: "Returned by `akunu.open()`; not constructed directly.",
    akunu.ModelConfig: "Returned by `akunu.load_config()` and `Model.config`; not constructed directly.",
    akunu.Buffer: "Returned by `Device.empty()`, `Device.allocate()` and `Device.upload()`; not constructed directly.",
}

# ---- signatures --------------------------------------------------------------------------------
_PYBIND_TYPES = [
    (r"typing\.SupportsInt \| typing\.SupportsIndex", "int"),
    (r"typing\.SupportsFloat \| typing\.SupportsIndex", "float"),
    (r"typing\.SupportsInt", "int"),
    (r"typing\.SupportsFloat", "float"),
    (r"collections\.abc\.", ""),
    (r"typing\.", ""),
    (r"akunu\._akunu\.", ""),
    (r"\b_akunu\.", ""),
]


def _normalise(text: str) -> str:
    for pattern, repl in _PYBIND_TYPES:
        text = re.sub(pattern, repl, text)
    return text


def _annotation(a) -> str:
    if a is inspect.Parameter.empty:
        return ""
    if isinstance(a, str):
        return _normalise(a.strip("'\""))
    return _normalise(inspect.formatannotation(a))


def _python_signature(obj, drop_self: bool, returns: bool = True) -> str:
    sig = inspect.signature(obj)
    parts, star_done = [], False
    params = list(sig.parameters.values())
    if drop_self and params:  # a method's self (or cls), whatever it is called
        params = params[1:]
    for i, p in enumerate(params):
        if p.kind is p.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        if p.kind is p.VAR_POSITIONAL:
            star_done = True
        prefix = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
        text = prefix + p.name
        ann = _annotation(p.annotation)
        if ann:
            text += f": {ann}"
        if p.default is not inspect.Parameter.empty:
            text += f" = {p.default!r}" if ann else f"={p.default!r}"
        parts.append(text)
        if p.kind is p.POSITIONAL_ONLY and (i + 1 == len(params) or params[i + 1].kind is not p.POSITIONAL_ONLY):
            parts.append("/")
    out = f"({', '.join(parts)})"
    ret = _annotation(sig.return_annotation) if returns else ""
    return out + (f" -> {ret}" if ret else "")


def _pybind_overloads(doc: str, name_is_class: bool = False) -> list[tuple[str, str]]:
    """(signature without the name, text) for each overload a pybind11 docstring describes."""
    doc = _normalise(doc or "").strip()
    lines = doc.splitlines()
    if len(lines) > 1 and lines[1].strip() == "Overloaded function.":
        chunks = re.split(r"^\d+\. ", "\n".join(lines[2:]), flags=re.M)
        return [o for c in chunks if c.strip() for o in _pybind_overloads(c, name_is_class)]
    if not lines or not re.match(r"^[\w.]*\(.*\)", lines[0]):
        return [("", doc)]
    sig = lines[0][lines[0].index("("):]
    sig = re.sub(r"^\((?:self|arg0)(?:: [^,()\[\]]+)?(?:, |(?=\)))", "(", sig)
    if name_is_class:
        sig = re.sub(r" -> None$", "", sig)
    return [(sig, "\n".join(lines[1:]).strip())]


def _is_pybind(obj) -> bool:
    return type(obj).__name__ in ("builtin_function_or_method", "instancemethod") or (
        inspect.isclass(obj) and obj.__module__ == "akunu._akunu")


# ---- docstrings as Markdown --------------------------------------------------------------------
MISSING: list[str] = []


def _markdown(doc: str) -> str:
    """Plain docstring text; indented runs (examples) become fenced Python blocks."""
    out, block = [], []

    def flush():
        if block:
            while block and not block[-1].strip():
                block.pop()
            out.extend(["", "```python", *textwrap.dedent("\n".join(block)).splitlines(), "```", ""])
            block.clear()

    for line in doc.splitlines():
        if line.startswith("    ") or (block and not line.strip()):
            block.append(line)
        else:
            flush()
            out.append(line)
    flush()
    text = "\n".join(out)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _doc(obj, name: str, own_doc: str | None = None) -> str:
    doc = own_doc if own_doc is not None else inspect.getdoc(obj)
    if not doc or not doc.strip():
        MISSING.append(name)
        return "*No docstring.*"
    return _markdown(doc)


def _dataclass_auto_doc(cls) -> bool:
    return dataclasses.is_dataclass(cls) and (cls.__doc__ or "").startswith(cls.__name__ + "(")


# ---- rendering ---------------------------------------------------------------------------------
def _anchor(title: str) -> str:
    """GitHub's heading anchor."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def _function(name: str, f, level: str = "###") -> list[str]:
    short = name.split(".")[-1]
    if _is_pybind(f):
        out = [f"{level} {name}", ""]
        for sig, text in _pybind_overloads(f.__doc__):
            out += ["```python", f"{short}{sig}", "```", ""]
            if text:
                out += [_markdown(text), ""]
        if not any(text for _, text in _pybind_overloads(f.__doc__)):
            MISSING.append(name)
            out += ["*No docstring.*", ""]
        return out
    return [f"{level} {name}", "", "```python", f"{short}{_python_signature(f, False)}", "```", "",
            _doc(f, name), ""]


def _fields_table(cls) -> list[str]:
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        source = ""
    rows = ["| field | type | default | |", "|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        default = ""
        if f.default is not dataclasses.MISSING:
            default = f"`{f.default!r}`"
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = f"`{f.default_factory.__name__}()`"  # type: ignore[misc]
        m = re.search(rf"^\s+{re.escape(f.name)}\s*:[^\n#]*#\s*(.+)$", source, flags=re.M)
        note = m.group(1).strip() if m else ""
        cells = [f"`{f.name}`", f"`{_annotation(f.type)}`", default, note]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return rows + [""]


def _member(cls_name: str, name: str, member, owner) -> list[str]:
    qual = f"{cls_name}.{name}"
    if isinstance(member, property):
        if _is_pybind(owner):
            ret = _normalise(member.fget.__doc__ or "").strip()
            ret = ret.split("->", 1)[1].strip() if "->" in ret.splitlines()[0] else ""
            doc = member.__doc__ or ""
        else:
            ann = inspect.signature(member.fget).return_annotation
            ret = _annotation(ann)
            doc = inspect.getdoc(member) or ""
        head = f"`{qual}`" + (f" → `{ret}`" if ret else "") + " (property)"
        if doc.strip():
            return [f"- {head}: " + _markdown(doc).replace("\n", "\n  "), ""]
        MISSING.append(qual)
        return [f"- {head}", ""]
    if isinstance(member, (classmethod, staticmethod)):
        func = member.__func__
        kind = "classmethod" if isinstance(member, classmethod) else "staticmethod"
        sig = _python_signature(func, isinstance(member, classmethod))
        return [f"#### {qual}", "", "```python", f"@{kind}", f"{name}{sig}", "```", "", _doc(func, qual), ""]
    if _is_pybind(member) or _is_pybind(owner) and not inspect.isfunction(member):
        out = [f"#### {qual}", ""]
        overloads = _pybind_overloads(member.__doc__)
        for sig, text in overloads:
            out += ["```python", f"{name}{sig}", "```", ""]
            if text:
                out += [_markdown(text), ""]
        if not any(text for _, text in overloads):
            MISSING.append(qual)
            out += ["*No docstring.*", ""]
        return out
    return [f"#### {qual}", "", "```python", f"{name}{_python_signature(member, True)}", "```", "",
            _doc(member, qual), ""]


def _class(name: str, cls) -> list[str]:
    short = cls.__name__
    out = [f"### {name}", ""]
    init = vars(cls).get("__init__")
    if _is_pybind(cls):
        if type(init).__name__ == "instancemethod":
            for sig, text in _pybind_overloads(init.__doc__, name_is_class=True):
                out += ["```python", f"{short}{sig}", "```", ""]
                if text:
                    out += [_markdown(text), ""]
        else:
            out += [OBTAINED.get(cls, "Not constructed directly."), ""]
        if cls.__doc__ and cls.__doc__.strip():
            out += [_markdown(inspect.cleandoc(cls.__doc__)), ""]
        else:
            MISSING.append(name)
    else:
        out += ["```python", f"class {short}{_python_signature(cls, False, returns=False)}", "```", ""]
        if _dataclass_auto_doc(cls) or not (cls.__doc__ or "").strip():
            MISSING.append(name)
        else:
            out += [_markdown(inspect.cleandoc(cls.__doc__)), ""]
        if init is not None and inspect.isfunction(init) and (init.__doc__ or "").strip():
            out += [_markdown(inspect.getdoc(init)), ""]
    if dataclasses.is_dataclass(cls):
        out += _fields_table(cls)
    attrs = ATTRIBUTES.get(cls, [])
    if attrs:
        source = inspect.getsource(cls.__init__)
        for attr, _, _ in attrs:
            if not re.search(rf"self\.{attr}\s*=", source):
                raise SystemExit(f"api_docs.py: {short}.__init__ no longer sets self.{attr}; update ATTRIBUTES")
        out += ["Attributes:", ""]
        out += [f"- `{short}.{attr}`: `{kind}`, {what}" for attr, kind, what in attrs] + [""]
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    for mname, member in vars(cls).items():
        if mname.startswith("_") or mname in fields:
            continue
        if not (isinstance(member, (property, classmethod, staticmethod)) or callable(member)):
            continue
        out += _member(short, mname, member, cls)
    # Methods attached from Python to a compiled class (Device.upload) appear above with the
    # rest of vars(); nothing is inherited from other akunu classes.
    return out


def render() -> str:
    MISSING.clear()
    lines = [
        "# Python API reference",
        "",
        "Generated from the docstrings by `python scripts/api_docs.py`; do not edit by hand.",
        "`python scripts/api_docs.py --check` (run by `tests/python/test_docs.py`) fails when this",
        "page no longer matches the code. Names starting with `_` are private and not listed.",
        "",
        "```python",
        "import akunu",
        "import akunu.models   # the module of model files akunu can fetch or ships",
        "```",
        "",
        "## Contents",
        "",
    ]
    for title, _, items in SECTIONS:
        lines.append(f"- [{title}](#{_anchor(title)}): " + ", ".join(f"`{n}`" for n, _ in items))
    lines.append("")
    for title, module, items in SECTIONS:
        lines += [f"## {title}", ""]
        if module is not None and module.__doc__:
            # Module docstrings start at column 0: their indented lines are examples.
            lines += [_markdown(module.__doc__.strip("\n")), ""]
        for name, obj in items:
            lines += _class(name, obj) if inspect.isclass(obj) else _function(name, obj)
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n"
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/api.md is out of date")
    ap.add_argument("--missing", action="store_true", help="list the public names without a docstring")
    args = ap.parse_args(argv)
    text = render()
    if args.missing:
        print("\n".join(MISSING) if MISSING else "every public name has a docstring")
        return 0
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if current == text:
            return 0
        diff = difflib.unified_diff(current.splitlines(), text.splitlines(), "docs/api.md", "generated",
                                    lineterm="", n=1)
        print("\n".join(list(diff)[:60]))
        print("docs/api.md is out of date: run python scripts/api_docs.py", file=sys.stderr)
        return 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
