"""HTML cards for Jupyter (``_repr_html_`` of :class:`~dpharness.proofs.Proof`,
:class:`~dpharness.auditors.AuditResult` and :class:`~dpharness.Check`): every value escaped, no
scripts, no external resources; one helper so the three cards look alike."""

from __future__ import annotations

import html
from typing import Iterable

__all__ = ["card"]

_COLOURS = {"good": "#1a7f37", "bad": "#cf222e", "neutral": "#6e7781"}


def card(
    title: str,
    badge: str,
    tone: str,
    rows: Iterable[tuple[str, object]],
    sections: Iterable[tuple[str, Iterable[str]]] = (),
) -> str:
    """A titled card: ``badge`` (e.g. the verdict) coloured by ``tone`` ("good", "bad", "neutral"), a
    two-column table of ``rows`` (label, value; None values are left out) and titled lists."""
    colour = _COLOURS.get(tone, _COLOURS["neutral"])
    out = [
        '<div style="font-family: sans-serif; border: 1px solid #d0d7de; border-radius: 6px; padding: 8px 12px; '
        'margin: 4px 0; max-width: 60em">',
        f"<div><strong>{html.escape(title)}</strong> "
        f'<span style="color: white; background: {colour}; border-radius: 4px; padding: 1px 6px">'
        f"{html.escape(badge)}</span></div>",
        '<table style="border-collapse: collapse; margin-top: 4px">',
    ]
    for label, value in rows:
        if value is None:
            continue
        out.append(
            f'<tr><td style="padding: 1px 12px 1px 0; color: #57606a">{html.escape(label)}</td>'
            f'<td style="padding: 1px 0">{html.escape(str(value))}</td></tr>'
        )
    out.append("</table>")
    for heading, items in sections:
        items = list(items)
        if not items:
            continue
        out.append(f"<details><summary>{html.escape(heading)} ({len(items)})</summary><ol>")
        out.extend(f"<li>{html.escape(item)}</li>" for item in items)
        out.append("</ol></details>")
    out.append("</div>")
    return "".join(out)
