"""What a command's TARGET names: a path as it is, or a sweep's MLflow parent run id (32 hex
digits, no such path) as the sweep directory its ``t2exp.sweep_dir`` tag records (``t2exp
collect``, ``t2exp status``)."""

from __future__ import annotations

import re
from pathlib import Path

from t2exp.errors import DataError, one_line

RUN_ID = re.compile(r"^[0-9a-f]{32}$")


def sweep_path(target: str, tracking_uri: str | None) -> Path:
    """``target`` as a path, or the sweep directory of the parent run it names."""
    path = Path(target)
    if not path.exists() and RUN_ID.match(target):
        return _sweep_dir(target, tracking_uri)
    return path


def _sweep_dir(run_id: str, tracking_uri: str | None) -> Path:
    from t2exp.evaluation.scoring.gold import compose_config
    from t2exp.infra.mlflow_store import Tag, open_client

    uri = tracking_uri or str(compose_config("bundled").tracking.uri)
    client = open_client(uri, "--tracking-uri" if tracking_uri else "tracking.uri", create=False)  # a store that exists
    try:
        run = client.get_run(run_id)
    except Exception as exc:
        raise DataError(f"{run_id}: no such MLflow run at {uri} ({one_line(exc, 120)}); pass --tracking-uri") from None
    sweep_dir = run.data.tags.get(Tag.SWEEP_DIR)
    if not sweep_dir:
        raise DataError(f"{run_id}: not a sweep's parent run (no {Tag.SWEEP_DIR} tag); give the cell's run directory instead")
    return Path(sweep_dir)
