"""``t2exp.score``: score predictions against gold answers, split read / compute / render.

- :mod:`.gold` and :mod:`.predictions` read the gold questions and the submitted rows;
- :mod:`.compute` matches them and calls the evaluator (:mod:`t2exp.evaluation.metrics`);
- :mod:`.result` renders the :class:`~.result.ScoreResult`;
- :mod:`.cli` is ``python -m t2exp.score`` and its MLflow logging.
"""
