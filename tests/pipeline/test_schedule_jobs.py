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


@pytest.mark.django_db
def test_schedule_jobs_replaces_a_job_scheduled_under_an_older_module_path():
    """A version before the module renames scheduled `pipeline.maintenance.maintenance_job` (and the
    dead-letter job under `pipeline.deadletters`); the same slot's job id now names the current function."""
    from pipeline.scheduled_jobs import dead_letters_schedule, maintenance_schedule

    queue = django_rq.get_queue("default")
    for current, old_path in (
        (maintenance_schedule(), "pipeline.maintenance.maintenance_job"),
        (dead_letters_schedule(), "pipeline.deadletters.dead_letters_auto_requeue_job"),
    ):
        when = queue.scheduled_job_registry.get_scheduled_time(current.id)
        queue.enqueue_at(when, old_path, job_id=current.id)
        assert queue.fetch_job(current.id).func_name == old_path

    call_command("schedule_jobs", verbosity=0)

    scheduled = queue.scheduled_job_registry.get_job_ids()
    assert len(scheduled) == 2
    assert sorted(queue.fetch_job(job_id).func_name for job_id in scheduled) == [
        "pipeline.scheduled_jobs.dead_letters_auto_requeue_job",
        "pipeline.scheduled_jobs.maintenance_job",
    ]
