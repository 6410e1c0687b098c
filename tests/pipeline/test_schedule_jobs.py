"""`manage.py schedule_jobs` (run by the deployments before the worker starts) puts both recurring django-rq
jobs on the schedule, once however often it runs."""

from __future__ import annotations

import django_rq
import pytest
from django.core.management import call_command

from pipeline.scheduled_jobs import AUTO_REQUEUE_JOB_PREFIX


@pytest.mark.django_db
def test_schedule_jobs_schedules_each_recurring_job_once():
    for _ in range(3):
        call_command("schedule_jobs", verbosity=0)
    scheduled = django_rq.get_queue("default").scheduled_job_registry.get_job_ids()
    assert len([j for j in scheduled if j.startswith("eigenflux-maintenance-")]) == 1
    assert len([j for j in scheduled if j.startswith(AUTO_REQUEUE_JOB_PREFIX)]) == 1
    assert len(scheduled) == 2
