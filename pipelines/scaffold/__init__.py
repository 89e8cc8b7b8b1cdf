"""Files `ptf init` writes into a new project (kept equal to the repository's own by a test)."""
