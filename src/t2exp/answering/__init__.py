"""Generate: prompts, the context the generator reads (``context``), answer modes, the safe evaluator of programs, the answer choice."""
