"""Settings for the publish benchmark: the product's settings plus the floor view's URL."""

import os

from eigenflux.settings import *  # noqa: F403

ROOT_URLCONF = "bench.floor.urls"

# bench/outbox_wakeup.py's "trigger" mode, the wake-up before migration items.0015: the bench puts the NOTIFY trigger
# back in that mode's database; "trigger" is no OUTBOX_WAKEUP value, so the publisher sends nothing and the relay
# LISTENs (it only stops listening for "poll").
if os.environ.get("BENCH_OUTBOX_WAKEUP") == "trigger":
    OUTBOX_WAKEUP = "trigger"
