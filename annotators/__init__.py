"""Annotators: the judge panel (multi-model cross-scoring, routing) and the Label Studio bridge."""
