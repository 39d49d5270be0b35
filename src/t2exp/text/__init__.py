"""Reading answers as text, the rules every stage shares: numbers in gold answers and model
outputs with the paper's Number Match (:mod:`.numbers`), and a reasoning model's ``<think>``
block (:mod:`.reasoning`). Below the stages: it imports only itself."""
