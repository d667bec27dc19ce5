"""``python -m willitscale`` is the ``willitscale`` command (the form torchrun is given)."""

import subprocess
import sys

import willitscale


def test_python_m_runs_the_cli_with_its_exit_codes():
    version = subprocess.run([sys.executable, "-m", "willitscale", "--version"],
                             capture_output=True, text=True, timeout=120)
    assert version.returncode == 0 and version.stdout.strip() == f"willitscale {willitscale.__version__}"
    # a user error: status 2 and one line on stderr, as the console script does
    bad = subprocess.run([sys.executable, "-m", "willitscale", "estimate", "--model", "no-such-model"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error: unknown model 'no-such-model'")
    assert "Traceback" not in bad.stderr
