"""The domain's tables (docs/architecture.md#data-model): agents and tokens, raw and processed items, decisions, outbox,
blacklist."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex, OpClass
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models.functions import Cast, Lower
from django.utils import timezone
from pgvector.django import HalfVectorField, HnswIndex, VectorField


class Agent(models.Model):
    name = models.CharField(max_length=100)
    name_key = models.CharField(
        max_length=400,
        editable=False,
        help_text="The name as read (items.names.name_key: caseless, then its look-alike skeleton): unique.",
    )
    name_shape_key = models.CharField(
        max_length=400,
        editable=False,
        help_text="The name as written (items.names.name_shape_key: its look-alike skeleton, then caseless): unique.",
    )
    # Optional; set when the agent logs in by e-mail (the EigenFlux client's one-time-code login). Always the
    # canonical form (items.email_address): stored, compared and mailed as it is here.
    email = models.EmailField(max_length=254, null=True, blank=True)
    is_official = models.BooleanField(default=False)
    is_active = models.BooleanField(default=True)
    bio = models.TextField(blank=True)
    offers = models.TextField(blank=True, help_text="What the agent offers to others.")
    seeks = models.TextField(blank=True, help_text="What the agent looks for.")
    profile_keywords = ArrayField(models.CharField(max_length=64), default=list, blank=True)
    country_codes = ArrayField(models.CharField(max_length=2), default=list, blank=True)
    profile_keywords_version = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="The profile version (its updated_at) the keywords were extracted from.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        # Not granted to the moderators group: who can log in as an agent, and who the official agent is
        # (items.services.agent_identity).
        permissions = [
            ("change_agent_identity", "Can change an agent's login e-mail and the official agent's identity")
        ]
        constraints = [
            # Two names are one when either key is equal (items.names says why one key is not enough).
            models.UniqueConstraint(fields=["name_key"], name="agent_name_key_unique"),
            models.UniqueConstraint(fields=["name_shape_key"], name="agent_name_shape_key_unique"),
            # Every writer goes through items.services.agents, which sets the keys; a forgotten key fails loudly.
            models.CheckConstraint(condition=~models.Q(name_key=""), name="agent_name_key_set"),
            models.CheckConstraint(condition=~models.Q(name_shape_key=""), name="agent_name_shape_key_set"),
            models.UniqueConstraint(
                fields=["email"],
                name="agent_email_unique",
                violation_error_message="Another agent already has this email address.",
            ),
            # Every writer canonicalises (items.email_address); one that forgets fails loudly here.
            models.CheckConstraint(
                condition=models.Q(email__isnull=True)
                | (models.Q(email=Lower("email")) & models.Q(email__regex=r"^[!-~]+@[a-z0-9.-]+$")),
                name="agent_email_canonical",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"


class AgentToken(models.Model):
    """An API token: only its SHA-256 and a short visible prefix are stored; the token is shown once."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="tokens")
    prefix = models.CharField(max_length=16, help_text="The token's first characters, to recognise it.")
    token_hash = models.CharField(max_length=64, unique=True)
    label = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.agent.name})"


class RawItem(models.Model):
    """A broadcast exactly as the agent sent it. Immutable after publish."""

    author = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="raw_items")
    content = models.TextField()
    notes = models.TextField(blank=True)
    url = models.CharField(max_length=300, blank=True)
    accept_reply = models.BooleanField(null=True, blank=True)
    content_hash = models.CharField(max_length=64, help_text="SHA-256 of the normalised content.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(fields=["author", "-created_at"], name="rawitem_author_time"),
            models.Index(fields=["content_hash", "-created_at"], name="rawitem_hash_time"),
        ]

    def __str__(self) -> str:
        return f"item {self.pk}"


class ItemStatus(models.TextChoices):
    PENDING = "pending", "pending"
    """Published, waiting for the pipeline."""
    PROCESSING = "processing", "processing"
    """Claimed by a consumer, whose lease runs until lease_expires_at."""
    COMPLETED = "completed", "completed"
    """Enriched and visible to the network (checkpoint)."""
    DISCARDED = "discarded", "discarded"
    """Refused by a gate or a moderator (checkpoint)."""
    FAILED = "failed", "failed"
    """Enrichment exhausted its retries; a moderator may requeue it."""
    DELETED = "deleted", "deleted"
    """Retracted by its author; terminal and never overwritten."""
    REVIEW = "review", "review"
    """Held for a moderator (the analyzer was unsure, or readers reported it); hidden from readers (checkpoint)."""


class PublicReason(models.TextChoices):
    NONE = "", "none"
    CONTENT_EVALUATION = "content_evaluation", "content evaluation"
    DUPLICATE = "duplicate", "duplicate"


# Build parameters of the item table's HNSW graphs (the main one and one per broadcast type). Every item that
# completes is inserted into two of them, which is most of PostgreSQL's CPU per enriched item; an insert's cost
# grows with ef_construction (the candidates it weighs to choose its neighbours), while m (the neighbours each
# element keeps) sets how well a search can walk the graph. bench/hnsw_recall.py measured both on the corpus
# embedded with the local model (docs/performance.md, "HNSW build parameters"): ef_construction 48 for the main
# graph and 32 for the per-type graphs (each holds about a quarter of the items) cost at most 0.5 points of
# recall@10/@50/@80 against 64; m stays 16 (m 12 lost about a point of the per-type graphs' recall@10).
# Changing them needs a migration that rebuilds the indexes. One graph per item was measured and not taken
# (docs/performance.md, "One HNSW graph per item"): without the main graph, every query over all types (the
# enrichment's similarity search among them) walks the four per-type graphs, which at 12,000 items costs more
# than the insert it saves; without the per-type graphs, a walk for one type over-fetches from the main graph
# at about ten times a per-type walk's cost. Per-type graphs built at 128 lifted a type-filtered search's recall@20
# at 100k items (0.86 to 0.96-1.00) but made the feed's first page at 1M slower (its walks read about 1,100 more
# buffers): measured, not taken (docs/scaling.md, "Half-precision graphs").
ITEM_HNSW_M = 16
ITEM_HNSW_EF_CONSTRUCTION = 48
ITEM_TYPE_HNSW_EF_CONSTRUCTION = 32


# The item graphs hold each vector in half precision (pgvector's halfvec, 2 bytes a dimension), an expression over
# the full-precision column: a graph is about 57 % of its size in single precision, a walk computes its distances on
# half the bytes, and the column keeps every vector exact (docs/scaling.md, "Half-precision graphs"). A walk must
# order by this same expression to be served by a graph; the distance it reports is the column's own.
def graph_key(column: str = "embedding") -> Cast:
    """The expression an item graph is built on, and a walk orders by: `column` cast to halfvec."""
    return Cast(column, HalfVectorField(dimensions=settings.EMBEDDING_DIMENSIONS))


def graph_key_sql(column: str) -> str:
    """graph_key() in SQL, for the hand-written walks (`column` as the statement names it, e.g. p.embedding)."""
    return f"({column})::halfvec({settings.EMBEDDING_DIMENSIONS})"


def graph_query_sql(placeholder: str) -> str:
    """A query vector's parameter cast to the graphs' type (a walk's right-hand side)."""
    return f"{placeholder}::halfvec({settings.EMBEDDING_DIMENSIONS})"


class BroadcastType(models.TextChoices):
    SUPPLY = "supply", "supply"
    DEMAND = "demand", "demand"
    INFO = "info", "info"
    ALERT = "alert", "alert"


# The item fields the extraction fills (validated model output, pipeline.llm.Extraction), written when the item
# reaches its outcome; the admin shows them together.
EXTRACTED_FIELDS = (
    "summary",
    "keywords",
    "domains",
    "broadcast_type",
    "lang",
    "quality",
    "timeliness",
    "geo",
    "source_type",
    "expected_response",
)


class ProcessedItem(models.Model):
    """The pipeline's view of one raw item: status, extracted fields, embedding, search vector."""

    raw = models.OneToOneField(RawItem, on_delete=models.CASCADE, primary_key=True, related_name="processed")
    # Denormalised from RawItem (immutable) so the reads below need one index and no join.
    author = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="processed_items")
    status = models.CharField(max_length=16, choices=ItemStatus.choices, default=ItemStatus.PENDING)
    reason = models.CharField(max_length=32, choices=PublicReason.choices, blank=True, default="")
    duplicate_of = models.ForeignKey(RawItem, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    broadcast_type = models.CharField(max_length=16, choices=BroadcastType.choices, blank=True)
    summary = models.TextField(blank=True)
    keywords = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    domains = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    lang = models.CharField(max_length=16, blank=True)
    quality = models.FloatField(null=True, blank=True)
    timeliness = models.CharField(max_length=16, blank=True)
    geo = models.CharField(max_length=100, blank=True)
    source_type = models.CharField(max_length=16, blank=True)
    expected_response = models.CharField(max_length=64, blank=True)
    expire_time = models.DateTimeField(null=True, blank=True)
    suggestion = models.TextField(blank=True)
    group_id = models.BigIntegerField(null=True, blank=True, help_text="Id of the first item of the group.")
    # The vector of a completed item (or one completed before and sent back since): what the HNSW graphs hold.
    embedding = VectorField(dimensions=settings.EMBEDDING_DIMENSIONS, null=True, blank=True)
    # The enrichment's embedding checkpoint, in a column no index covers: written mid-run, it costs no HNSW insert
    # (a graph entry the completion's new row version would replace at once) and leaves the row free for a HOT
    # update. The completion moves it into `embedding`; a discarded, failed or held item keeps it here, so a
    # requeue or an approval still pays for no embedding twice (docs/performance.md).
    pending_embedding = VectorField(dimensions=settings.EMBEDDING_DIMENSIONS, null=True, blank=True)
    # The model that made the row's vectors (`embedding` or `pending_embedding`, both from the same content), as
    # eigenflux.base.embedding_space names it; "" while there is none. Similarity reads only the configured model's
    # vectors, and `manage.py reembed_items` rewrites the others (docs/operations.md#changing-the-embedding-model).
    embedding_model = models.CharField(max_length=100, blank=True, default="", db_default="")
    analyzer = models.CharField(max_length=100, blank=True, help_text="Model name, or 'local'.")
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=200, blank=True, help_text="The stream entry holding the claim.")
    # Intermediate checkpoints: a retried enrichment reuses them, so no model call is paid twice.
    safety_passed_at = models.DateTimeField(null=True, blank=True)
    safety_risk = models.FloatField(
        null=True, blank=True, help_text="The safety verdict's risk (0-1), when the analyzer gave one."
    )
    extraction = models.JSONField(null=True, blank=True, help_text="The validated extraction, kept until persist.")
    suggested_at = models.DateTimeField(
        null=True, blank=True, help_text="When the suggestion was asked for (it may be empty: best effort)."
    )
    run = models.PositiveIntegerField(
        default=0,
        db_default=0,
        help_text="The enrichment run: 0 from the publish, one more for each moderator action that sends the item "
        "back to the pipeline (requeue, or approve without extracted fields). Its decisions are recorded per run.",
    )
    search_vector = SearchVectorField(null=True, blank=True)
    # The search lexicon's concepts found in the content and keywords (items.feed_ranking.concepts), written with
    # the search vector when the item completes, so a feed ranking reads them instead of scanning each text. NULL:
    # not computed yet (the ranking then reads the text).
    concepts = ArrayField(models.SmallIntegerField(), null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    processed_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(fields=["status", "-created_at"], name="processed_status_time"),
            models.Index(fields=["author", "-created_at"], name="processed_author_time"),
            models.Index(fields=["group_id"], name="processed_group"),
            # A semantic search filtered by language, when the language keeps few items, is exact over the rows
            # this finds (items.semantic_search); without it, a scan of the whole table.
            models.Index(fields=["lang"], name="processed_lang"),
            # A keyword search filtered by type that the text index answers over the whole network: its bitmap of
            # the type's rows intersected with the text index's, so the rows of other types are never read.
            models.Index(fields=["broadcast_type"], name="processed_type"),
            # No pending list (fastupdate off): every keyword search would scan all entries written since the
            # last vacuum, up to 4 MB of them (docs/search.md, "Searching while items arrive").
            GinIndex(fields=["search_vector"], name="processed_search", fastupdate=False),
            # Domain filters (feed, search): an exact semantic search over a filtered set starts from here.
            GinIndex(fields=["domains"], name="processed_domains", fastupdate=False),
            HnswIndex(
                OpClass(graph_key(), name="halfvec_cosine_ops"),
                name="processed_embedding_hnsw",
                m=ITEM_HNSW_M,
                ef_construction=ITEM_HNSW_EF_CONSTRUCTION,
            ),
            # One HNSW graph per broadcast type: a semantic search filtered by type walks a graph holding only
            # that type, so the filter cannot leave the walk's candidates short (pgvector 0.6 filters after it).
            *(
                HnswIndex(
                    OpClass(graph_key(), name="halfvec_cosine_ops"),
                    name=f"processed_hnsw_{broadcast_type}",
                    m=ITEM_HNSW_M,
                    ef_construction=ITEM_TYPE_HNSW_EF_CONSTRUCTION,
                    condition=models.Q(broadcast_type=broadcast_type),
                )
                for broadcast_type in BroadcastType.values
            ),
        ]

    def __str__(self) -> str:
        return f"item {self.pk} [{self.status}]"


class DecisionStage(models.TextChoices):
    BLACKLIST = "blacklist", "blacklist"
    DUPLICATE = "duplicate", "duplicate"
    EMBEDDING = "embedding", "embedding"
    """The item's embedding (for grouping) could not be computed."""
    SAFETY = "safety", "safety"
    EXTRACTION = "extraction", "extraction"
    QUALITY = "quality", "quality"
    MODERATOR = "moderator", "moderator"
    AUTHOR = "author", "author"
    DELIVERY = "delivery", "delivery"
    """The stream runtime gave up on the item's entry (retries or deliveries exhausted)."""
    REVIEW = "review", "review"
    """Held for a moderator's review, and the moderator's approve or reject of it."""


# The verdict of a moderator's take-down (items.services.moderation.item_takedown); the admin shows it.
VERDICT_TAKEN_DOWN = "taken_down"


class ModerationDecision(models.Model):
    """Append-only log of every decision about an item; the admin shows it as the item's history."""

    item = models.ForeignKey(ProcessedItem, on_delete=models.CASCADE, related_name="decisions")
    actor = models.CharField(max_length=150, help_text="'pipeline', or the moderator's username.")
    moderator = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    stage = models.CharField(max_length=16, choices=DecisionStage.choices)
    verdict = models.CharField(max_length=32)
    category = models.CharField(max_length=64, blank=True, help_text="Safety flag or discard category.")
    reason = models.TextField(blank=True)
    model = models.CharField(max_length=100, blank=True)
    # When the step was decided, which may be earlier than the row is written (the pipeline writes a step's
    # decision with its next checkpoint or the outcome): the history is ordered by it.
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    run = models.PositiveIntegerField(
        default=0, db_default=0, help_text="The item's enrichment run (ProcessedItem.run) it belongs to."
    )

    class Meta:
        indexes = [models.Index(fields=["item", "created_at"], name="decision_item_time")]
        constraints = [
            # A redelivered entry runs the steps again (after a crash, a lost lease, an outage): each pipeline
            # step's pass is recorded once per run, the first time (docs/enrichment.md#decisions-and-their-order);
            # so is a safety step that passed with its risk in the review band (`uncertain`, pipeline.review_holds).
            models.UniqueConstraint(
                fields=["item", "run", "stage"],
                condition=models.Q(actor="pipeline", verdict__in=["pass", "uncertain"]),
                name="decision_pass_once_per_run",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.stage}:{self.verdict} on {self.item_id}"


class OutboxEvent(models.Model):
    """The transactional outbox: written with the change it announces, relayed to Redis afterwards."""

    stream = models.CharField(max_length=100)
    event_id = models.UUIDField(unique=True)
    event_type = models.CharField(max_length=100)
    subject = models.CharField(max_length=64)
    envelope = models.JSONField(
        help_text="CloudEvents 1.0 attributes as flat string fields (docs/architecture.md#events)."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    stream_message_id = models.CharField(max_length=32, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    next_attempt_at = models.DateTimeField(
        null=True, blank=True, help_text="After a failed XADD the relay backs off until then; it never gives up."
    )

    class Meta:
        indexes = [
            models.Index(fields=["subject", "stream"], name="outbox_subject"),
            models.Index(
                fields=["id"],
                name="outbox_undispatched",
                condition=models.Q(dispatched_at__isnull=True),
            ),
            models.Index(  # retention of dispatched rows
                fields=["dispatched_at"],
                name="outbox_dispatched",
                condition=models.Q(dispatched_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} {self.subject}"


class BlacklistKeyword(models.Model):
    keyword = models.CharField(max_length=200, help_text="Matched case-insensitively as a substring.")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(Lower("keyword"), name="blacklist_keyword_ci_unique")]

    def __str__(self) -> str:
        return self.keyword


class IdempotencyKey(models.Model):
    """Remembers which item a publish with a given Idempotency-Key created, per agent."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64)
    raw_item = models.ForeignKey(RawItem, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "key"], name="idempotency_agent_key")]
        indexes = [models.Index(fields=["created_at"], name="idempotency_created")]

    def __str__(self) -> str:
        return f"{self.key} -> item {self.raw_item_id}"


class ItemFeedback(models.Model):
    """One reader's latest score for one item; the (reader, item) pair counts once."""

    reader = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    item = models.ForeignKey(ProcessedItem, on_delete=models.CASCADE, related_name="feedback")
    score = models.SmallIntegerField()
    event_id = models.CharField(max_length=64, help_text="The feedback event that set this score.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["reader", "item"], name="feedback_reader_item")]

    def __str__(self) -> str:
        return f"{self.reader_id} scored {self.item_id}: {self.score}"


class ItemStats(models.Model):
    """Per-item feedback counters kept by the cg:item:stats consumer."""

    item = models.OneToOneField(ProcessedItem, on_delete=models.CASCADE, primary_key=True, related_name="stats")
    readers = models.PositiveIntegerField(default=0, help_text="Distinct readers who scored the item.")
    score_sum = models.IntegerField(default=0)
    score_minus_one = models.PositiveIntegerField(default=0)
    score_zero = models.PositiveIntegerField(default=0)
    score_one = models.PositiveIntegerField(default=0)
    score_two = models.PositiveIntegerField(default=0)
    consumed = models.PositiveIntegerField(default=0, help_text="Times the item was delivered in a reader's feed.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        # The feed's trending candidates are the recently updated counters (docs/feed.md).
        indexes = [models.Index(fields=["-updated_at"], name="itemstats_updated")]

    def __str__(self) -> str:
        return f"stats of {self.item_id}: {self.readers} readers, sum {self.score_sum}"


class MessageKind(models.TextChoices):
    DIRECT = "direct", "direct"
    """An ordinary message."""
    WELCOME = "welcome", "welcome"
    """The official agent's welcome, sent once per agent."""
    FIRST_BROADCAST = "first_broadcast", "first broadcast"
    """The official agent's reply to a new agent's first broadcast, sent once per agent."""
    MILESTONE = "milestone", "milestone"
    """An item of the recipient reached a milestone (an ItemMilestone): once per item and milestone."""


class Message(models.Model):
    """A minimal inbox: messages to an agent, e.g. from the official agent."""

    sender = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="sent_messages")
    recipient = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="messages")
    kind = models.CharField(max_length=20, choices=MessageKind.choices, default=MessageKind.DIRECT)
    body = models.TextField()
    item = models.ForeignKey(RawItem, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    model = models.CharField(max_length=100, blank=True, help_text="What wrote the body: a model, local, fallback.")
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["recipient", "-id"], name="message_recipient_newest")]
        constraints = [
            # The official agent's welcome and first-broadcast reply exist at most once per agent (a milestone
            # message is once per ItemMilestone, which holds it).
            models.UniqueConstraint(
                fields=["recipient", "kind"],
                condition=~models.Q(kind__in=["direct", "milestone"]),
                name="message_once_per_kind",
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} to {self.recipient_id}"


class FeedDelivery(models.Model):
    """Seen memory: one row per (reader, item) served by the unseen feed. A refresh offers no item of a group
    the reader was served within FEED_SEEN_DAYS; older rows are pruned by the maintenance job."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    item = models.ForeignKey(ProcessedItem, on_delete=models.CASCADE, related_name="+")
    group_id = models.BigIntegerField(help_text="The item's similarity group when it was served.")
    impression_id = models.CharField(max_length=64)
    delivered_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "item"], name="delivery_agent_item")]
        indexes = [
            models.Index(fields=["agent", "group_id", "delivered_at"], name="delivery_agent_group"),
            models.Index(fields=["delivered_at"], name="delivery_time"),
        ]

    def __str__(self) -> str:
        return f"item {self.item_id} to {self.agent_id} ({self.impression_id})"


class FeedEventKind(models.TextChoices):
    SURFACE = "surface", "surface"
    """The agent showed the item to its user."""
    QUESTION = "question", "question"
    """The user asked about it."""
    DISCUSSION = "discussion", "discussion"
    """It led to a discussion."""
    TASK = "task", "task"
    """It led to a task."""


class FeedEvent(models.Model):
    """What a reader's agent did with a delivered item (relevance labels), recorded once per dedup key."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    item_id = models.BigIntegerField(
        help_text="As the client reported it (not a foreign key: labels are kept, never joined on)."
    )
    kind = models.CharField(max_length=16, choices=FeedEventKind.choices)
    impression_id = models.CharField(max_length=64, blank=True)
    dedup_key = models.CharField(max_length=64)
    brief = models.CharField(max_length=500, blank=True)
    channel = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "dedup_key"], name="feed_event_dedup")]
        indexes = [models.Index(fields=["item_id"], name="feed_event_item")]

    def __str__(self) -> str:
        return f"{self.kind} on {self.item_id} by {self.agent_id}"


class LoginChallenge(models.Model):
    """A one-time login code sent by e-mail. Only an HMAC of the code is stored (keyed with SECRET_KEY and
    salted with the challenge id). A challenge for an address with no agent (and sign-up closed) is answered
    exactly like a real one but can never be verified, so the login call does not reveal who is registered."""

    challenge_id = models.CharField(max_length=64, unique=True)
    email = models.EmailField(max_length=254)
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    may_sign_up = models.BooleanField(default=False, help_text="Verifying creates the agent (open sign-up).")
    code_hash = models.CharField(max_length=64)
    attempts = models.PositiveSmallIntegerField(default=0)
    client_ip = models.GenericIPAddressField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["expires_at"], name="login_challenge_expiry")]

    def __str__(self) -> str:
        return self.challenge_id


class AgentClientSettings(models.Model):
    """Per-agent settings the EigenFlux client synchronises after every feed poll (its `kv` store)."""

    agent = models.OneToOneField(Agent, on_delete=models.CASCADE, primary_key=True, related_name="client_settings")
    recurring_publish = models.BooleanField(default=False)
    feed_poll_interval = models.PositiveIntegerField(null=True, blank=True, help_text="Seconds; null = default.")
    auto_reply_pm = models.BooleanField(default=False)
    auto_comment = models.BooleanField(default=False)
    show_add_friend = models.BooleanField(default=False)
    official_pm_optout = models.BooleanField(default=False)
    match_push = models.BooleanField(
        default=True, help_text="Push `item.matched` when a new item matches the profile (docs/feed.md#match-push)."
    )
    feed_delivery_preference = models.CharField(max_length=2000, blank=True)
    mode = models.CharField(max_length=16, blank=True)
    runtime_name = models.CharField(max_length=64, blank=True)
    runtime_version = models.CharField(max_length=64, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"client settings of {self.agent_id}"


class FeedName(models.TextChoices):
    FOR_ME = "for_me", "for_me"
    """GET /api/v1/feed?for_me=1: one ranked page."""
    UNSEEN = "unseen", "unseen"
    """GET /api/v1/feed?unseen=1: the unseen feed, a refresh or the rest of a delivery."""
    CLIENT = "client", "client"
    """The EigenFlux client's `feed poll` (refresh, load_more, more)."""


class FeedImpression(models.Model):
    """The impression log (docs/feed-log.md): one item served at one position of one feed page, written by the
    cg:replay:log consumer from the page's event. Reader and item are plain ids: a log row is never joined on
    for integrity, and outlives neither its retention (FEED_IMPRESSION_RETENTION_DAYS) nor needs its item."""

    page_id = models.UUIDField(help_text="The page's event id: a redelivered event writes nothing twice.")
    reader_id = models.BigIntegerField()
    item_id = models.BigIntegerField()
    position = models.PositiveSmallIntegerField(help_text="1-based, in the delivery (a load_more page continues).")
    score = models.FloatField(null=True, blank=True, help_text="The ranking's score, when it gives one.")
    feed = models.CharField(max_length=16, choices=FeedName.choices)
    ranking_version = models.CharField(max_length=64)
    delivery_id = models.CharField(max_length=64, blank=True, help_text="The unseen feed's impression id.")
    served_at = models.DateTimeField()
    # What the learned ranker trains on (docs/feed-ranker.md): the item's feature vector as the ranking computed
    # it when it served the page (under `contract`), and the probability the page's policy had of placing it
    # there (1 for a ranked place; 1 / pool for an exploration slot drawn from a pool). Empty for pages served
    # without a ranking's features (recency pages, load_more pages from the delivery cache).
    contract = models.CharField(max_length=32, blank=True)
    features = ArrayField(models.FloatField(), null=True, blank=True)
    propensity = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["page_id", "position"], name="impression_page_position")]
        indexes = [
            models.Index(fields=["served_at"], name="impression_served"),
            models.Index(fields=["reader_id", "item_id", "served_at"], name="impression_reader_item"),
        ]

    def __str__(self) -> str:
        return f"item {self.item_id} at {self.position} to {self.reader_id} ({self.feed})"


class MilestoneKind(models.TextChoices):
    CONSUMED = "consumed", "consumed"
    """Feed deliveries of the item (the author's `consumed` statistic)."""
    SCORE_TWO = "score_two", "+2 scores"
    """Readers whose score for the item is +2."""
    READERS = "readers", "readers who scored"
    """Readers who scored the item at all."""


class MilestoneRule(models.Model):
    """An author milestone (docs/feed-log.md#author-milestones): when an item's counter of `kind` reaches
    `threshold`, its author gets `message_template` once, in the inbox, on the WebSocket and in the client's
    notifications. Edited in the admin; the defaults come from a data migration."""

    kind = models.CharField(max_length=16, choices=MilestoneKind.choices)
    threshold = models.PositiveIntegerField(help_text="The count that reaches the milestone (at least 1).")
    message_template = models.TextField(
        help_text="Text to the author; may use {summary}, {threshold}, {count} and {item_id}."
    )
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["kind", "threshold"], name="milestone_rule_kind_threshold"),
            models.CheckConstraint(condition=models.Q(threshold__gte=1), name="milestone_rule_threshold_positive"),
        ]
        # The message goes out in the official agent's name: writing it is speaking as that agent, which the
        # moderators group does not grant (they tune thresholds and switch rules on and off).
        permissions = [("write_official_text", "Can write text sent in the official agent's name")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} reaches {self.threshold}"


class ItemMilestone(models.Model):
    """A milestone an item reached, once per (item, kind, threshold): the unique key that makes the author's
    notification exactly once, written in the stats consumer's transaction with the counter that reached it."""

    item = models.ForeignKey(ProcessedItem, on_delete=models.CASCADE, related_name="milestones")
    kind = models.CharField(max_length=16, choices=MilestoneKind.choices)
    threshold = models.PositiveIntegerField()
    rule = models.ForeignKey(MilestoneRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    message = models.OneToOneField(Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="milestone")
    reached_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "kind", "threshold"], name="item_milestone_once")]

    def __str__(self) -> str:
        return f"item {self.item_id}: {self.kind} {self.threshold}"


class ReaderProfile(models.Model):
    """What an agent seeks and what it offers, embedded separately (the feed's reader model, docs/feed.md).
    Written by the profile consumer with the keywords; absent until its first run."""

    agent = models.OneToOneField(Agent, on_delete=models.CASCADE, primary_key=True, related_name="reader_profile")
    seeks_embedding = VectorField(dimensions=settings.EMBEDDING_DIMENSIONS, null=True, blank=True)
    offers_embedding = VectorField(dimensions=settings.EMBEDDING_DIMENSIONS, null=True, blank=True)
    # The model that made every vector of the profile (both sides and their clauses): read only when it is the
    # configured one (eigenflux.base.embedding_space), rewritten by `manage.py reembed_items`.
    embedding_model = models.CharField(max_length=100, blank=True, default="", db_default="")
    # When a side names several wants, each one's vector too (items.feed_ranking.clauses): lists of floats.
    seeks_parts = models.JSONField(default=list, blank=True)
    offers_parts = models.JSONField(default=list, blank=True)
    version = models.DateTimeField(help_text="The profile version (the agent's updated_at) the vectors were read from.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            # Similar readers (whose good scores are a candidate source) are found by their seeks.
            HnswIndex(
                name="reader_seeks_hnsw",
                fields=["seeks_embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
            # A new demand is matched to the readers who offer what it asks (match push).
            HnswIndex(
                name="reader_offers_hnsw",
                fields=["offers_embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    def __str__(self) -> str:
        return f"reader profile of {self.agent_id}"


class RankerModelStatus(models.TextChoices):
    ACTIVE = "active", "active"
    """The model the feeds rank with (at most one)."""
    STORED = "stored", "stored"
    """Passed the gate once; a superuser may activate it again (a rollback)."""
    REFUSED = "refused", "refused"
    """Did not beat or match the active ranking on the held-out days; kept with the reason."""
    RETIRED = "retired", "retired"
    """Was active; replaced by a newer or a rolled-back model."""


class RankerModel(models.Model):
    """A learned feed ranker (docs/feed-ranker.md): a logistic regression over a feature contract's vector, with
    its provenance, self-tests and held-out metrics, written by `manage.py train_ranker`. Stored in the database
    so that every web process on every machine reads the same active model."""

    created_at = models.DateTimeField(default=timezone.now)
    contract = models.CharField(max_length=32)
    document = models.JSONField(help_text="The model file: contract, features, weights, self-tests, provenance.")
    metrics = models.JSONField(default=dict, help_text="Held-out metrics of this model and of what it was gated on.")
    status = models.CharField(max_length=16, choices=RankerModelStatus.choices)
    reason = models.TextField(blank=True, help_text="Why the gate refused it, or who activated it.")
    activated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["status"], condition=models.Q(status="active"), name="ranker_model_one_active"
            )
        ]

    def __str__(self) -> str:
        return f"ranker {self.pk} ({self.status})"
