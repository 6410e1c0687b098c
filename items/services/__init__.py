"""Writes of the items domain, one module per entity; see CONVENTIONS.md "Thin edges"."""
