"""Log: a cell's MLflow run, what the MLflow UI shows of it, the sweep callback, the terminal summary."""
