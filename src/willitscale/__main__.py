"""``python -m willitscale ...`` = ``willitscale ...``.

The form to give torchrun: ``torchrun --nproc-per-node 8 -m willitscale bench collectives -b 1MB
-e 1GB`` (with ``RANK``/``WORLD_SIZE`` set, each process runs as one worker of the job).
"""

import sys

from willitscale.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
