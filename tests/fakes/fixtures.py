"""Fixtures for the fakes in this package (the OpenAI-compatible server is added by the model layer)."""
