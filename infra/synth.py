"""Synthesize the app offline into cdk.out and print the template's path (`make synth`).

No CDK CLI, Docker, credentials or network: assets are staged, not published.
"""

from __future__ import annotations

from pathlib import Path

from infra.app import build_app
from infra.config import REPO_ROOT


def synthesize(outdir: Path = REPO_ROOT / "cdk.out") -> Path:
    """Synthesize into `outdir` and return the stack's template path."""
    app, stack = build_app(outdir=str(outdir))
    try:
        assembly = app.synth()
    except RuntimeError as error:
        # The findings were printed above; jsii's traceback would only bury them.
        raise SystemExit(f"synth failed: {error}") from None
    return Path(assembly.directory) / stack.template_file


if __name__ == "__main__":
    print(synthesize())
