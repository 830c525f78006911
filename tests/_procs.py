"""Finding the processes a test's subprocess started, wherever they were reparented: each inherits a
marker in its environment (Linux /proc)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest


def marked(marker: str) -> list[int]:
    """Pids of the live (not zombie) processes whose environment holds ``marker`` (``KEY=VALUE``)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                env = Path(f"/proc/{entry}/environ").read_bytes()
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in env and state != "Z":
                found.append(int(entry))
    return found


@pytest.fixture
def ctrl_c_not_ignored():
    """SIGINT as a terminal leaves it for the commands a test starts: a test run started in the background
    of a non-interactive shell inherits SIGINT ignored, and an ignored signal stays ignored across exec,
    so a command it starts could not be interrupted and a test of Ctrl-C would fail (or wait on the
    processes it left). A handler of this process becomes the default action in its children."""
    old = signal.getsignal(signal.SIGINT)
    if old == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)
