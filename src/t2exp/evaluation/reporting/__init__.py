"""``t2exp.report``: paper-style tables from MLflow runs, split read (:mod:`.runs`), compute
(:mod:`.tables`), render (:mod:`.render`, :mod:`.plots`); :mod:`.cli` puts them together."""
