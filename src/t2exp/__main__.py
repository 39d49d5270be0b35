"""``python -m t2exp``: the Hydra application (config path: the project's ``conf/``)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from t2exp.errors import T2ExpError
from t2exp.paths import CONF_DIR, register_resolvers

register_resolvers()
log = logging.getLogger("t2exp")


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def main(cfg: DictConfig) -> float | None:
    from hydra.core.hydra_config import HydraConfig

    from t2exp.app import run

    overrides = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    try:
        result = run(cfg, overrides)
    except T2ExpError as exc:
        print(f"t2exp: error: {exc}", file=sys.stderr)
        sys.exit(2)
    return result.metrics.get("avg/nm", result.metrics.get(f"avg/mrr_at_{cfg.k}"))


if __name__ == "__main__":
    main()
