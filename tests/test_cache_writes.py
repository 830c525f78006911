"""The gate cache's writes under a failing file system (a full disk): no temporary file is left behind,
one warning line names the directory and the error, and nothing raises (the gate goes on uncached).
Deterministic."""

from __future__ import annotations

import errno
import json
import os

import pytest

from dpharness import _cache


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch):
    monkeypatch.setattr(_cache, "_WARNED_DIRS", set(), raising=False)


def _full_disk_dump(obj, fh, **kwargs):
    fh.write('{"partial": ')
    fh.flush()
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_leaves_no_temporary_file_and_warns_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(_cache.json, "dump", _full_disk_dump)
    for i in range(3):
        _cache.record_durations(str(tmp_path), {"laplace": 1.0})
        _cache._write_json(str(tmp_path / f"entry{i}.json"), {"check": i})
    assert os.listdir(tmp_path) == []
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert str(tmp_path) in err and "No space left on device" in err and "warning" in err


def test_an_error_raised_by_the_closing_flush_is_cleaned_up_too(tmp_path, monkeypatch, capsys):
    """Buffered data reaches the disk only when the file is closed: ENOSPC then comes from close()."""
    real_fdopen = os.fdopen

    class _FullOnClose:
        def __init__(self, fh):
            self._fh = fh

        def __getattr__(self, name):
            return getattr(self._fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._fh.close()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(_cache.os, "fdopen", lambda *a, **k: _FullOnClose(real_fdopen(*a, **k)))
    _cache._write_json(str(tmp_path / "entry.json"), {"check": 1})
    assert os.listdir(tmp_path) == []
    assert "No space left on device" in capsys.readouterr().err


def test_a_non_os_error_still_removes_the_temporary_file(tmp_path, monkeypatch):
    def boom(obj, fh, **kwargs):
        fh.write("{")
        raise TypeError("not JSON serialisable")

    monkeypatch.setattr(_cache.json, "dump", boom)
    with pytest.raises(TypeError):
        _cache._write_json(str(tmp_path / "entry.json"), {"check": 1})
    assert os.listdir(tmp_path) == []


def test_a_good_write_is_silent(tmp_path, capsys):
    _cache._write_json(str(tmp_path / "entry.json"), {"check": 1})
    assert json.loads((tmp_path / "entry.json").read_text()) == {"check": 1}
    assert os.listdir(tmp_path) == ["entry.json"] and capsys.readouterr().err == ""
