"""moto in server mode as the local cloud runs it: `python -m infra.local.moto_process -H
HOST -p PORT`. The only difference from `python -m moto.server` is the garbage collector's
thresholds: with the defaults, moto (whose TransactWriteItems deep-copies the table for
rollback) paused 1-2.4 s every half minute under load, making every run due in that time
late; with these, its slowest trivial call measured 0.36 s instead of 1.96 s."""

from __future__ import annotations

import gc
import sys

from moto.server import main

if __name__ == "__main__":
    gc.set_threshold(50_000, 50, 1_000)
    main(sys.argv[1:])
