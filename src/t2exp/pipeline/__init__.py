"""Run: the components a config builds (``build``), one cell with its MLflow run and signals
(``cell``), the experiment's chain of steps (``experiment``), its predictions writer
(``predictions``), a cell's identity (``identity``), tuning and stop requests."""
