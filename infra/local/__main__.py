"""`python -m infra.local` (`make run`): the whole scheduler on this machine, offline."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from infra.local.cloud import DEFAULT_CALLER, LocalCloud, LocalCloudOptions


def parse_args(argv: list[str]) -> LocalCloudOptions:
    parser = argparse.ArgumentParser(prog="python -m infra.local", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address to serve on (default: loopback)")
    parser.add_argument("--port", type=int, default=8080, help="API port (default 8080; 0 = any free port)")
    parser.add_argument("--moto-port", type=int, default=0, help="moto's port (default: any free port)")
    parser.add_argument("--caller", default=DEFAULT_CALLER, help="the IAM identity of local API calls")
    parser.add_argument("--cdk-out", type=Path, default=None, help="where to synthesize (default: cdk.out)")
    parser.add_argument("--verbose", action="store_true", help="print every function log line")
    args = parser.parse_args(argv)
    options = LocalCloudOptions(
        host=args.host, api_port=args.port, moto_port=args.moto_port, caller=args.caller, verbose=args.verbose
    )
    if args.cdk_out is not None:
        options.assembly_dir = args.cdk_out
    return options


def main(argv: list[str] | None = None) -> int:
    options = parse_args(sys.argv[1:] if argv is None else argv)
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    print("starting: synthesizing and deploying the stack into moto…", flush=True)
    cloud = LocalCloud(options).start()
    try:
        cloud.describe()
        stopping.wait()
    finally:
        print("stopping…", flush=True)
        cloud.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
