"""t2exp: declarative RAG experiments on T²-RAGBench."""

__version__ = "0.1.0"
