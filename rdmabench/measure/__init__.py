"""The measurement engine: the test registry, plans, the round engine, step protocols, typed result entries."""
