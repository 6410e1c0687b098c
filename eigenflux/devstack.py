"""`make run`: embedded services, migrations, demo credentials, then the web server, the pipeline and the
django-rq worker (scheduled jobs) as child processes until Ctrl-C, after which everything this started
is stopped.

The children run in a session of their own, so the terminal's Ctrl-C (SIGINT to the foreground process group)
reaches only this process, which then sends each child exactly one SIGTERM: the pipeline drains its in-flight
work instead of reading a second signal as "exit now". A second Ctrl-C forwards a second SIGTERM (the pipeline
then exits at once, leaving unfinished entries pending for reclaim).

Only one stack runs per data directory (eigenflux.base.devlock: a second `make run` refuses before it starts anything).
The children stop when this process is gone, even SIGKILLed (eigenflux.base.parentwatch), and so do the embedded
servers it started (eigenflux.base.reaper); a stack that fails stops no server it did not start itself, and a start
that finds servers left running by no live process says so and reuses them."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import django
from django.core.management import call_command

from eigenflux.base import embedded
from eigenflux.base.devlock import DevstackLock, StackRunning, devstack_lock
from eigenflux.base.environ import env_path, settings_or_exit
from eigenflux.devready import Startup, local_url, model_check

HOST = os.environ.get("HOST", "127.0.0.1")
PORT = os.environ.get("PORT", "8000")
SETTINGS_FILE = "pipeline-settings.txt"  # in the data directory: the pipeline's settings, secrets masked


def main() -> int:
    # Before anything starts (embedded servers, migrations, children): is this checkout's stack already running?
    data_dir = embedded.private_dir(env_path("EIGENFLUX_DATA_DIR", Path(__file__).resolve().parent.parent / ".data"))
    try:
        lock = devstack_lock(data_dir, host=HOST, port=PORT)
    except StackRunning as exc:
        print(f"make run: {exc}", file=sys.stderr)
        return 1
    _say_what_is_reused(data_dir)
    exit_code = 1
    try:
        exit_code = _run(lock, data_dir)
    finally:
        if exit_code:
            # Failed: servers that something else started stay up (it may still use them); ours stop as usual.
            embedded.leave_running()
        lock.release()
    return exit_code


def _say_what_is_reused(data_dir: Path) -> None:
    """Embedded servers running with no live user were left by a stack that could not stop them (killed, with its
    reaper): they are joined as they are, and the user is told so."""
    if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
        return
    running = embedded.running_servers(data_dir)
    if running and not embedded.live_users(data_dir):
        listed = ", ".join(f"{name} pid {pid}" for name, pid in running.items())
        print(f"make run: reusing embedded servers left running by an earlier stack ({listed}); data intact.")


def _start_reaper(data_dir: Path) -> None:
    """Stops the servers this stack started if this process is killed (eigenflux.base.reaper)."""
    started = embedded.started_here()
    if started:
        command = [sys.executable, "-m", "eigenflux.base.reaper", str(data_dir), str(os.getpid()), *started]
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        env["EIGENFLUX_DATA_DIR"] = str(data_dir)
        subprocess.Popen(command, env=env, start_new_session=True, stdin=subprocess.DEVNULL)


def _run(lock: DevstackLock, data_dir: Path) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
    settings_or_exit("make run")  # an invalid setting: one line, no traceback
    django.setup()  # starts the embedded PostgreSQL / Redis when their URLs are unset
    _start_reaper(data_dir)
    from django.conf import settings

    call_command("migrate", interactive=False, verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)
    password = _demo_superuser(settings.DATA_DIR)
    metrics_token, metrics_auth = _metrics_token(settings)
    token = _demo_agent_token()
    call_command("schedule_jobs", verbosity=0)
    model, warnings = model_check(settings)
    for warning in warnings:
        print(f"make run: {warning}", file=sys.stderr)
    children = _start_children(settings, lock, metrics_token)
    print(f"EigenFlux is starting: web, pipeline and jobs.{_first_start_note(settings)}", flush=True)
    startup = Startup(web=local_url(HOST, PORT), pipeline_port=settings.PIPELINE_METRICS_PORT)

    def banner() -> None:
        _banner(settings, password, token, metrics_auth, model, startup.summary())

    return _supervise(children, settings, startup, banner)


def _start_children(settings, lock: DevstackLock, metrics_token: str) -> dict[str, subprocess.Popen]:
    from django.db import connections

    from eigenflux.base.dbpool import postgresql_connection

    # Children get explicit URLs, so they use the servers this process uses; they are listed as the servers'
    # users, and each stops when this process is gone (EIGENFLUX_PARENT_PID, eigenflux.base.parentwatch).
    env = os.environ | {
        "DATABASE_URL": settings.DATABASE_URL,
        "REDIS_URL": settings.REDIS_URL,
        "SECRET_KEY": settings.SECRET_KEY,
        "METRICS_TOKEN": metrics_token,
        "PYTHONUNBUFFERED": "1",
        "EIGENFLUX_PARENT_PID": str(os.getpid()),
    }
    base = Path(settings.BASE_DIR)
    commands = {
        "web": web_command(HOST, PORT),
        "pipeline": [
            sys.executable,
            str(base / "manage.py"),
            "run_pipeline",
            "--settings-file",
            str(settings.DATA_DIR / SETTINGS_FILE),
        ],
        "jobs": [sys.executable, str(base / "manage.py"), "rqworker", "--with-scheduler", "default"],
    }
    # The job worker forks a process per job, and a pool must not cross a fork: each job opens its own
    # connection instead (counted as 2 per worker in the connection budget).
    envs = {"jobs": env | {"DB_POOL": "false", "DB_CONN_MAX_AGE": "0", "DB_APPLICATION_NAME": "eigenflux-jobs"}}
    # This process is done with the database: its pool's connections are not kept while the children run.
    connections.close_all()
    postgresql_connection().close_pool()
    # Started from the main thread: Linux's parent-death signal follows the thread that forked.
    children = {
        name: subprocess.Popen(cmd, env=envs.get(name, env), cwd=base, start_new_session=True)
        for name, cmd in commands.items()
    }
    embedded.add_users([proc.pid for proc in children.values()])
    lock.record(host=HOST, port=PORT, children={name: (children[name].pid, cmd) for name, cmd in commands.items()})
    return children


def _supervise(children: dict[str, subprocess.Popen], settings, startup: Startup, banner: Callable[[], None]) -> int:
    """Until a signal (or a child's exit), then stop every child: 0 when all of them stopped cleanly. The banner is
    printed once the web and the pipeline are ready (or the start has taken too long, which it then says)."""
    signals = 0

    def stop(signum, frame):
        nonlocal signals
        signals += 1
        if signals > 1:  # impatient: pass the second signal on, as a terminal would have
            _signal_all(children)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)
    exit_code = 0
    announced = False
    while not signals:
        for name, proc in children.items():
            if proc.poll() is not None:
                print(f"\n{name} exited with status {proc.returncode}; stopping everything.", file=sys.stderr)
                signals, exit_code = 1, 1
        if not signals and not announced and startup.done():
            banner()
            announced = True
        time.sleep(0.2)
    if not _stop(children, settings.PIPELINE_GRACE_SECONDS + 10):
        exit_code = 1
    return exit_code


def web_command(host: str, port: str) -> list[str]:
    """uvicorn as `make run` starts it; docs/deployment.md ("Serving") explains each option."""
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "eigenflux.asgi:application",
        "--host",
        host,
        "--port",
        port,
        "--http",
        "eigenflux.httpserver:H11Protocol",  # closes connections whose request head trickles in
        "--no-proxy-headers",  # the client address is derived by the application (TRUSTED_PROXIES)
        "--timeout-keep-alive",
        "5",
        "--ws-max-size",
        "65536",  # agents' sockets are push-only: nothing large ever comes in
        "--no-access-log",
    ]


def _signal_all(children: dict[str, subprocess.Popen]) -> None:
    for proc in children.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)


def _stop(children: dict[str, subprocess.Popen], wait_seconds: float) -> bool:
    """One SIGTERM to each child, then wait (the pipeline drains for up to PIPELINE_GRACE_SECONDS); a child
    still running after `wait_seconds` is killed. True when every child exited cleanly: status 0, or ended by
    the SIGTERM itself after its graceful shutdown (uvicorn and rq re-raise it, as well-behaved servers do)."""
    _signal_all(children)
    deadline = time.monotonic() + wait_seconds
    clean = True
    for name, proc in children.items():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        print(f"{name} exited with status {proc.returncode}", file=sys.stderr)
        clean = clean and proc.returncode in (0, -signal.SIGTERM)
    print("stopped web, pipeline and jobs; embedded servers stop as this process exits.", file=sys.stderr)
    return clean


def _first_start_note(settings) -> str:
    """What the wait before the banner is, when it is long: the offline analyzer's first start trains its models."""
    cache = Path(settings.LOCAL_MODEL_CACHE_DIR)
    if settings.LLM_PROVIDER == "local" and not any(cache.glob("*.npz")):
        return " First start: the offline analyzer trains its models (about 20 s) before the pipeline takes work."
    return ""


def _demo_secret(path: Path, nbytes: int) -> str:
    """A random secret kept in `path` (owner-only), made on the first start and reused after."""
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(nbytes))
    return path.read_text().strip()


def _metrics_token(settings) -> tuple[str, str]:
    """(the token the web process gets, what the banner says about it). /metrics is refused without a token
    unless DEBUG is on, so `make run` makes one up (reachable, not open); an operator's own is never printed."""
    if settings.METRICS_TOKEN:
        return settings.METRICS_TOKEN, "your METRICS_TOKEN"
    made = _demo_secret(settings.DATA_DIR / "demo-metrics-token", 24)
    return made, f"'Authorization: Bearer {made}'"


def _demo_superuser(data_dir: Path) -> str:
    from django.contrib.auth import get_user_model

    password = _demo_secret(data_dir / "demo-admin-password", 12)
    user_model = get_user_model()
    user = user_model.objects.filter(username="admin").first()
    if user is None:
        user_model.objects.create_superuser("admin", "admin@example.invalid", password)
    return password


def _demo_agent_token() -> str:
    from items.models import Agent, AgentToken
    from items.services.agents import agent_create, agent_token_create, agent_token_revoke

    agent = Agent.objects.filter(name="demo-agent").first() or agent_create(name="demo-agent")
    for old in AgentToken.objects.filter(agent=agent, label="make run", revoked_at__isnull=True):
        agent_token_revoke(token=old)  # only the token printed by this start works
    return agent_token_create(agent=agent, label="make run").token


def _banner(settings, password: str, token: str, metrics_auth: str, model_lines: list[str], ready: str) -> None:
    url = f"http://{HOST}:{PORT}"
    model = "\n".join(model_lines)
    print(
        f"""
{ready}
EigenFlux is running (Ctrl-C stops everything).
  API docs   {url}/api/v1/docs
  admin      {url}/admin/   user: admin   password: {password}
  metrics    {url}/metrics   needs {metrics_auth} (not open: /metrics is refused without a token)
{model}
  settings   {settings.DATA_DIR / SETTINGS_FILE} (the pipeline's, secrets masked)
  demo agent token (new each start): {token}

  curl -s -X POST {url}/api/v1/items/publish -H 'Authorization: Bearer {token}' \\
       -H 'Content-Type: application/json' -d '{{"content": "Looking for a Rust reviewer this week"}}'
""",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
