"""hbfsim.engine's one-line status: built, stale or missing, and how to build it. These run
whether or not the extension is built (the differential tests live in tests/engine/)."""

import pytest

from hbfsim import engine


def test_missing_extension_names_the_build_command(monkeypatch):
    monkeypatch.setattr(engine, "_engine", None)
    monkeypatch.setattr(engine, "_WHY", "No module named 'hbfsim._engine'")
    line = engine.engine_status()
    assert "\n" not in line
    assert line.startswith("compiled engine: not built")
    assert f"`{engine.BUILD_COMMAND}`" in line
    assert not engine.compiled_available()
    with pytest.raises(ImportError, match="not built"):
        engine.compiled_media(None)


@pytest.mark.skipif(not engine.compiled_available(), reason=engine.engine_status())
def test_built_extension_reports_its_sources(tmp_path, monkeypatch):
    assert engine.engine_status().startswith("compiled engine: built (")
    # another engine/ than the one built from: stale, with the rebuild command
    (tmp_path / "media.cpp").write_text("// changed\n")
    monkeypatch.setattr(engine, "_SOURCES", tmp_path)
    assert engine.stale()
    line = engine.engine_status()
    assert "stale" in line and f"`{engine.BUILD_COMMAND}`" in line
    with pytest.raises(ImportError, match="stale"):
        engine.require_compiled()


def test_source_hash_follows_an_edit(tmp_path, monkeypatch):
    # the hash is cached per (path, mtime, size) of the sources: an edit, an added file
    # and a removed one each give the hash of what is there now
    monkeypatch.setattr(engine, "_SOURCES", tmp_path)
    (tmp_path / "sub").mkdir()
    f = tmp_path / "sub" / "a.cpp"
    f.write_text("int a;\n")
    first = engine._source_hash()
    assert engine._source_hash() == first
    f.write_text("int ab;\n")
    edited = engine._source_hash()
    assert edited not in (None, first)
    g = tmp_path / "b.hpp"
    g.write_text("// b\n")
    added = engine._source_hash()
    assert added not in (first, edited)
    g.unlink()
    assert engine._source_hash() == edited
    f.unlink()
    assert engine._source_hash() is None


def test_staleness_check_holds_for_its_time(tmp_path, monkeypatch):
    # every run_compiled* call checks staleness; one check answers for STALE_CHECK_SECONDS,
    # so a loop of small runs does not list engine/ each call, and an edit is still seen
    # by the first call that much later
    (tmp_path / "a.cpp").write_text("int a;\n")
    monkeypatch.setattr(engine, "_SOURCES", tmp_path)
    built = type("Built", (), {"SOURCE_HASH": engine._source_hash()})
    monkeypatch.setattr(engine, "_engine", built)
    now = [100.0]
    monkeypatch.setattr(engine, "_clock", lambda: now[0])
    listed = []
    signature = engine._source_signature
    monkeypatch.setattr(engine, "_source_signature", lambda root: listed.append(root)
                        or signature(root))
    assert not engine.stale()
    (tmp_path / "a.cpp").write_text("int ab;\n")
    now[0] += engine.STALE_CHECK_SECONDS / 2
    assert not engine.stale() and not engine.stale()   # the first check's answer
    assert len(listed) == 1
    now[0] += engine.STALE_CHECK_SECONDS / 2
    assert engine.stale()                              # the edit, once the time is up
    assert len(listed) == 2
    with pytest.raises(ImportError, match="stale"):
        engine.require_compiled()
