"""The domain: what a job, a schedule, a run and a target are, and the pure rules over them
(schedule math, misfires, overlap, retries, run states). Imports nothing from AWS and nothing
from the services, ports or adapters."""
