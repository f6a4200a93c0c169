"""Chat templates: Jinja2 rendered as transformers renders them.

The environment matches transformers' (sandboxed, trim_blocks, lstrip_blocks, loop controls,
a `tojson` that keeps non-ASCII, `raise_exception`, `strftime_now`), so templates written for HF
render the same text here. A template that raises reaches the caller as akunu.Error with the
template's own message.
"""
from __future__ import annotations

import datetime
import json
from functools import lru_cache

from akunu._akunu import Error


def _raise_exception(message):
    import jinja2

    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt):
    return datetime.datetime.now().strftime(fmt)


@lru_cache(maxsize=16)
def _compile(template: str):
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.from_string(template)
    except jinja2.exceptions.TemplateSyntaxError as e:
        raise Error(f"chat template: syntax error at line {e.lineno}: {e.message}") from None


def render(template: str, **context) -> str:
    import jinja2

    compiled = _compile(template)
    try:
        return compiled.render(**context)
    except jinja2.exceptions.TemplateError as e:
        raise Error(f"chat template: {e.message if hasattr(e, 'message') and e.message else e}") from None
