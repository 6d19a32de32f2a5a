"""Process-wide test settings: fake AWS credentials (nothing here may reach AWS) and
Powertools configured for tests."""

from __future__ import annotations

import os

_TEST_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "POWERTOOLS_SERVICE_NAME": "serverless-scheduler-tests",
    "POWERTOOLS_METRICS_NAMESPACE": "ServerlessSchedulerTests",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
}
for _name, _value in _TEST_ENV.items():
    os.environ[_name] = _value
os.environ.pop("AWS_ENDPOINT_URL", None)
os.environ.pop("AWS_PROFILE", None)
