"""`manage.py run_pipeline`: run consumers by name, the outbox relay and housekeeping until SIGTERM/SIGINT."""

from __future__ import annotations

import logging
import os
import re
import signal
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from eigenflux.base import tracing
from eigenflux.base.dbpool import use_pipeline_pool
from eigenflux.base.longlived import freeze
from pipeline import metrics
from pipeline.consumers import load_consumers
from pipeline.runtime.supervisor import Supervisor
from pipeline.services import pipeline_services

log = logging.getLogger(__name__)
_SECRET_NAME = re.compile(r"KEY|SECRET|PASSWORD|TOKEN", re.IGNORECASE)
_SHOWN_PREFIXES = ("PIPELINE_", "LLM_", "SAFETY_LLM_", "EMBEDDING_", "OUTBOX_")
_URL_PASSWORD = re.compile(r"(://[^:/@]*:)([^@]*)(@)")


def mask(name: str, value) -> str:
    """A setting's value for the start-up banner: secrets hidden, passwords in URLs hidden."""
    if _SECRET_NAME.search(name) and isinstance(value, str) and value:
        return "****"
    return _URL_PASSWORD.sub(r"\1****\3", str(value))


READY_LINE = "run_pipeline: ready (signal handlers installed)"


class Command(BaseCommand):
    help = "Run the stream consumers (default: all registered), the outbox relay and housekeeping."

    def add_arguments(self, parser):
        parser.add_argument("--consumer", action="append", default=[], metavar="NAME", help="repeatable")
        parser.add_argument("--concurrency", type=int, default=None, help="handler threads per consumer")
        parser.add_argument("--burst", action="store_true", help="process what is there (incl. the outbox), exit 0")
        parser.add_argument("--no-relay", action="store_true", help="do not run the outbox relay here")
        parser.add_argument("--relay-only", action="store_true", help="run only the outbox relay (no consumers)")
        parser.add_argument("--no-housekeeping", action="store_true", help="no trimming, sweeper or lag poller")
        parser.add_argument("--metrics-port", type=int, default=None, help="Prometheus port (0 = off)")
        parser.add_argument(
            "--metrics-host", default=None, help="address the metrics port binds to (default PIPELINE_METRICS_HOST)"
        )
        parser.add_argument(
            "--settings-file",
            default=None,
            metavar="PATH",
            help="write the start-up settings listing to PATH (mode 0600) instead of the output (make run does)",
        )

    def handle(self, *args, **options):
        tracing.setup("relay" if options["relay_only"] else "pipeline")
        use_pipeline_pool()  # every thread of this process shares one pool of PIPELINE_DB_POOL_MAX_SIZE
        available = load_consumers()
        if options["relay_only"]:
            if options["no_relay"] or options["consumer"]:
                raise CommandError("--relay-only excludes --no-relay and --consumer")
            names: list[str] = []
        else:
            names = options["consumer"] or sorted(available)
            unknown = [name for name in names if name not in available]
            if unknown:
                valid = ", ".join(sorted(available)) or "(none registered)"
                raise CommandError(f"unknown consumer(s): {', '.join(unknown)}. Valid: {valid}")
        if options["concurrency"] is not None and options["concurrency"] < 1:
            raise CommandError("--concurrency must be >= 1")
        relay = not options["no_relay"]
        if not names and not relay:
            raise CommandError("nothing to run: no consumers and --no-relay")

        port = settings.PIPELINE_METRICS_PORT if options["metrics_port"] is None else options["metrics_port"]
        host = options["metrics_host"] or settings.PIPELINE_METRICS_HOST
        self._list_settings(names, options, relay, port)
        consumers = [available[name] for name in names]
        supervisor = Supervisor(
            consumers,
            services=pipeline_services(
                consumers, relay=relay, housekeeping=not options["no_housekeeping"], burst=options["burst"]
            ),
            concurrency=options["concurrency"],
            burst=options["burst"],
        )
        freeze("loading the pipeline")  # after the consumers' imports; jieba and the local model freeze their own
        metrics.serve(port, host, probe=supervisor.probe)

        def on_signal(signum, frame):
            if supervisor.stop_requested.is_set():
                log.warning("second signal: exiting now; unfinished entries stay pending for reclaim")
                logging.shutdown()
                os._exit(0)
            log.info("%s: stopping gracefully", signal.Signals(signum).name)
            supervisor.request_stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        # From here on a SIGTERM drains gracefully; supervisors and tests may wait for this line.
        log.info(READY_LINE)
        status = supervisor.run()
        tracing.flush()
        if status:
            # A loop thread died: exit non-zero so the process supervisor (systemd, Kubernetes...) restarts us.
            raise CommandError(supervisor.failure or "a pipeline loop died", returncode=status)

    def _list_settings(self, names, options, relay, port) -> None:
        shown = {
            "consumers": ", ".join(names) or "(none)",
            "relay": relay,
            "burst": options["burst"],
            "metrics_port": port,
            "DATABASE_URL": settings.DATABASE_URL,
            "REDIS_URL": settings.REDIS_URL,
        }
        for name in dir(settings):
            value = getattr(settings, name, None)
            if name.startswith(_SHOWN_PREFIXES) or (name == "SECRET_KEY"):
                shown[name] = value
        masked = {name: mask(name, value) for name, value in shown.items()}
        listing = "run_pipeline settings:\n" + "".join(f"  {name} = {value}\n" for name, value in masked.items())
        if options["settings_file"]:
            path = Path(options["settings_file"])
            path.unlink(missing_ok=True)
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as fh:
                fh.write(listing)
            log.info("run_pipeline settings written to %s", path)
        elif settings.LOG_FORMAT == "json":
            # One JSON line like every other, for the log shipper.
            log.info("run_pipeline settings", extra={"settings": masked})
        else:
            self.stdout.write(listing, ending="")
            self.stdout.flush()
