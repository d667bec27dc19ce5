"""``python -m willitscale.bench <collectives|matmul|train> ...`` = ``willitscale bench ...``.

This is the form to give torchrun (``torchrun --nproc-per-node 8 -m willitscale.bench
collectives -b 1MB -e 1GB``): with ``RANK``/``WORLD_SIZE`` set, the process runs as one worker
of the job instead of spawning its own.
"""

import sys

from willitscale.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
