"""Where willitscale keeps its data: ``$WILLITSCALE_HOME``, else the platform's user data
folder (platformdirs is imported only then, so a machine without it works with the variable
set), and the results store's file in it."""

from __future__ import annotations

import os
from pathlib import Path

from willitscale.errors import ConfigError

__all__ = ["HOME_ENV", "home", "store_path"]

HOME_ENV = "WILLITSCALE_HOME"


def home() -> Path:
    """willitscale's data folder: ``$WILLITSCALE_HOME`` or the platform's user data folder."""
    env = os.environ.get(HOME_ENV)
    if env:
        return Path(env).expanduser()
    return Path(_platformdirs().user_data_dir("willitscale"))


def _platformdirs():
    """platformdirs, or an error saying how to do without it (set ``WILLITSCALE_HOME``)."""
    try:
        import platformdirs
    except ImportError:
        raise ConfigError(HOME_ENV, "unset", "a folder for willitscale's data (the default folder "
                          "comes from platformdirs, which is not installed: set WILLITSCALE_HOME "
                          "or pip install platformdirs)") from None
    return platformdirs


def store_path() -> Path:
    """The results store's file: ``home() / "results.sqlite"``."""
    return home() / "results.sqlite"
