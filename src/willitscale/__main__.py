"""``python -m willitscale ...`` = ``willitscale ...``.

The form to give torchrun: ``torchrun --nproc-per-node 8 -m willitscale bench collectives -b 1MB
-e 1GB`` (with ``RANK``/``WORLD_SIZE`` set, each process runs as one worker of the job).

A benchmark worker that stopped early (interrupted, or its job failed) leaves at once once its
output is flushed: its process group may still hold threads talking to peers that are gone,
whose teardown at interpreter exit can block or abort (``terminate called without an active
exception``) -- noise after the real message, or a rank that never exits.
"""

import os
import sys

from willitscale.cli.main import main

if __name__ == "__main__":
    code = main()
    if code and sys.argv[1:2] == ["bench"]:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (BrokenPipeError, ValueError):
                pass
        os._exit(code)
    sys.exit(code)
