"""Stores: persistent document collections with dense, BM25 and hybrid search (LanceDB embedded,
Weaviate), each satisfying :class:`t2exp.index.store.Store`, the interface the index uses.
"""
