"""Progress bars and terminal tables for the commands and the long calls.

Bars come from tqdm.auto (widgets in a notebook, text on a terminal) and are shown on a
terminal or in a notebook unless turned off; piped output gets none, and the caller prints a
summary line instead. Where nobody asked for a bar, it appears only once its work has run for
DELAY seconds, so that quick calls stay quiet. Where tqdm is missing, nothing is shown. Tables fit a width (100
columns by default): the widest text column wraps.
"""
from __future__ import annotations

import sys
import textwrap

WIDTH = 100
DELAY = 2.0  # seconds before a bar nobody asked for appears
ASKED: bool | None = None  # the command line's --progress / --no-progress, for every bar


class _NoBar:
    """What bar() returns where no bar is shown: the same calls, doing nothing."""

    n = 0
    total = None

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_description(self, desc: str) -> None:
        pass

    def set_postfix_str(self, text: str) -> None:
        pass

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def interactive() -> bool:
    """True on a terminal (stderr) or in a Jupyter kernel: where a bar is seen while it moves."""
    if sys.stderr.isatty():
        return True
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return type(shell).__name__ == "ZMQInteractiveShell"


def shown(show: bool | None) -> bool:
    """Whether a bar is shown: `show` as given, else ASKED, else interactive()."""
    for choice in (show, ASKED):
        if choice is not None:
            return choice
    return interactive()


def bar(total: int | None, desc: str, unit: str = "it", show: bool | None = None, **kwargs):
    """A tqdm.auto bar, or a stand-in that shows nothing: when `show` is False, or when it is
    None and shown() says no, or without tqdm. A bar nobody asked for waits DELAY seconds before
    it appears."""
    if not shown(show):
        return _NoBar()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _NoBar()
    kwargs.setdefault("delay", DELAY if show is None and ASKED is None else 0.0)
    return tqdm(total=total, desc=desc, unit=unit, leave=False, file=sys.stderr, **kwargs)


def table(header: list[str], rows: list[list[str]], width: int = WIDTH, wrap: int = 0) -> str:
    """Text columns, the first left-aligned and the rest right-aligned, two spaces apart. When
    the lines would pass `width`, column `wrap` is narrowed and its cells wrap onto more lines."""
    cells = [header] + rows
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    over = sum(widths) + 2 * (len(widths) - 1) - width
    if over > 0:
        widths[wrap] = max(8, widths[wrap] - over)
    lines = []
    for row in cells:
        parts = [(textwrap.wrap(c, widths[i], break_on_hyphens=False) or [""]) if i == wrap else [c]
                 for i, c in enumerate(row)]
        for k in range(max(len(p) for p in parts)):
            line = [(p[k] if k < len(p) else "") for p in parts]
            lines.append("  ".join(v.ljust(widths[i]) if i == 0 else v.rjust(widths[i])
                                   for i, v in enumerate(line)).rstrip())
    return "\n".join(lines)


class LoadBar:
    """The engine's load callback (stage, done, total) as a bar over the weight tensors."""

    def __init__(self, show):
        self.show, self.bar = show, None

    def __call__(self, stage, done, total):
        if total and self.bar is None:
            self.bar = bar(total, "loading weights", "tensor", self.show)
        if self.bar is not None and total:
            self.bar.update(done - self.bar.n)

    def close(self):
        if self.bar is not None:
            self.bar.close()
