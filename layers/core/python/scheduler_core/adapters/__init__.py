"""Adapters: the ports (`scheduler_core.ports`) on AWS — the jobs table (`dynamodb`), the
priority queues (`queues`), the targets a run calls (`targets`), the create's idempotency
record (`idempotency`) — and the one AWS client factory they share (`aws`)."""
