"""What the files under deploy/ refer to: PromQL expressions and the metrics they select, commands, environment
variables and ports. The deploy tests check each reference against the code, so the files cannot rot silently."""

from __future__ import annotations

import ast
import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import promql_parser
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
OUR_IMAGE = "eigenflux"  # the image name compose.yaml and the Kubernetes manifests give the Dockerfile's build

# Grafana's built-in variables, replaced by typical values so that the expressions parse as plain PromQL.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
# Series Prometheus makes itself rather than scraping them.
SYNTHETIC_METRICS = frozenset({"up", "ALERTS", "ALERTS_FOR_STATE", "scrape_duration_seconds", "scrape_samples_scraped"})


def load_yaml(path: Path):
    return yaml.safe_load(path.read_text())


def compose() -> dict:
    return load_yaml(DEPLOY / "compose.yaml")


def kubernetes_objects() -> list[dict]:
    objects = []
    for path in sorted(KUBERNETES.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        objects += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return objects


def kubernetes_object(kind: str, name: str) -> dict:
    (found,) = [o for o in kubernetes_objects() if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def dashboard() -> dict:
    return json.loads((DEPLOY / "grafana" / "dashboards" / "eigenflux.json").read_text())


def alert_rules() -> list[dict]:
    return [rule for group in load_yaml(DEPLOY / "prometheus" / "alerts.yml")["groups"] for rule in group["rules"]]


def promql_expressions() -> list[tuple[str, str]]:
    """(where, expression) for every PromQL expression the deploy files contain."""
    found = []
    for panel in dashboard()["panels"]:
        for target in panel.get("targets", []):
            found.append((f"dashboard panel {panel['title']!r}", target["expr"]))
    for rule in alert_rules():
        found.append((f"alert {rule['alert']}", rule["expr"]))
    for obj in kubernetes_objects():
        if obj["kind"] == "ScaledObject":
            for trigger in obj["spec"]["triggers"]:
                if trigger["type"] == "prometheus":
                    found.append((f"ScaledObject {obj['metadata']['name']}", trigger["metadata"]["query"]))
        if obj["kind"] == "PrometheusRule":
            for group in obj["spec"]["groups"]:
                for rule in group["rules"]:
                    found.append((f"PrometheusRule alert {rule['alert']}", rule["expr"]))
    return found


# --- PromQL ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Selector:
    """One vector selector: a metric name and its label matchers (label -> (operator, value))."""

    name: str
    matchers: dict[str, tuple[str, str]] = field(default_factory=dict, hash=False)


def parse_promql(expr: str):
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return promql_parser.parse(expr)


def _selector(node) -> Selector:
    operators = {"MatchOp.Equal": "=", "MatchOp.NotEqual": "!=", "MatchOp.Re": "=~", "MatchOp.NotRe": "!~"}
    return Selector(node.name, {m.name: (operators[str(m.op)], m.value) for m in node.matchers.matchers})


def selectors_in(node) -> list[Selector]:
    found: list[Selector] = []

    def visit(child):
        if isinstance(child, promql_parser.VectorSelector):
            found.append(_selector(child))

    promql_parser.walk(node, visit)
    return found


def groupings(expr: str) -> list[tuple[list[str], list[Selector]]]:
    """For every `by (...)` aggregation: its labels and the selectors it aggregates over."""
    found = []

    def visit(node):
        modifier = getattr(node, "modifier", None) if isinstance(node, promql_parser.AggregateExpr) else None
        if modifier is not None and modifier.type == promql_parser.AggModifierType.By:
            found.append((list(modifier.labels), selectors_in(node.expr)))

    promql_parser.walk(parse_promql(expr), visit)
    return found


# --- settings and environment -----------------------------------------------------------------------------------


def settings_variables() -> set[str]:
    """Every environment variable eigenflux/settings.py reads (through the env_* helpers or os.environ)."""
    tree = ast.parse((REPO / "eigenflux" / "settings.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
            continue
        func = node.func
        called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        value = node.args[0].value
        if (called.startswith("env_") or called in ("getenv", "get")) and isinstance(value, str) and value.isupper():
            names.add(value)
    return names


# Set in the deploy files for programs other than the project's settings.
STANDARD_VARIABLES = frozenset({"PATH", "DJANGO_SETTINGS_MODULE"})
STANDARD_PREFIXES = ("PYTHON", "PIP_", "OTEL_")


def is_standard(name: str) -> bool:
    return name in STANDARD_VARIABLES or name.startswith(STANDARD_PREFIXES)


# --- Dockerfile ---------------------------------------------------------------------------------------------------


@dataclass
class Instruction:
    keyword: str
    arguments: str
    stage: int  # 0 for the first FROM's stage, 1 for the next...


def dockerfile(path: Path = DEPLOY / "Dockerfile") -> list[Instruction]:
    """The instructions, continuation lines joined, comments dropped (a small subset of the syntax: enough
    for this Dockerfile, and an unknown keyword fails the test that reads it)."""
    logical, current = [], ""
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        logical.append(current + stripped)
        current = ""
    instructions, stage = [], -1
    for line in logical:
        keyword, _, arguments = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            stage += 1
        instructions.append(Instruction(keyword, arguments.strip(), max(stage, 0)))
    return instructions


def dockerfile_env(stage: int | None = None) -> dict[str, str]:
    """ENV of the final stage (or of the given one), `ENV A=1 B=2` form."""
    instructions = dockerfile()
    last = max(i.stage for i in instructions) if stage is None else stage
    env: dict[str, str] = {}
    for instruction in instructions:
        if instruction.keyword == "ENV" and instruction.stage == last:
            for part in shlex.split(instruction.arguments):
                name, _, value = part.partition("=")
                env[name] = value
    return env


def exec_form(arguments: str) -> list[str]:
    """CMD/ENTRYPOINT in exec (JSON array) form."""
    value = json.loads(arguments)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), arguments
    return value


# --- commands -----------------------------------------------------------------------------------------------------


def split_commands(argv: list[str]) -> Iterator[list[str]]:
    """`sh -c "a && b"` -> a, b; anything else as it is."""
    if argv[:2] == ["sh", "-c"]:
        for part in re.split(r"\s*&&\s*", argv[2]):
            yield shlex.split(part)
    else:
        yield argv


def option_value(argv: list[str], option: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == option and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(option + "="):
            return arg.split("=", 1)[1]
    return None


# --- compose interpolation ----------------------------------------------------------------------------------------

_INTERPOLATION = re.compile(r"\$\{(?P<name>[A-Z0-9_]+)(?:(?P<op>:-|:\?|-|\?)(?P<arg>[^}]*))?\}")


def interpolation_variables(text: str) -> set[str]:
    return {m.group("name") for m in _INTERPOLATION.finditer(text)}


def interpolate(value: str, environment: dict[str, str]) -> str:
    """Compose's ${VAR}, ${VAR:-default} and ${VAR:?error}, enough for compose.yaml."""

    def replace(match: re.Match) -> str:
        name, op, arg = match.group("name", "op", "arg")
        given = environment.get(name, "")
        if op in (":?", "?") and not given:
            raise KeyError(f"{name} is required: {arg}")
        if op in (":-", "-") and not given:
            return arg
        return given

    return _INTERPOLATION.sub(replace, value)


def env_file(path: Path = DEPLOY / ".env.example") -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values
