from django.apps import AppConfig

from items.ports import QueryVector, SemanticSearchUnavailable


def _query_embedding(text: str) -> QueryVector:
    """items' query-embedder port (items.ports), served by the model layer (items may not import pipeline)."""
    from pipeline.llm import ModelError, embed
    from pipeline.llm.embeddings import semantic_floor, semantic_tail_floor

    try:
        values = embed([text], query=True).value[0]
    except ModelError as exc:
        raise SemanticSearchUnavailable(f"the embedding model failed: {exc.__class__.__name__}") from exc
    return QueryVector(values=values, min_similarity=semantic_floor(), tail_similarity=semantic_tail_floor())


class PipelineConfig(AppConfig):
    name = "pipeline"
    verbose_name = "Pipeline"

    def ready(self) -> None:
        from items import ports
        from items.events import STREAM_EVENT_TYPES
        from pipeline import checks  # noqa: F401  (registers the prompt and embedding system checks)
        from pipeline.consumers.item_publish import claim_holder_gone
        from pipeline.llm.errors import MODEL
        from pipeline.llm.reachability import endpoints_verdict, model_degraded
        from pipeline.models import ConsumedEvent
        from pipeline.runtime import declare_stream_types, dependencies, use_consumed_events
        from pipeline.suggestions import item_suggestion_enqueue

        ports.connect(
            query_embedder=_query_embedding,
            claim_holder_gone=claim_holder_gone,
            suggestion_requester=item_suggestion_enqueue,
            waiting_reason=model_degraded,
        )
        # The stream engine knows no application: its exactly-once table, the event types each stream carries and
        # the model endpoint's probe (a breaker of its own) are handed to it here.
        use_consumed_events(ConsumedEvent)
        declare_stream_types(STREAM_EVENT_TYPES)
        dependencies.register_probe(MODEL, endpoints_verdict)
