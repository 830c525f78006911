"""Finding the processes a test's subprocess started, wherever they were reparented: each inherits a
marker in its environment (Linux /proc)."""

from __future__ import annotations

import os
from pathlib import Path


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
