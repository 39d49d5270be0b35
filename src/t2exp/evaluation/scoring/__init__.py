"""``t2exp.evaluation.score``: score predictions against gold answers, split read / compute / render.

- :mod:`.gold` and :mod:`.predictions` read the gold questions and the submitted rows;
- :mod:`.compute` matches them and calls the evaluator (:mod:`t2exp.evaluation.metrics`);
- :mod:`.result` renders the :class:`~.result.ScoreResult`;
- ``t2exp score`` (and its MLflow logging) is :mod:`t2exp.cli.score`.
"""
