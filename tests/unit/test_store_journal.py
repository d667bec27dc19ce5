"""The store picks SQLite's journal by filesystem: WAL locally, rollback journal on NFS & co."""

from __future__ import annotations

from pathlib import Path

from willitscale.results import store as store_module
from willitscale.results.store import Store, filesystem_type, journal_mode_for

MOUNTS = """\
/dev/sda1 / ext4 rw,relatime 0 0
tmpfs /tmp tmpfs rw 0 0
fs01:/export/home /home nfs4 rw,vers=4.2 0 0
fs01:/scratch /home/ann/my\\040scratch lustre rw 0 0
"""


def test_the_longest_mount_point_above_the_path_wins():
    # /home/ann/x is under "/" and "/home": /home is longer, so nfs4; a path inside the mount
    # whose name has an escaped space (\\040 in /proc/mounts) is on lustre; /homeless is not
    # under /home (prefix of the name, not of the path)
    assert filesystem_type(Path("/home/ann/x"), MOUNTS) == "nfs4"
    assert filesystem_type(Path("/home/ann/my scratch/runs"), MOUNTS) == "lustre"
    assert filesystem_type(Path("/homeless/x"), MOUNTS) == "ext4"
    assert filesystem_type(Path("/tmp"), MOUNTS) == "tmpfs"
    assert filesystem_type(Path("/x"), "") == ""


def test_wal_only_where_every_writer_shares_one_host():
    assert [journal_mode_for(t) for t in ("ext4", "tmpfs", "xfs", "", "nfs4", "lustre", "gpfs")] \
        == ["WAL"] * 4 + ["DELETE"] * 3


def test_a_store_on_nfs_uses_the_rollback_journal_and_keeps_rows(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(store_module, "_local_mounts", lambda: f"srv:/x {tmp_path} nfs rw 0 0\n")
    path = tmp_path / "results.sqlite"
    with Store(path) as store:
        assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        run = store.start_run("collectives", options={}, environment={})
        store.add_row(run, 0, {"seq": 0})
        store.finish_run(run, "complete")
    assert "network filesystem (nfs)" in capsys.readouterr().err
    assert not Path(f"{path}-wal").exists()
    with Store(path) as store:
        assert store.run(run).rows == ({"seq": 0},)
