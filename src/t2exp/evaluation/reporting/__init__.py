"""``t2exp report``: paper-style tables from MLflow runs: read (:mod:`.runs`), compute (:mod:`.tables`),
write (:mod:`.sections`, :mod:`.render`, :mod:`.plots`), put together by :mod:`.build`."""
