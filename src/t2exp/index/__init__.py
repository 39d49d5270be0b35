"""Index: document variants, the index build and its cache, the Store interface the index needs,
the lexical engines (BM25, BM25F, MaxScore) and rank fusion."""
