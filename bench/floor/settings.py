"""Settings for the publish benchmark: the product's settings plus the floor view's URL."""

from eigenflux.settings import *  # noqa: F403

ROOT_URLCONF = "bench.floor.urls"
