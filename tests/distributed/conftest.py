"""Distributed tests spawn Gloo ranks on this CPU; they need torch (the ``bench`` extra)."""

import pytest

pytest.importorskip("torch", reason="torch is not installed: pip install 'willitscale[bench]'")
