"""manage.py clear_login_throttle [--username U] [--ip IP] [--email E]: lift a sign-in lockout.

--username and --ip clear the admin sign-in throttle (eigenflux.login_throttle): of that username everywhere,
of that client address for every username, or, given both, of that username at that address (and both
ceilings). --ip also clears the client's e-mail login limit; --email clears an address's e-mail login limits.
"""

from django.core.management.base import BaseCommand, CommandError

from eigenflux.login_throttle import login_throttle_clear
from items.services.login import LoginError, login_limits_clear


class Command(BaseCommand):
    help = "Lift an admin sign-in lockout (--username, --ip) or the e-mail login limits (--email, --ip)."

    def add_arguments(self, parser):
        parser.add_argument("--username", help="An admin username (any case).")
        parser.add_argument("--ip", help="A client address as the server sees it (an IPv6 address counts as its /64).")
        parser.add_argument("--email", help="An agent's login e-mail address (any form of it).")

    def handle(self, *args, username: str | None, ip: str | None, email: str | None, **options):
        if not (username or ip or email):
            raise CommandError("name what to clear: --username, --ip and/or --email")
        cleared = 0
        if username or ip:
            cleared += login_throttle_clear(username=username, address=ip)
        if email or ip:
            try:
                cleared += login_limits_clear(email=email, client_ip=ip)
            except LoginError as exc:
                raise CommandError(f"--email: {exc}") from exc
        self.stdout.write(f"cleared {cleared} throttle counter{'s' if cleared != 1 else ''}")
