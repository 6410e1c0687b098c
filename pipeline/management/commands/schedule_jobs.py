"""`manage.py schedule_jobs`: put the self-rescheduling django-rq jobs (dead-letter auto-requeue, hourly
maintenance) on the schedule. Idempotent: each job's id is its time slot, so running it on every deploy
(or every worker start) keeps exactly one chain of each."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from pipeline.scheduled_jobs import dead_letters_schedule, maintenance_schedule


class Command(BaseCommand):
    help = "Schedule the recurring django-rq jobs (run by `rqworker --with-scheduler`); safe to repeat."

    def add_arguments(self, parser):
        parser.add_argument("--queue", default="default", help="django-rq queue (default: %(default)s)")

    def handle(self, *args, **options):
        queue = options["queue"]
        for job in (dead_letters_schedule(queue_name=queue), maintenance_schedule(queue_name=queue)):
            if options["verbosity"]:
                self.stdout.write(f"scheduled {job.id} on queue {queue}")
