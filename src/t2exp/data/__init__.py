"""Load: the T²-RAGBench subsets (questions, corpora, golds), the question sample and the folds."""
