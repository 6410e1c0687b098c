"""The pipeline's consumers, one module each; run_pipeline imports every module listed here."""

CONSUMER_MODULES: list[str] = [
    "pipeline.consumers.item_publish",  # cg:item:publish — enrichment (docs/enrichment.md)
    "pipeline.consumers.official_firstbroadcast",  # cg:official:firstbroadcast
    "pipeline.consumers.item_notify",  # cg:item:notify — WebSocket push
    "pipeline.consumers.item_match",  # cg:item:match — match push (docs/feed.md#match-push)
    "pipeline.consumers.audit",  # cg:audit
    "pipeline.consumers.profile_update",  # cg:profile:update
    "pipeline.consumers.official_welcome",  # cg:official:welcome
    "pipeline.consumers.item_stats",  # cg:item:stats — counters and author milestones
    "pipeline.consumers.replay_log",  # cg:replay:log — the impression log (docs/feed-log.md)
    "pipeline.consumers.dead_letter_archive",  # cg:dlq:archive on every {<stream>}:dlq
]


def load_consumers() -> dict:
    """Import the consumer modules (the list above plus PIPELINE_EXTRA_CONSUMER_MODULES): each registers its
    consumer with the stream engine. Returns the engine's registry, consumers by name."""
    import importlib

    from django.conf import settings

    from pipeline.runtime import registry

    for module in [*CONSUMER_MODULES, *settings.PIPELINE_EXTRA_CONSUMER_MODULES]:
        importlib.import_module(module)
    return registry()
