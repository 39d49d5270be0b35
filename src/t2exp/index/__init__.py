"""Index: document variants, the index build and its cache, the lexical engines."""
