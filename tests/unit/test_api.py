"""The public API: everything in ``__all__`` exists, is documented, and import stays light."""

import subprocess
import sys

import willitscale


def test_every_public_name_resolves_and_has_a_docstring():
    for name in willitscale.__all__:
        obj = getattr(willitscale, name)
        if name != "__version__":
            assert getattr(obj, "__doc__", None), f"{name} has no docstring"


def test_import_and_cli_help_do_not_load_heavy_modules():
    # numpy, torch and matplotlib stay out of `import willitscale` and `willitscale --help`.
    code = (
        "import sys, willitscale, willitscale.cli.main as m; m.build_parser();"
        "heavy = [x for x in ('numpy', 'torch', 'matplotlib', 'scipy', 'networkx') if x in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
