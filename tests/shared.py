"""Where the project's shared folder (design notes, seeds, samples) is: ``$BLKREVIEW_SHARED``
when set, else ``shared/`` beside the repository (as a CI clone has it). No machine-specific
absolute path: a worktree elsewhere sets ``BLKREVIEW_SHARED``."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def shared_dir() -> Path:
    env = os.environ.get("BLKREVIEW_SHARED")
    return Path(env).expanduser() if env else REPO_ROOT.parent / "shared"
