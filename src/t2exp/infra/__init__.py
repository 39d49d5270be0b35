"""Infrastructure every stage uses and none owns: where files live (``paths``), the on-disk
caches and locks (``cache``), MLflow tracking and redaction (``tracking``), the sweep's parent/child
runs (``callbacks``), and the stop request of a run (``stop``)."""
