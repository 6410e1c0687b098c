"""Reproducible benchmarks, each printing a table (docs/benchmarks.md).

`make bench` (`python -m bench`) runs the scripts BENCHMARKS names, one after another. The other modules here
are not benchmarks and are never run by it: TOOLS write or check labelled data and are run by hand (each says how
in its docstring), SUPPORT are parts the benchmarks import or start. A test fails when a module of bench/ is in
none of the three lists, so a new file needs a decision.
"""

BENCHMARKS = (
    "analyzer_cpu",
    "analyzer_first_use",
    "analyzer_quality",
    "analyzer_quality_content",
    "cluster_throughput",
    "embedding_blend",
    "embedding_cost",
    "fake_server_rate",
    "feed_latency",
    "feed_quality",
    "feed_sim",
    "fresh_pipeline",
    "gate_thresholds",
    "gates_apart",
    "gin_pending",
    "hnsw_recall",
    "impression_write",
    "keyword_cost",
    "load",
    "local_analyzer_accuracy",
    "match_push",
    "model_client",
    "model_handoff",
    "outages",
    "outbox_wakeup",
    "pipeline_floor",
    "pipeline_pg_cost",
    "pipeline_pg_statements",
    "pipeline_throughput",
    "publish_throughput",
    "reembed_rate",
    "relay_latency",
    "review_queue",
    "runtime_throughput",
    "safety_cv",
    "search_latency",
    "search_quality",
    "soak",
    "sqlrows_insert_cost",
    "trace_one_item",
    "tracing_overhead",
    "unseen_feed",
)
# Labelled data: training files written from the sets, the split, the shared loaders (`python -m bench.<name>`).
TOOLS = ("content_sets", "safety_set")
# Imported or started by the benchmarks.
SUPPORT = (
    "cluster_consumers",  # no-op consumers cluster_throughput's run_pipeline processes load
    "corpus_publish",  # publishing a labelled corpus through the agent API
    "feed_network",  # the network feed_latency and others write in bulk
    "filtered_recall",  # hnsw_recall --filtered: filtered semantic search against exact search
    "floor_replay",  # pipeline_floor's replay process
    "fresh_set",  # the fresh sets' loader and tables
    "pg_usage",  # shared buffers per request, memory, the page cache warmed (search_latency, feed_latency)
    "pipeline_local",  # the broadcasts pipeline_throughput --local publishes
    "pipeline_report",  # pipeline_throughput's tables
    "pipeline_timeline",  # where pipeline_throughput's slot time goes
    "pyspy",  # py-spy profiles of benchmark processes
    "scratch",  # a scratch database and Redis db per benchmark
    "seed",  # a network of 10k / 100k / 1M items written in bulk, for the scale benches (--scale)
    "seed_people",  # bench.seed's agents, profiles and history
    "search_labels",  # the search benchmarks' relevance labels
)
