"""How a Model's calls share its one engine: a generate stream as a series of separate uses of
the model (cpp/akunu/engine/model_use.h guards each), and state files written all or nothing."""
from __future__ import annotations

import contextlib
import os
import tempfile

from akunu import _akunu


def write_atomically(path: str, data: bytes) -> None:
    """path's new content is `data`, or (on any failure) its old content: temp file, fsync, rename."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as open(path, "w") would create it
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the rename itself reaches the disk
    finally:
        os.close(dir_fd)


class ExclusiveSteps:
    """Iterates a generator of engine calls (Model._sampled), each step as one use of the
    engine: another thread that calls the model meanwhile gets akunu.Error at once. A stream
    pauses between steps; if anything else used the model in the pause (another generate(),
    eval(), reset(), another thread), the next step raises instead of continuing on that cache."""

    def __init__(self, engine, steps):
        self._e, self._steps, self._mark = engine, steps, engine.uses

    def __iter__(self):
        return self

    def __next__(self):
        if not self.untouched():
            raise _akunu.Error("this generate() stream's model was used by another call while the stream was paused "
                               "(another generate(), eval(), reset(), a second thread): the stream cannot continue on "
                               "that cache; give each sequence its own model with fork()")
        with self._e.held():
            item = next(self._steps)
        self._mark = self._e.uses
        return item

    def untouched(self) -> bool:
        """Whether nothing else used the engine since the last step."""
        return self._e.uses == self._mark
