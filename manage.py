#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    from eigenflux.base.parentwatch import watch_parent_from_environment

    watch_parent_from_environment()  # a child of `make run` stops when it is gone
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        settings.INSTALLED_APPS  # noqa: B018 - loads eigenflux/settings.py, which reads and checks the environment
    except ImproperlyConfigured as exc:
        # A bad setting is the operator's to fix, not a bug: its one line (the variable and the value) is the
        # whole message; Django would print it under a traceback of its own loading.
        sys.exit(f"manage.py: invalid configuration: {exc}")
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
