"""EigenFlux: project wiring (settings, urls, ASGI/WSGI, embedded services)."""
