"""Infrastructure every stage uses and none owns (it imports no stage): where files live and the
default MLflow store (``paths``), the on-disk caches, logs and locks (``cache``), a stage's
progress line (``progress``), remote calls with retries (``remote``), secrets kept out of logs
(``redaction``), hub models loaded as one line when they cannot be had (``model_hub``) and the one
deletion guard: nothing removed outside a given root (``contained``)."""
