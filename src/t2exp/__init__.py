"""t2exp: declarative RAG experiments on T²-RAGBench."""

__version__ = "0.1.0"

from t2exp import config as _config  # registers the config schemas before any compose

_config.register()

