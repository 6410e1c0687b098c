"""The CloudEvents envelope every stream entry is (docs/architecture.md#events): the limits its producer (the
outbox, items.events) and its consumer (the stream engine, pipeline.runtime.event) both hold it to."""

# Entries over this size are refused at the producer: events carry ids and references, not content.
MAX_ENVELOPE_BYTES = 16 * 1024

REQUIRED_ATTRIBUTES = ("specversion", "id", "source", "type", "subject", "time", "datacontenttype", "data")
