"""The evaluation side: from predictions to numbers.

- :mod:`~t2exp.evaluation.numbers`: answer numbers (extraction, gold parsing, Number Match);
- :mod:`~t2exp.evaluation.metrics`: the evaluator, per-question metrics and their aggregation with
  bootstrap CIs (the one place every command below computes metrics);
- :mod:`~t2exp.evaluation.stats`: paired bootstrap and sign-flip permutation tests;
- :mod:`~t2exp.evaluation.scoring`: ``python -m t2exp.score`` (read gold and predictions, compute,
  render);
- :mod:`~t2exp.evaluation.compare`: ``python -m t2exp.compare``, two runs question by question;
- :mod:`~t2exp.evaluation.report`: ``python -m t2exp.report``, paper-style tables from MLflow runs.
"""
