"""Reading what the command line printed."""

from __future__ import annotations

import re


def flat(text: str) -> str:
    """Printed text with Rich's boxes and line wrapping taken out: one line, single spaces."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())
