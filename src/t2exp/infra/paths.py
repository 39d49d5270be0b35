"""Where t2exp reads its resources, where it writes its outputs, and the OmegaConf resolvers.

Resources (read only): the Hydra configs (``conf/``), the prompt templates (``prompts/``) and the
bundled data (``data/t2ragbench/``). The repository keeps them at its top level; a built wheel
carries copies in ``t2exp/_resources/`` (the build step in ``setup.py``). An installed package
reads its own copies; an editable install (or ``PYTHONPATH=src``) has none and reads the checkout.

Outputs (``mlruns/``, ``outputs/``, ``multirun/``, ``.t2exp_cache/``) go under ``paths.work``,
by default the directory the command was started from (``${t2exp_cwd:}``): never into the
package or the checkout unless the command runs there. Every ``paths.*`` key can be overridden.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # src/t2exp (this module is t2exp/infra/paths.py)
PACKAGED_RESOURCES = PACKAGE_DIR / "_resources"  # present in a wheel install only


def _checkout_root() -> Path | None:
    """The repository root when this package is ``<root>/src/t2exp`` of a checkout, else None."""
    root = PACKAGE_DIR.parent.parent
    if PACKAGE_DIR.parent.name == "src" and (root / "conf" / "config.yaml").is_file():
        return root
    return None


CHECKOUT_ROOT = _checkout_root()


def _resource_root() -> Path:
    if (PACKAGED_RESOURCES / "conf" / "config.yaml").is_file():
        return PACKAGED_RESOURCES
    if CHECKOUT_ROOT is not None:
        return CHECKOUT_ROOT
    raise RuntimeError(
        f"t2exp: no configs found: neither {PACKAGED_RESOURCES}/conf (a wheel install) nor a "
        f"checkout around {PACKAGE_DIR}; reinstall the package (pip install t2exp or pip install -e .)"
    )


RESOURCE_ROOT = _resource_root()  # holds conf/, prompts/ and data/t2ragbench/
CONF_DIR = RESOURCE_ROOT / "conf"
PROMPTS_DIR = RESOURCE_ROOT / "prompts"
DATA_DIR = RESOURCE_ROOT / "data" / "t2ragbench"
_RESOURCES = {"conf": CONF_DIR, "prompts": PROMPTS_DIR, "data": DATA_DIR}


def work_dir() -> Path:
    """The directory outputs go under by default: where the command was started (Hydra's
    ``runtime.cwd`` inside a Hydra job, which survives ``hydra.job.chdir=true`` and is the launching
    directory for a job on another node), else the current directory."""
    hydra_config = sys.modules.get("hydra.core.hydra_config")  # not imported: no Hydra job runs
    if hydra_config is not None and hydra_config.HydraConfig.initialized():
        cwd = hydra_config.HydraConfig.get().runtime.cwd
        if cwd:
            return Path(cwd)
    return Path(os.getcwd())


def resource_dir(name: str) -> Path:
    """``conf``, ``prompts`` or ``data`` (the bundled T²-RAGBench rows)."""
    try:
        return _RESOURCES[name]
    except KeyError:
        raise ValueError(f"unknown t2exp resource {name!r}; one of {', '.join(_RESOURCES)}") from None


def register_resolvers() -> None:
    """``${t2exp_cwd:}`` (see ``work_dir``) and ``${t2exp_resource:conf|prompts|data}``."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("t2exp_cwd"):
        OmegaConf.register_new_resolver("t2exp_cwd", lambda: str(work_dir()))
    if not OmegaConf.has_resolver("t2exp_resource"):
        OmegaConf.register_new_resolver("t2exp_resource", lambda name: str(resource_dir(name)))


# the default MLflow store and artifact root, under the working directory: the schema's
# tracking.uri / tracking.artifact_location and the commands' --tracking-uri all start here
DEFAULT_STORE = "mlruns/mlflow.db"
DEFAULT_ARTIFACTS = "mlruns/artifacts"


def default_tracking_uri() -> str:
    """The store ``python -m t2exp`` writes by default (``tracking.uri``'s schema default), under
    the working directory (:func:`work_dir`)."""
    return f"sqlite:///{work_dir() / DEFAULT_STORE}"
