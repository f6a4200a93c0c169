"""A sweep's result file: a JSONL journal that grows as results arrive, and the sweep's resume point.

The first line is a header naming the sweep (task, model, task arguments, item count and a
digest of the items); each further line is one finished item, {"index": i, "result": ...} or
{"index": i, "error": "..."}, in the order they finished. Lines are flushed as each batch
arrives, so a killed sweep leaves every finished item on disk, and at most the last line torn:
reopening the file drops that line and hands back the finished items, and the sweep then
computes only the others. A file whose header names another sweep is refused, never mixed.

Where pyarrow is present the same records also go to a Parquet file (index, result, error),
one row group per arrival; it is complete once the sweep ends, and rewritten from the journal
when a sweep resumes.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence

from akunu.distributed.tasks import Task, plain

FORMAT = 1


def header(task: Task, model_path: str, items: Sequence, model_kwargs: dict, task_kwargs: dict) -> dict:
    """What names a sweep, and what its results depend on: a resumed file must carry the same."""
    digest = hashlib.sha256()
    for item in items:
        digest.update(item if isinstance(item, bytes) else _text(item).encode())
        digest.update(b"\n")
    return {"akunu_sweep": FORMAT, "task": task.name, "model": model_path,
            "model_kwargs": json.loads(_text(model_kwargs)), "task_kwargs": json.loads(_text(task_kwargs)),
            "items": len(items), "items_sha256": digest.hexdigest()}


def _text(value) -> str:
    """value as JSON text; what JSON cannot hold (a logits processor) by its repr."""
    def fallback(v):
        try:
            return plain(v)
        except TypeError:
            return repr(v)
    return json.dumps(fallback(value), sort_keys=True, default=repr)


class ResultFile:
    """The JSONL journal at `path` (created, or reopened to resume), with its Parquet copy at
    `parquet` where that is not None. `done` holds the records already in the file by index."""

    def __init__(self, path: str, head: dict, parquet: str | None = None, arrow_type=None):
        self.path = path
        self.done: dict[int, dict] = {}
        if os.path.exists(path) and os.path.getsize(path) > 0:
            self._resume(head)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(json.dumps(head) + "\n")
        self._file = open(path, "a", encoding="utf-8")  # closed by close()
        self._parquet = _ParquetSink(parquet, arrow_type) if parquet else None
        if self._parquet is not None and self.done:
            self._parquet.write(list(self.done.values()))

    def _resume(self, head: dict) -> None:
        with open(self.path, "rb") as f:
            data = f.read()
        lines = data.split(b"\n")
        whole = lines[:-1]  # what follows the last newline is a torn line, or nothing
        try:
            found = json.loads(whole[0]) if whole else None
        except ValueError:
            found = None
        if not isinstance(found, dict) or found.get("akunu_sweep") != FORMAT:
            raise ValueError(f"{self.path}: not an akunu sweep's result file (its first line is not a sweep header); "
                             "name a new output file")
        for key, want in head.items():
            if found.get(key) != want:
                raise ValueError(f"{self.path} holds another sweep: its {key} is {found.get(key)!r}, this sweep's is "
                                 f"{want!r}; name a new output file, or delete this one to start over")
        for n, line in enumerate(whole[1:], start=2):
            try:
                record = json.loads(line)
                self.done.setdefault(int(record["index"]), record)
            except (ValueError, KeyError, TypeError):
                raise ValueError(f"{self.path}:{n}: not a result record ({line[:80]!r}); the file was changed by "
                                 "something else than a sweep") from None
        if lines[-1]:  # drop the torn line, so that appends start on a line of their own
            with open(self.path, "r+b") as f:
                f.truncate(len(data) - len(lines[-1]))

    def append(self, records: Sequence[dict]) -> None:
        """Writes finished items' records and flushes them to the OS (they survive the process)."""
        self._file.write("".join(json.dumps(r) + "\n" for r in records))
        self._file.flush()
        if self._parquet is not None:
            self._parquet.write(records)

    def close(self) -> None:
        self._file.close()
        if self._parquet is not None:
            self._parquet.close()


class _ParquetSink:
    """Records as Parquet rows (index int64, result, error string), a row group per write. The
    result column has the task's type, or holds the JSON text where the task names none."""

    def __init__(self, path: str, arrow_type):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._pa, self._json = pa, arrow_type is None
        self._schema = pa.schema([("index", pa.int64()), ("result", pa.string() if self._json else arrow_type),
                                  ("error", pa.string())])
        self._writer = pq.ParquetWriter(path, self._schema)

    def write(self, records: Sequence[dict]) -> None:
        results = [r.get("result") for r in records]
        if self._json:
            results = [None if "result" not in r else json.dumps(r["result"]) for r in records]
        columns = [[r["index"] for r in records], results, [r.get("error") for r in records]]
        self._writer.write_table(self._pa.table(columns, schema=self._schema))

    def close(self) -> None:
        self._writer.close()
