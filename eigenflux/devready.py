"""What `make run` (eigenflux.devstack) says before its banner: whether the model endpoint can work (checked once at
start), and when the stack can take work: the web answers /readyz and the pipeline's /readyz (its metrics port)
is ready with no consumer still warming up (the offline analyzer loads, or on a first start trains, its models)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

POLL_SECONDS = 0.5
START_TIMEOUT_SECONDS = 300.0


def local_url(host: str, port: str | int) -> str:
    """The address this machine reaches a server bound to host:port on."""
    if host in ("0.0.0.0", ""):  # noqa: S104 - a bind address read, not one bound to
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _status(url: str) -> dict:
    """The JSON body of GET url (a 503 has one too); {} when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=POLL_SECONDS) as response:  # noqa: S310 - our own http URL
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            return json.loads(exc.read() or b"{}")
        except ValueError:
            return {}
    except (OSError, ValueError):
        return {}


class Startup:
    """Polled from the supervisor's loop: done() once the web and the pipeline are ready, or the start took longer
    than START_TIMEOUT_SECONDS (summary() then says what was not ready)."""

    def __init__(self, *, web: str, pipeline_port: int, timeout: float = START_TIMEOUT_SECONDS) -> None:
        self.web = web
        self.pipeline = local_url("127.0.0.1", pipeline_port) if pipeline_port else ""
        self.timeout = timeout
        self.started = time.monotonic()
        self.web_ready = False
        self.pipeline_ready = not self.pipeline  # no metrics port: nothing to ask
        self.warming: list[str] = []
        self.timed_out = False
        self._next = 0.0

    def done(self) -> bool:
        now = time.monotonic()
        if now < self._next:
            return False
        self._next = now + POLL_SECONDS
        if not self.web_ready:
            self.web_ready = _status(f"{self.web}/readyz").get("status") in ("ok", "degraded")
        if not self.pipeline_ready:
            body = _status(f"{self.pipeline}/readyz")
            self.warming = list(body.get("warming_up") or [])
            self.pipeline_ready = body.get("status") == "ok" and not self.warming
        if self.web_ready and self.pipeline_ready:
            return True
        self.timed_out = now - self.started > self.timeout
        return self.timed_out

    def summary(self) -> str:
        seconds = time.monotonic() - self.started
        if not self.timed_out:
            return f"pipeline ready: web and pipeline took work {seconds:.1f} s after they started."
        waiting = [name for name, ready in (("web", self.web_ready), ("pipeline", self.pipeline_ready)) if not ready]
        warming = f" (still warming up: {', '.join(self.warming)})" if self.warming else ""
        return f"WARNING: {' and '.join(waiting)} not ready after {seconds:.0f} s{warming}; see the log above."


def model_check(settings) -> tuple[list[str], list[str]]:
    """The banner's analyzer lines, and the warnings among them: the offline analyzer, or each model endpoint with
    what a GET /models found (a clear warning when it is unreachable, too slow or refuses the key: items then wait
    in `pending`)."""
    from pipeline.llm.reachability import endpoints_report

    if settings.LLM_PROVIDER == "local":
        return ["  analyzer   local, offline (set LLM_API_KEY and LLM_BASE_URL to use a model)"], []
    lines, warnings = [], []
    for report in endpoints_report():
        where = f"{', '.join(report.models)} at {report.base_url}" if report.base_url else "not configured"
        lines.append(f"  analyzer   openai ({', '.join(report.clients)}): {where}")
        if report.problem:
            warnings.append(
                f"the model endpoint {report.problem}: items wait in `pending` until it works; "
                "/readyz and the health page show the model as degraded"
            )
            lines.append(f"  WARNING    {warnings[-1]}")
    return lines, warnings
