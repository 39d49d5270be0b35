"""``python -m weaviate_wire`` (from ``tests/``): run the stand-in in the foreground."""

from .server import main

main()
