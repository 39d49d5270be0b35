"""A Weaviate stand-in speaking the real wire protocol (placeholder docstring)."""

from .server import WeaviateWire

__all__ = ["WeaviateWire"]
