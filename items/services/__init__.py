"""Writes of the items domain, one module per entity; edges (API, admin, consumers) stay thin and call these
(docs/architecture.md#code-layout)."""
