"""Run: the components a config builds, one cell, the experiment loop, tuning, stop requests."""
