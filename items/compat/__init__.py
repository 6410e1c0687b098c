"""The EigenFlux client's API (v1 wire contract), mounted under its own prefix: a thin adapter that speaks
the `{code, msg, data}` envelope, integer statuses, millisecond timestamps and string ids, over the same
services and selectors as the native API. See docs/api.md, "Using the EigenFlux client"."""
