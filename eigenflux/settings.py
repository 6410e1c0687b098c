"""Settings, all read from the environment with working defaults (see README, "Configuration").

With DATABASE_URL / REDIS_URL unset, embedded PostgreSQL and Redis are started under .data/.
"""

from __future__ import annotations

import sys
from pathlib import Path

from eigenflux import embedded, logredact
from eigenflux.dbpool import db_settings
from eigenflux.environ import (
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_path,
    env_str,
)

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = env_path("EIGENFLUX_DATA_DIR", BASE_DIR / ".data")

SECRET_KEY = env_str("SECRET_KEY") or embedded.secret_key(DATA_DIR)
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_prometheus",
    "django_rq",
    "channels",
    "items",
    "pipeline",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "items.api.middleware.BodySizeLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "eigenflux.middleware.DatabaseUnavailableMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "eigenflux.urls"
WSGI_APPLICATION = "eigenflux.wsgi.application"
ASGI_APPLICATION = "eigenflux.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- PostgreSQL -------------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL") or embedded.postgres_url(DATA_DIR)
# Each process holds at most a pool's worth of connections (psycopg_pool, shared by all its threads), so the
# total is processes x pool size whatever the number of requests or handler threads (README, "Database
# connections"). Off (e.g. behind PgBouncer): one connection per thread, kept DB_CONN_MAX_AGE seconds.
DB_POOL = env_bool("DB_POOL", True)
DB_POOL_MIN_SIZE = env_int("DB_POOL_MIN_SIZE", 2, minimum=0)
DB_POOL_MAX_SIZE = env_int("DB_POOL_MAX_SIZE", 10, minimum=1)
# How long a web request waits for a free connection before it is answered 503 with Retry-After.
DB_POOL_TIMEOUT = env_float("DB_POOL_TIMEOUT", 5.0, minimum=0.1)
# run_pipeline's pool (its handler threads return their connection after each handler and before each model
# call); it waits longer, as nobody is waiting on the other end.
PIPELINE_DB_POOL_MAX_SIZE = env_int("PIPELINE_DB_POOL_MAX_SIZE", 8, minimum=2)
PIPELINE_DB_POOL_TIMEOUT = env_float("PIPELINE_DB_POOL_TIMEOUT", 30.0, minimum=0.1)
# The deployment the connection budget check (`manage.py check`, eigenflux.W001) adds up.
WEB_PROCESSES = env_int("WEB_PROCESSES", 1, minimum=0)
PIPELINE_PROCESSES = env_int("PIPELINE_PROCESSES", 1, minimum=0)
JOB_WORKERS = env_int("JOB_WORKERS", 1, minimum=0)
DB_RESERVED_CONNECTIONS = env_int("DB_RESERVED_CONNECTIONS", 10, minimum=0)
DATABASES = {
    "default": db_settings(
        DATABASE_URL,
        pool=DB_POOL,
        min_size=DB_POOL_MIN_SIZE,
        max_size=DB_POOL_MAX_SIZE,
        timeout=DB_POOL_TIMEOUT,
        conn_max_age=env_int("DB_CONN_MAX_AGE", 600, minimum=0),
        # run_pipeline names itself eigenflux-pipeline; `make run` names its job worker eigenflux-jobs.
        application_name=env_str("DB_APPLICATION_NAME", "eigenflux-web"),
    )
}
# Parallel test runs (several checkouts, helpers) can keep apart by naming their test database.
if env_str("TEST_DATABASE_NAME"):
    DATABASES["default"]["TEST"] = {"NAME": env_str("TEST_DATABASE_NAME")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis ------------------------------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL") or embedded.redis_url(DATA_DIR)

RQ_QUEUES = {"default": {"URL": REDIS_URL, "DEFAULT_TIMEOUT": 300}}


def channel_layers(url: str) -> dict:
    """channels' Redis layer blocks in BZPOPMIN for 5 s; redis-py's default socket timeout is also 5 s, so
    an idle WebSocket would die with a read timeout. The socket timeout must outlast the blocking read."""
    return {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": url, "socket_timeout": 30}]},
        }
    }


CHANNEL_LAYERS = channel_layers(REDIS_URL)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns about a missing root before collectstatic
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# --- Agent API --------------------------------------------------------------------------------
# Largest request body accepted by the agent API (413 above it).
API_MAX_BODY_BYTES = env_int("API_MAX_BODY_BYTES", 64 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = max(API_MAX_BODY_BYTES, 2_621_440)
# Idempotency keys are remembered at least this long (a maintenance job prunes older ones).
IDEMPOTENCY_TTL_HOURS = env_int("IDEMPOTENCY_TTL_HOURS", 48, minimum=24)
# A token's last_used_at is written at most this often, so reads do not each cost a write.
TOKEN_TOUCH_SECONDS = env_int("TOKEN_TOUCH_SECONDS", 60, minimum=0)
EVENT_SOURCE = env_str("EVENT_SOURCE", "urn:eigenflux:api")
# Per-agent requests per minute (0 disables): publishing and everything else are counted separately.
RATE_LIMIT_PUBLISH_PER_MINUTE = env_int("RATE_LIMIT_PUBLISH_PER_MINUTE", 120, minimum=0)
RATE_LIMIT_READ_PER_MINUTE = env_int("RATE_LIMIT_READ_PER_MINUTE", 1200, minimum=0)
# Requests per minute and client address that fail authentication (no, malformed, unknown or revoked token);
# past it the address gets 429 without any database lookup until the minute is over (0 disables).
RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE = env_int("RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE", 120, minimum=0)
# A well-formed token the database does not know is remembered (in each process) this long, so repeating it
# costs no query.
AUTH_NEGATIVE_CACHE_SECONDS = env_float("AUTH_NEGATIVE_CACHE_SECONDS", 60.0, minimum=0.0)
# Reverse proxies (addresses or CIDR networks) whose X-Forwarded-For is believed when deriving the client
# address; empty = the socket peer is the client (a forwarded header is never trusted by default).
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES", [])
# Slow clients (uvicorn, see eigenflux.httpserver and eigenflux.bodylimit): the request head and the body
# must each arrive within these many seconds, or the connection is closed (head) / answered 408 (body).
REQUEST_HEADER_TIMEOUT_SECONDS = env_float("REQUEST_HEADER_TIMEOUT_SECONDS", 10.0, minimum=0.1)
REQUEST_BODY_TIMEOUT_SECONDS = env_float("REQUEST_BODY_TIMEOUT_SECONDS", 15.0, minimum=0.1)
# An open agent WebSocket re-checks its token this often (a revocation also closes it at once by a push).
WS_AUTH_RECHECK_SECONDS = env_float("WS_AUTH_RECHECK_SECONDS", 30.0, minimum=0.1)

# --- Model layer (SPEC §7) ----------------------------------------------------------------------
LLM_API_KEY = env_str("LLM_API_KEY") or env_str("OPENAI_API_KEY")
LLM_PROVIDER = env_choice("LLM_PROVIDER", "openai" if LLM_API_KEY else "local", ("openai", "local"))
LLM_BASE_URL = env_str("LLM_BASE_URL") or None
LLM_MODEL = env_str("LLM_MODEL", "gpt-4.1-mini")
LLM_API = env_choice("LLM_API", "responses", ("responses", "chat"))
LLM_REASONING_EFFORT = env_str("LLM_REASONING_EFFORT")
LLM_TIMEOUT = env_float("LLM_TIMEOUT", 30.0, minimum=0.1)
LLM_MAX_RETRIES = env_int("LLM_MAX_RETRIES", 2, minimum=0)
SAFETY_LLM_BASE_URL = env_str("SAFETY_LLM_BASE_URL") or LLM_BASE_URL
SAFETY_LLM_API_KEY = env_str("SAFETY_LLM_API_KEY") or LLM_API_KEY
SAFETY_LLM_MODEL = env_str("SAFETY_LLM_MODEL", LLM_MODEL)
SAFETY_LLM_REASONING_EFFORT = env_str("SAFETY_LLM_REASONING_EFFORT")
EMBEDDING_BASE_URL = env_str("EMBEDDING_BASE_URL") or LLM_BASE_URL
EMBEDDING_API_KEY = env_str("EMBEDDING_API_KEY") or LLM_API_KEY
EMBEDDING_MODEL = env_str("EMBEDDING_MODEL", "text-embedding-3-small")
# Changing the dimension changes the embedding column: run makemigrations + migrate afterwards.
EMBEDDING_DIMENSIONS = env_int("EMBEDDING_DIMENSIONS", 384, minimum=8)
# Send `dimensions` with embedding requests (turn off for servers/models that reject the parameter).
EMBEDDING_SEND_DIMENSIONS = env_bool("EMBEDDING_SEND_DIMENSIONS", True)
# Per-prompt reasoning effort, e.g. "process_item=low,suggest_action=minimal"; wins over LLM_REASONING_EFFORT.
LLM_REASONING_EFFORT_BY_PROMPT = dict(
    part.split("=", 1) for part in env_list("LLM_REASONING_EFFORT_BY_PROMPT", []) if "=" in part
)
# Ask for a JSON object reply (response_format / text.format json_object); off for servers lacking it.
LLM_JSON_MODE = env_bool("LLM_JSON_MODE", True)
# Per-call retry backoff for 429/5xx/timeouts: base * 2**attempt, capped, with full jitter.
LLM_RETRY_BASE_DELAY = env_float("LLM_RETRY_BASE_DELAY", 0.5, minimum=0.0)
LLM_RETRY_MAX_DELAY = env_float("LLM_RETRY_MAX_DELAY", 8.0, minimum=0.0)
# Prompt templates (one file per task, SPEC §7.2), checked at start-up against the result schemas.
PROMPTS_DIR = env_path("PROMPTS_DIR", BASE_DIR / "prompts")

# --- Enrichment (SPEC §6) -----------------------------------------------------------------------
QUALITY_THRESHOLD = env_float("QUALITY_THRESHOLD", 0.2, minimum=0.0, maximum=1.0)
DUPLICATE_WINDOW_DAYS = env_int("DUPLICATE_WINDOW_DAYS", 30, minimum=1)
# Cosine similarity at which a new item joins the nearest item's group; alerts need more, and recency.
SIMILARITY_THRESHOLD = env_float("SIMILARITY_THRESHOLD", 0.80, minimum=0.0, maximum=1.0)
ALERT_SIMILARITY_THRESHOLD = env_float("ALERT_SIMILARITY_THRESHOLD", 0.85, minimum=0.0, maximum=1.0)
ALERT_GROUP_WINDOW_HOURS = env_float("ALERT_GROUP_WINDOW_HOURS", 6.0, minimum=0.0)
# How long an item's claim lasts without progress; every step renews it (a crashed consumer's claim lapses).
ENRICHMENT_LEASE_SECONDS = env_float("ENRICHMENT_LEASE_SECONDS", 120.0, minimum=1.0)

# --- Profiles and the official agent (SPEC §5.2) ------------------------------------------------
OFFICIAL_AGENT_NAME = env_str("OFFICIAL_AGENT_NAME", "EigenFlux")
OFFICIAL_WELCOME_ENABLED = env_bool("OFFICIAL_WELCOME_ENABLED", True)
OFFICIAL_FIRST_BROADCAST_ENABLED = env_bool("OFFICIAL_FIRST_BROADCAST_ENABLED", True)
# Agents created within this many days get a reply to their first broadcast.
OFFICIAL_NEW_AGENT_DAYS = env_int("OFFICIAL_NEW_AGENT_DAYS", 7, minimum=0)
# Bounds on the official agent's model spend; past them the fixed fallback text is sent instead.
OFFICIAL_MODEL_CALLS_PER_HOUR = env_int("OFFICIAL_MODEL_CALLS_PER_HOUR", 600, minimum=0)
OFFICIAL_MODEL_CALLS_PER_AGENT_PER_DAY = env_int("OFFICIAL_MODEL_CALLS_PER_AGENT_PER_DAY", 4, minimum=0)

# --- Moderation (SPEC §8) ---------------------------------------------------------------------
# Transient dead letters are requeued automatically at most this many times per chain (0 = never), and
# only once they are this old (a passing outage is over); permanent ones always wait for a person.
DEAD_LETTER_AUTO_REQUEUE_MAX = env_int("DEAD_LETTER_AUTO_REQUEUE_MAX", 3, minimum=0)
DEAD_LETTER_AUTO_REQUEUE_MIN_AGE_SECONDS = env_float("DEAD_LETTER_AUTO_REQUEUE_MIN_AGE_SECONDS", 300.0, minimum=0.0)
# How often the scheduled django-rq job runs, and how many letters one run requeues at most.
DEAD_LETTER_AUTO_REQUEUE_INTERVAL_SECONDS = env_int("DEAD_LETTER_AUTO_REQUEUE_INTERVAL_SECONDS", 300, minimum=10)
DEAD_LETTER_AUTO_REQUEUE_BATCH = env_int("DEAD_LETTER_AUTO_REQUEUE_BATCH", 100, minimum=1)
# The admin's pipeline health page: WebSocket push interval and the throughput window.
ADMIN_HEALTH_PUSH_SECONDS = env_float("ADMIN_HEALTH_PUSH_SECONDS", 2.0, minimum=0.2)
ADMIN_HEALTH_THROUGHPUT_MINUTES = env_int("ADMIN_HEALTH_THROUGHPUT_MINUTES", 10, minimum=1)

# No token or query string reaches a log line (eigenflux.logredact): every record is redacted when it is made,
# and tracebacks when they are formatted. uvicorn's and rq's loggers write through the same handler.
logredact.install()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {
            "()": "eigenflux.logredact.RedactingFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        },
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "stream": sys.stderr}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        # The HTTP clients log every request at INFO; one line per model call is already in LLMCall.
        **{name: {"level": "WARNING"} for name in ("pgserver", "httpx", "httpx2", "httpcore", "openai")},
        **{name: {"handlers": ["console"], "propagate": False} for name in ("uvicorn", "uvicorn.access", "rq")},
        "uvicorn.error": {"handlers": [], "propagate": True},
    },
}

# --- Stream runtime (SPEC §5) -------------------------------------------------------------------
# Handler threads per consumer in each run_pipeline process (overridden by --concurrency).
PIPELINE_CONCURRENCY = env_int("PIPELINE_CONCURRENCY", 8, minimum=1)
# A handler's lease: heartbeats renew it every third of this; entries idle longer are reclaimed.
PIPELINE_LEASE_SECONDS = env_float("PIPELINE_LEASE_SECONDS", 30.0, minimum=0.1)
# Deliveries of an entry before a transient failure is dead-lettered, and the backoff between them.
PIPELINE_MAX_RETRIES = env_int("PIPELINE_MAX_RETRIES", 3, minimum=1)
PIPELINE_RETRY_BASE_SECONDS = env_float("PIPELINE_RETRY_BASE_SECONDS", 2.0, minimum=0.0)
PIPELINE_RETRY_MAX_SECONDS = env_float("PIPELINE_RETRY_MAX_SECONDS", 300.0, minimum=0.0)
# XREADGROUP BLOCK; also bounds how long a stop request waits for the reader.
PIPELINE_BLOCK_MS = env_int("PIPELINE_BLOCK_MS", 2000, minimum=1)
# On SIGTERM/SIGINT, running handlers get this long to finish before they are cancelled.
PIPELINE_GRACE_SECONDS = env_float("PIPELINE_GRACE_SECONDS", 20.0, minimum=0.0)
# --burst waits for retries due within this many seconds; later ones stay pending for the next run.
PIPELINE_BURST_RETRY_HORIZON_SECONDS = env_float("PIPELINE_BURST_RETRY_HORIZON_SECONDS", 30.0, minimum=0.0)
# Outbox relay: rows per SKIP LOCKED batch, poll fallback to LISTEN/NOTIFY, lifetime of the once-mark.
PIPELINE_RELAY_BATCH = env_int("PIPELINE_RELAY_BATCH", 100, minimum=1)
PIPELINE_RELAY_POLL_SECONDS = env_float("PIPELINE_RELAY_POLL_SECONDS", 1.0, minimum=0.01)
PIPELINE_RELAY_MAX_BACKOFF_SECONDS = env_float("PIPELINE_RELAY_MAX_BACKOFF_SECONDS", 30.0, minimum=0.1)
PIPELINE_RELAY_MARK_TTL_SECONDS = env_int("PIPELINE_RELAY_MARK_TTL_SECONDS", 24 * 3600, minimum=60)
# Housekeeping: items pending/processing longer than the deadline are re-published (replay set).
PIPELINE_SWEEPER_DEADLINE_SECONDS = env_float("PIPELINE_SWEEPER_DEADLINE_SECONDS", 900.0, minimum=1.0)
PIPELINE_SWEEPER_INTERVAL_SECONDS = env_float("PIPELINE_SWEEPER_INTERVAL_SECONDS", 60.0, minimum=1.0)
PIPELINE_TRIM_INTERVAL_SECONDS = env_float("PIPELINE_TRIM_INTERVAL_SECONDS", 60.0, minimum=1.0)
PIPELINE_LAG_POLL_SECONDS = env_float("PIPELINE_LAG_POLL_SECONDS", 10.0, minimum=0.1)
# Prometheus endpoint of each run_pipeline process (0 = off; a busy port is logged and skipped).
PIPELINE_METRICS_PORT = env_int("PIPELINE_METRICS_PORT", 9108, minimum=0)
# Extra consumer modules to import (comma-separated), e.g. test consumers; the product's are in pipeline.consumers.
PIPELINE_EXTRA_CONSUMER_MODULES = env_list("PIPELINE_EXTRA_CONSUMER_MODULES", [])
