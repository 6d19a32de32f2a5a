"""The services: the API's job service, the poller (`dispatch`), the worker (`execution`,
`admission`, `lifecycle`, `heartbeat`) and the re-drive. They decide; they reach AWS only
through the ports (`scheduler_core.ports`), which `scheduler_core.composition` wires to the
adapters."""
