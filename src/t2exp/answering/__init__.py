"""Generate: prompts, evidence, answer modes, the safe evaluator of programs, the answer choice."""
