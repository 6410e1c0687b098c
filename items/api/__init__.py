"""The agent REST API (django-ninja), mounted at /api/v1/."""
