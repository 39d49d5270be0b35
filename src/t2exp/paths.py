"""Where the project's config, prompts and bundled data live, and the OmegaConf resolvers."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

PACKAGE_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = PACKAGE_DIR.parent.parent  # src/t2exp -> project root (editable install)
CONF_DIR = PROJECT_ROOT / "conf"


def register_resolvers() -> None:
    if not OmegaConf.has_resolver("t2exp_root"):
        OmegaConf.register_new_resolver("t2exp_root", lambda: str(PROJECT_ROOT))
