"""serverless-scheduler's domain: jobs, runs, schedules, the due index and the services
that claim, enqueue and execute runs. Pure modules (model, schedule, keys, run_state)
never import boto3; adapters (store, queues, targets) do, behind the ports."""
