"""The learned feed ranker (docs/feed-ranker.md): a feature contract, a training command, a model stored with
its provenance and self-tests, a gate before it serves, a loader that refuses what does not check, and a counted
fallback to the formula."""
