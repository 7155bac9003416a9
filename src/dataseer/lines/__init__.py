"""The three lines a question can take: quick, lookup and analysis."""
