"""LLM inference backends behind one interface, and the content-addressed response cache."""
