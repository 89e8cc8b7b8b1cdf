"""Generation: seed loading and generation methods with their Jinja prompt templates."""
