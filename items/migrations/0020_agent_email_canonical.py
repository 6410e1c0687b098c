"""Agent e-mail addresses become canonical (items.email_address): one form, compared by equality.

Each stored address is rewritten to its canonical form. Where two agents' addresses have the same canonical
form (say "Alice@Gmail.com" and "ａlice@gmail.com"), the oldest agent keeps it and the others' address is
cleared; an address that has no canonical form (a non-ASCII mailbox name, a look-alike domain) is cleared too.
Every cleared address is printed and logged as a warning, with the agent and the reason, so an operator can
set a right one in the admin; the agents keep their tokens, only their e-mail login stops. Pending login
codes are expired (they were looked up the old way): their owners run `auth login` again.
"""

from __future__ import annotations

import logging

from django.db import migrations, models
from django.db.models.functions import Lower
from django.utils import timezone

from items.email_address import EmailAddressInvalid, email_canonical

log = logging.getLogger("items.migrations.email")


def _report(line: str) -> None:
    print(f"  {line}")
    log.warning("%s", line)


def canonicalise_agent_emails(apps, schema_editor) -> None:
    Agent = apps.get_model("items", "Agent")
    holders: dict[str, object] = {}
    for agent in Agent.objects.exclude(email=None).order_by("created_at", "pk"):
        who = f"agent #{agent.pk} ({agent.name!r})"
        try:
            canonical = email_canonical(agent.email)
        except EmailAddressInvalid as exc:
            _report(f"{who}: e-mail {agent.email!r} cleared: {exc}")
            canonical = None
        if canonical is not None and canonical in holders:
            keeper = holders[canonical]
            _report(
                f"{who}: e-mail {agent.email!r} cleared: its canonical form {canonical!r} is also that of the "
                f"older agent #{keeper.pk} ({keeper.name!r}), which keeps it"
            )
            canonical = None
        if canonical is not None:
            holders[canonical] = agent
        if canonical != agent.email:
            Agent.objects.filter(pk=agent.pk).update(email=canonical)
    LoginChallenge = apps.get_model("items", "LoginChallenge")
    LoginChallenge.objects.filter(used_at=None, expires_at__gt=timezone.now()).update(expires_at=timezone.now())


class Migration(migrations.Migration):
    dependencies = [("items", "0019_agent_identity_permission")]

    operations = [
        migrations.RemoveConstraint(model_name="agent", name="agent_email_ci_unique"),
        # Data cannot be restored backwards (cleared addresses are in the printed report): backwards only
        # the constraints change.
        migrations.RunPython(canonicalise_agent_emails, migrations.RunPython.noop, elidable=False),
        migrations.AddConstraint(
            model_name="agent",
            constraint=models.UniqueConstraint(
                fields=("email",),
                name="agent_email_unique",
                violation_error_message="Another agent already has this email address.",
            ),
        ),
        migrations.AddConstraint(
            model_name="agent",
            constraint=models.CheckConstraint(
                condition=models.Q(email__isnull=True)
                | (models.Q(email=Lower("email")) & models.Q(email__regex=r"^[!-~]+@[a-z0-9.-]+$")),
                name="agent_email_canonical",
            ),
        ),
    ]
