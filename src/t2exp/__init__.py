"""t2exp: declarative RAG experiments on T²-RAGBench."""

__version__ = "0.1.0"

from t2exp import config as _config  # registers the config schemas before any compose

_config.register()


def score(*args, **kwargs):  # lazy: `import t2exp` stays light
    from t2exp.evaluation.scoring.compute import score as _score
    return _score(*args, **kwargs)
