"""Run: a cell from its config to its MLflow run (``cell``), its components (``build``), its key
(``identity``), its steps (``steps``) and predictions (``predictions``), shards, tuning and stops."""
