"""Chat templates: Jinja2 rendered as transformers renders them.

The environment matches transformers' (sandboxed, trim_blocks, lstrip_blocks, loop controls,
a `tojson` that keeps non-ASCII, `raise_exception`, `strftime_now`), so templates written for HF
render the same text here. A template that raises reaches the caller as akunu.Error with the
template's own message.

The sandbox keeps a template from reaching outside; these bounds keep it from exhausting the
machine (akunu.Error names the bound):
- the rendered text holds at most MAX_OUTPUT_CHARS characters, and no `*` may build a string or
  list longer than that (nor `**` an exponent above MAX_EXPONENT);
- rendering stops after MAX_RENDER_SECONDS (checked as text is produced and at every step of
  `range`, whose length the sandbox already caps).
"""
from __future__ import annotations

import datetime
import json
import threading
import time
from functools import lru_cache

from akunu._akunu import Error

MAX_OUTPUT_CHARS = 1 << 24
MAX_EXPONENT = 4096
MAX_RENDER_SECONDS = 10.0


class _Deadline(threading.local):
    """This thread's render's time limit."""
    at = float("inf")

    def check(self):
        if time.monotonic() > self.at:
            raise Error(f"chat template: rendering took longer than {MAX_RENDER_SECONDS:g} s, the bound akunu sets")


_deadline = _Deadline()


def _range(*args):
    from jinja2.sandbox import safe_range  # the sandbox's range: at most MAX_RANGE items

    for i in safe_range(*args):
        if i % 1024 == 0:
            _deadline.check()
        yield i


def _bounded_env():
    from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

    class BoundedEnvironment(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset(["*", "**"])

        def call_binop(self, context, operator, left, right):
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_OUTPUT_CHARS:
                        raise SecurityError(f"'*' would build {len(seq) * n} items, more than the "
                                            f"{MAX_OUTPUT_CHARS} akunu allows")
            if operator == "**" and isinstance(right, (int, float)) and abs(right) > MAX_EXPONENT:
                raise SecurityError(f"'**' with exponent {right}: more than the {MAX_EXPONENT} akunu allows")
            return super().call_binop(context, operator, left, right)

    return BoundedEnvironment


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

    env = _bounded_env()(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["range"] = _range
    try:
        return env.from_string(template)
    except jinja2.exceptions.TemplateSyntaxError as e:
        raise Error(f"chat template: syntax error at line {e.lineno}: {e.message}") from None


def render(template: str, **context) -> str:
    import jinja2

    compiled = _compile(template)
    _deadline.at = time.monotonic() + MAX_RENDER_SECONDS
    pieces, size = [], 0
    try:
        for piece in compiled.generate(**context):
            size += len(piece)
            if size > MAX_OUTPUT_CHARS:
                raise Error(f"chat template: the rendered text passed {MAX_OUTPUT_CHARS} characters, the bound akunu "
                            "sets")
            _deadline.check()
            pieces.append(piece)
        return "".join(pieces)
    except jinja2.exceptions.TemplateError as e:
        raise Error(f"chat template: {e.message if hasattr(e, 'message') and e.message else e}") from None
    finally:
        _deadline.at = float("inf")
