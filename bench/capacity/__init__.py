"""The capacity simulation (`make capacity`, issue 10 §1): the real `scheduler_core`
services in virtual time, against in-process moto for AWS's semantics and models of
AWS's latency, partition limits, throttling, SQS delivery and Lambda scaling.

- `kernel`: virtual time. A SimPy environment; production code runs synchronously in
  greenlets and every wait (an AWS call's latency, a sleep) hands control back to SimPy.
- `latency`: how long each AWS call takes, each figure with its source.
- `partitions`: DynamoDB capacity per partition key and per table, and throttling.
- `aws`: sessions whose clients talk to moto through the latency and partition models,
  counting requests and write units.
- `lambdas`: Lambda concurrency, containers, the SQS event source mappings and the
  EventBridge schedule of the poller.
- `scenarios`: validate (against `make bench`'s figures), midnight and steady (sampled:
  a fraction of the jobs run by the production code, the rest as shadow load; the model
  is described there), each also with a tuned setting; `__main__`: the command line.
"""
