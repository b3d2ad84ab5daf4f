"""The file policy of ``priors.cli``: outputs that never destroy, inputs that never hang.

Every refusal is checked twice: the error (``PathError``, a ``ValueError`` naming the
argument; exit status 2 and one line through a command built on ``priors.cli.run``) and
the path itself, which must be exactly what it was (same inode, same kind, same bytes):
``snapshot`` records ``lstat`` before and after. A negative control shows that
``snapshot`` does see a FIFO replaced by a regular file (what ``os.replace`` does).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from support import alarm, snapshot

from priors.cli import (
    ListOf,
    MapOf,
    Parser,
    PathError,
    Record,
    atomic_output,
    check_output_dir,
    check_output_file,
    check_shape,
    read_json_file,
    read_text,
    run,
    write_atomic,
)

#: Seconds a read of a FIFO may take before it counts as a hang (it must not block at all).
ALARM_S = 10


def _fifo(tmp: Path) -> Path:
    path = tmp / "pipe.json"
    os.mkfifo(path)
    return path


def _directory(tmp: Path) -> Path:
    path = tmp / "results.json"
    path.mkdir()
    return path


def _dangling(tmp: Path) -> Path:
    path = tmp / "link.json"
    path.symlink_to(tmp / "nowhere" / "target.json")
    return path


def _link_to_fifo(tmp: Path) -> Path:
    path = tmp / "to_pipe.json"
    path.symlink_to(_fifo(tmp))
    return path


HOSTILE = {
    "fifo": (_fifo, "a FIFO"),
    "directory": (_directory, "a directory"),
    "dangling link": (_dangling, "dangling symbolic link"),
    "link to a fifo": (_link_to_fifo, "a symbolic link to a FIFO"),
}


def _command(argv: list[str]) -> int:
    """A command with one output option, on the scaffold every command shares."""

    def body(args: list[str] | None) -> int:
        parser = Parser(prog="demo")
        parser.add_argument("--out", required=True)
        out = check_output_file(parser.parse_args(args).out, "--out", suffixes=(".json",))
        write_atomic(out, "{}\n", "--out")
        return 0

    return run("demo", body, argv)


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_non_regular_outputs_are_refused_and_untouched(case, tmp_path, capsys):
    make, words = HOSTILE[case]
    path = make(tmp_path)
    before = snapshot(path)
    with pytest.raises(PathError) as info:
        check_output_file(path, "path")
    assert str(info.value).startswith("path: ") and words in str(info.value)
    with pytest.raises(PathError), atomic_output(path, "path"):
        pytest.fail("the block must not run for a refused output")
    with pytest.raises(PathError):
        write_atomic(path, b"x", "path")
    assert _command(["--out", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("demo: error: --out: ") and words in captured.err
    assert snapshot(path) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_snapshot_sees_a_fifo_replaced_by_a_file(tmp_path):
    """Negative control: what an unchecked atomic write does to a FIFO, and that the
    comparison above would catch it."""
    fifo = _fifo(tmp_path)
    before = snapshot(fifo)
    (tmp_path / "new").write_text("x")
    os.replace(tmp_path / "new", fifo)
    assert stat.S_ISREG(os.lstat(fifo).st_mode) and snapshot(fifo) != before


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="no /dev/null (not a POSIX system)")
def test_a_device_is_refused_and_stays_a_device(capsys):
    before = snapshot(Path("/dev/null"))
    with pytest.raises(PathError, match="a character device"):
        check_output_file("/dev/null", "path")
    assert _command(["--out", "/dev/null"]) == 2
    assert "character device" in capsys.readouterr().err
    assert snapshot(Path("/dev/null")) == before
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize("value", ["", "   ", "a\x00b.json"])
def test_empty_and_nul_paths_are_refused(value, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PathError, match=r"^out: "):
        check_output_file(value, "out")
    with pytest.raises(PathError, match=r"^out: "):
        check_output_dir(value, "out")
    assert _command(["--out", value]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_wrong_types_are_refused_by_name():
    for value in (None, 3, b"x.json"):
        with pytest.raises(PathError, match=r"^path: must be a path"):
            check_output_file(value, "path")


def test_missing_directory_and_a_file_as_directory(tmp_path):
    with pytest.raises(PathError, match="does not exist"):
        check_output_file(tmp_path / "no" / "x.json", "path")
    plain = tmp_path / "plain"
    plain.write_text("keep")
    with pytest.raises(PathError, match=r"does not exist|not a directory"):
        check_output_file(plain / "x.json", "path")
    assert plain.read_text() == "keep"


def test_read_only_directory_is_refused(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        probe = ro / "probe"
        try:
            probe.write_text("")
        except PermissionError:
            pass
        else:
            probe.unlink()
            pytest.skip("running as root: a mode-0500 directory is still writable, so no "
                        "read-only directory can be made here")
        before = snapshot(ro)
        with pytest.raises(PathError, match="cannot write in"):
            check_output_file(ro / "x.json", "path")
        with pytest.raises(PathError, match="cannot write in"):
            check_output_dir(ro, "path")
        assert snapshot(ro) == before and list(ro.iterdir()) == []
    finally:
        ro.chmod(0o700)


def test_directory_refusing_a_new_file_is_refused_for_any_user(tmp_path, monkeypatch):
    """The refusal path of a directory where no file can be created, reached as root too:
    the creation of the probe file fails as it does in a read-only directory or mount."""
    import errno

    import priors.cli

    ro = tmp_path / "ro"
    ro.mkdir()
    real_open = os.open

    def deny(path, flags, *args):
        if os.path.dirname(os.fspath(path)) == str(ro) and flags & os.O_CREAT:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        return real_open(path, flags, *args)

    monkeypatch.setattr(priors.cli.os, "open", deny)
    with pytest.raises(PathError, match=r"cannot write in .*Permission denied"):
        check_output_file(ro / "x.json", "path")
    with pytest.raises(PathError, match="cannot write in"):
        check_output_dir(ro, "path")
    assert list(ro.iterdir()) == []
    assert check_output_file(tmp_path / "x.json", "path").name == "x.json"  # others still pass


def test_suffix_must_be_one_the_writer_produces(tmp_path):
    with pytest.raises(PathError, match=r"must end in \.png or \.pdf"):
        check_output_file(tmp_path / "fig.xyz", "--plot", suffixes=(".png", "pdf"))
    assert check_output_file(tmp_path / "fig.PNG", "--plot", suffixes=(".png",)).name == "fig.PNG"
    with pytest.raises(PathError, match="must end in"):
        check_output_file(tmp_path / "noext", "--plot", suffixes=(".png",))


def test_atomic_write_replaces_a_regular_file_and_keeps_its_mode(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("old")
    out.chmod(0o640)
    write_atomic(out, "new", "path")
    assert out.read_text() == "new" and stat.S_IMODE(out.stat().st_mode) == 0o640
    fresh = tmp_path / "fresh.json"
    write_atomic(fresh, b"\x00\x01", "path")
    umask = os.umask(0)
    os.umask(umask)
    assert fresh.read_bytes() == b"\x00\x01"
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.json", "r.json"]


def test_a_failed_write_leaves_the_output_and_no_temporary(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("old")
    before = snapshot(out)
    with pytest.raises(RuntimeError), atomic_output(out, "path") as tmp:
        assert tmp.parent == tmp_path and tmp.suffix == ".json"
        tmp.write_text("half")
        raise RuntimeError("the writer failed")
    assert snapshot(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_output_becoming_a_fifo_meanwhile_is_not_replaced(tmp_path):
    out = tmp_path / "r.json"
    with pytest.raises(PathError, match="FIFO"), atomic_output(out, "path") as tmp:
        tmp.write_text("data")
        os.mkfifo(out)  # someone else's FIFO appears between the check and the rename
    assert stat.S_ISFIFO(os.lstat(out).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_link_to_a_regular_file_writes_through_and_stays_a_link(tmp_path):
    """The documented choice: the link is followed, its target replaced in its own
    directory, the link itself left as it is."""
    (tmp_path / "store").mkdir()
    target = tmp_path / "store" / "results.json"
    target.write_text("old")
    link = tmp_path / "results.json"
    link.symlink_to(target)
    link_before = os.readlink(link)
    write_atomic(link, "new", "path")
    assert os.readlink(link) == link_before and target.read_text() == "new"
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == ["results.json"]


def test_output_directory_policy(tmp_path):
    assert check_output_dir(tmp_path / "a" / "b", "--out") == tmp_path / "a" / "b"
    assert not (tmp_path / "a").exists()  # checking creates nothing
    plain = tmp_path / "plain"
    plain.write_text("x")
    for bad, words in ((plain, "a regular file, not a directory"),
                       (_dangling(tmp_path), "dangling"), (_fifo(tmp_path), "FIFO")):
        before = snapshot(bad)
        with pytest.raises(PathError, match=words):
            check_output_dir(bad, "--out")
        assert snapshot(bad) == before
    with pytest.raises(PathError, match="not a directory"):
        check_output_dir(plain / "sub", "--out")


# ------------------------------------------------------------------------------- reading

SHAPE = Record(required={"areas": MapOf(ListOf(dict))},
               optional={"machine_by_area": MapOf((dict, type(None))), "quick": bool})


def test_previous_results_read_and_checked(tmp_path):
    good = tmp_path / "good.json"
    doc = {"areas": {"margin": [{"a": 1}]}, "machine_by_area": {"margin": None}, "quick": False}
    good.write_text(json.dumps(doc))
    assert read_json_file(good, "--out", shape=SHAPE) == doc
    assert read_json_file(tmp_path / "absent.json", "--out", shape=SHAPE) is None


@pytest.mark.parametrize("content, words", [
    (b'{"areas": {"margin": "x"}, "machine_by_area": []}', "['areas']['margin'] must be an array"),
    (b'{"areas": {}, "machine_by_area": []}', "['machine_by_area'] must be an object"),
    (b"[1, 2]", "must be an object, got an array"),
    (b"not json at all", "is not a JSON file"),
    (b'{"areas": NaN}', "is not a JSON file"),
    (b"\xff\xfe\x00", "not UTF-8"),
    (b"[" * 100000, "is not a JSON file"),
])
def test_malformed_previous_results_refused_by_name(content, words, tmp_path):
    path = tmp_path / "results.json"
    path.write_bytes(content)
    before = snapshot(path)
    with pytest.raises(PathError) as info:
        read_json_file(path, "--out", shape=SHAPE)
    assert str(info.value).startswith("--out: ") and "results.json" in str(info.value)
    assert words in str(info.value)
    assert snapshot(path) == before


def test_size_cap_and_special_files_never_read_whole(tmp_path):
    big = tmp_path / "big.json"
    big.write_text("[" + "0, " * 100 + "0]")
    with pytest.raises(PathError, match="larger than 64 bytes"):
        read_json_file(big, "--out", limit=64)
    fifo = _fifo(tmp_path)
    with alarm(ALARM_S):  # opening a FIFO for reading would block forever
        with pytest.raises(PathError, match="FIFO"):
            read_json_file(fifo, "--out")
        with pytest.raises(PathError, match="FIFO"):
            read_text(str(fifo), "--table")
    if os.path.exists("/dev/zero"):
        with pytest.raises(PathError, match="character device"):
            read_json_file("/dev/zero", "--out")
    with pytest.raises(PathError, match="dangling"):
        read_json_file(_dangling(tmp_path), "--out")
    with pytest.raises(PathError, match="No such file"):
        read_text(str(tmp_path / "absent"), "--table")


def test_check_shape_names_the_place():
    shape = Record(required={"a": ListOf(float)}, closed=True)
    check_shape({"a": [1, 2.5]}, shape)  # an integer is a JSON number
    with pytest.raises(ValueError, match=r"\['a'\]\[1\] must be a number, got true or false"):
        check_shape({"a": [1, True]}, shape)
    with pytest.raises(ValueError, match="unexpected key 'b'"):
        check_shape({"a": [], "b": 1}, shape)
    with pytest.raises(ValueError, match="has no key 'a'"):
        check_shape({}, shape)
