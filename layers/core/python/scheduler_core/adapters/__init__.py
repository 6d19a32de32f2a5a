"""Adapters: the ports (`scheduler_core.ports`) on AWS services."""
