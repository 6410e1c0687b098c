from django.apps import AppConfig

from items.ports import QueryVector, SemanticSearchUnavailable


def _query_embedding(text: str) -> QueryVector:
    """items' query-embedder port (items.ports), served by the model layer (items may not import pipeline)."""
    from pipeline.llm import ModelError, embed
    from pipeline.llm.embeddings import semantic_floor

    try:
        values = embed([text]).value[0]
    except ModelError as exc:
        raise SemanticSearchUnavailable(f"the embedding model failed: {exc.__class__.__name__}") from exc
    return QueryVector(values=values, min_similarity=semantic_floor())


class PipelineConfig(AppConfig):
    name = "pipeline"
    verbose_name = "Pipeline"

    def ready(self) -> None:
        from items import ports
        from pipeline import checks  # noqa: F401  (registers the prompt and embedding system checks)
        from pipeline.consumers.item_publish import claim_holder_gone
        from pipeline.llm.errors import MODEL
        from pipeline.llm.reachability import endpoints_verdict
        from pipeline.models import ConsumedEvent
        from pipeline.runtime import dependencies, use_consumed_events
        from pipeline.suggestions import item_suggestion_enqueue

        ports.connect(
            query_embedder=_query_embedding,
            claim_holder_gone=claim_holder_gone,
            suggestion_requester=item_suggestion_enqueue,
        )
        # The stream engine knows no application: its exactly-once table and the model endpoint's probe (a
        # breaker of its own) are handed to it here.
        use_consumed_events(ConsumedEvent)
        dependencies.register_probe(MODEL, endpoints_verdict)
