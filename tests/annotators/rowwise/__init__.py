"""The row-by-row code the vectorized stages replaced, kept verbatim (imports aside) as the oracle
tests/annotators/test_vectorized_stages.py compares them with on random batches."""
