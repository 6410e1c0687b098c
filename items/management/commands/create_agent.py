"""manage.py create_agent NAME: create an agent and print its API token (shown this once only)."""

from django.core.management.base import BaseCommand, CommandError

from items.services.agents import AgentNameRefused, agent_create_with_token


class Command(BaseCommand):
    help = "Create an agent and print a new API token for it. The token is not stored and is shown once."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--label", default="", help="A note to recognise the token by.")

    def handle(self, *args, name: str, label: str, **options):
        try:
            issued = agent_create_with_token(name=name, label=label)
        except AgentNameRefused as exc:
            raise CommandError(f"{exc} ({exc.code})") from exc
        self.stderr.write(f"agent #{issued.record.agent_id} {issued.record.agent.name!r} created; token (shown once):")
        self.stdout.write(issued.token)
