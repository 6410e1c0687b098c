#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    from eigenflux.base.parentwatch import watch_parent_from_environment

    watch_parent_from_environment()  # a child of `make run` stops when it is gone
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
    from django.core.management import execute_from_command_line

    from eigenflux.base.environ import settings_or_exit

    settings_or_exit("manage.py")  # an invalid setting: one line, no traceback
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
