"""Entry point: builds the parser from the subcommand modules and turns errors into messages.

Each subcommand lives in ``willitscale/cli/<name>.py`` and exposes ``register(subparsers)``,
which adds its parser and sets ``run=<function(args) -> int | None>``. Subcommand modules keep
their heavy imports (numpy, the model core, torch, matplotlib) inside their run functions so
``willitscale --help`` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import re
import sys
from collections.abc import Sequence

from willitscale.errors import WillItScaleError

# ``willitscale --help`` groups them as ``cli/helptext.py`` says (the main job first).
COMMAND_MODULES: tuple[str, ...] = (
    "estimate", "scale", "plan", "requirements", "size", "report", "hardware", "model",
    "collective", "fabric", "bench", "results", "emulate", "calibrate", "validate",
)

DEBUG_ENV = "WILLITSCALE_DEBUG"
#: an argument that starts like a negative number ("-5", "-.5", "-1e3", "-5GB"): a value
NEGATIVE_VALUE = re.compile(r"^-\.?\d")


#: flags whose value may be empty
EMPTY_ALLOWED = frozenset({"label"})


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error exits 2 with one clear line and the usage, and help keeps
    the paragraphs and examples of descriptions and epilogs (:class:`cli.helptext.HelpFormatter`)."""

    def __init__(self, *args, **kwargs):
        from willitscale.cli.helptext import HelpFormatter

        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        # "-5GB", "-1e3", "-0.5s" are values (which the flag's own check then refuses with its
        # reason), not unknown options: argparse's own pattern only knows bare numbers
        self._negative_number_matcher = NEGATIVE_VALUE

    def _get_value(self, action, arg_string):
        # an empty value ("--nodes ''", a shell variable that was not set) was read as "not
        # given" and the default used without a word; a label may be empty
        if action.option_strings and not arg_string.strip() and action.dest not in EMPTY_ALLOWED:
            raise argparse.ArgumentError(action, "an empty value: give one, or leave the flag out")
        # ``type=float`` takes "nan", "inf" and "1e400" (= inf): no flag means any of them
        value = super()._get_value(action, arg_string)
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentError(action, f"{arg_string!r} is not a finite number")
        return value

    def error(self, message: str):  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"error: {message}\n")


def os_error_text(exc: OSError) -> str:
    """``cannot use '/dev/full': No space left on device`` -- what failed, on which file."""
    what = exc.strerror or str(exc)
    where = exc.filename if exc.filename is not None else None
    return f"cannot use {where!r}: {what}" if where is not None else what


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="willitscale", usage="%(prog)s [-h] [--version] COMMAND ...",
        description=(
            "Will this training job scale on this GPU cluster's network, and if not, what is "
            "the bottleneck and what would fix it? Run with no command for the estimate and "
            "scaling table of the default scenario; `willitscale COMMAND --help` for a "
            "command's flags and examples."
        ),
    )
    from willitscale import __version__

    parser.add_argument("--version", action="version", version=f"willitscale {__version__}")
    # listed by helptext.overview (grouped), not by argparse
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser,
                                help=argparse.SUPPRESS, prog="willitscale")
    for name in COMMAND_MODULES:
        importlib.import_module(f"willitscale.cli.{name}").register(sub)
    from willitscale.cli.helptext import EXAMPLES, examples, overview

    parser.description += "\n\n" + overview(sub)
    parser.epilog = examples(*EXAMPLES)
    return parser


def run_default_job() -> int | None:
    """The main job on the built-in defaults (README's first command)."""
    if "estimate" in COMMAND_MODULES:
        return importlib.import_module("willitscale.cli.estimate").run_default()
    build_parser().print_help()
    return 0


def _never_group_or_world_writable() -> None:
    """Whatever the umask (000 in some containers and daemons), nothing willitscale creates --
    plots, traces, HTML, exports, calibrations -- is writable by other users: the umask is
    widened to mask group and world write. (The results store is private: 0600, 0700.)"""
    os.umask(os.umask(0o022) | 0o022)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _never_group_or_world_writable()
    try:
        if not argv:
            code = run_default_job()
        else:
            args = build_parser().parse_args(argv)
            if getattr(args, "run", None) is None:
                build_parser().parse_args([*argv, "--help"])
                return 2
            code = args.run(args)
    except WillItScaleError as exc:
        if os.environ.get(DEBUG_ENV):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `willitscale ... | head`
        sys.stderr.close()
        return 0
    except OSError as exc:  # the file system said no (disk full, no permission, ...): not a bug
        if os.environ.get(DEBUG_ENV):
            raise
        print(f"error: {os_error_text(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - last line of defence: no traceback for users
        if os.environ.get(DEBUG_ENV):
            raise
        print(
            f"internal error: {type(exc).__name__}: {exc}\n"
            f"This is a bug in willitscale; rerun with {DEBUG_ENV}=1 for the traceback and report it.",
            file=sys.stderr,
        )
        return 3
    return int(code or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
