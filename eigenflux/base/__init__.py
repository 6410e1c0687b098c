"""The ground floor: helpers every layer may use (environment, Redis, database pool, logs, tracing set-up, embedded
servers for development). Nothing here imports an app (items, pipeline) or the project wiring above it
(tests/test_layer_boundaries.py)."""
