"""serverless-scheduler's domain: jobs, runs, schedules, the due index and the services
that claim, enqueue and execute runs. Pure modules (see `tests/unit/test_architecture.py`)
never import boto3; adapters (`adapters/dynamodb`, `queues`, `targets`) do, behind the
ports."""
