"""Old versions read from their heading index (engine/history.py), and the snapshot cache."""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
import zlib
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from commonroom.engine import dispatch, sessions
from commonroom.engine.core import Engine
from commonroom.engine.dispatch import open_engine
from commonroom.engine.history import StoredOutline, build_index, load_index
from commonroom.engine.ids import sha256_hex
from commonroom.engine.regions import Outline, Span
from commonroom.engine.snapshot import SNAPSHOT_CACHE_BYTES
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.invitation import TransportHint
from commonroom.protocol.records import to_wire
from commonroom.protocol.timefmt import ManualClock
from commonroom.store import blobs, schema
from commonroom.store.schema import migrate
from commonroom.store.versions import store_index
from tests.unit.test_regions import document, resolved


def stored(text: str) -> tuple[Outline, StoredOutline]:
    conn = sqlite3.connect(":memory:")
    migrate(conn)
    data = text.encode("utf-8", "surrogateescape")
    layout = blobs.store_blocks(conn, data)
    full = Outline(text)
    store_index(conn, 1, build_index(full, data, layout))
    index = load_index(conn, 1)
    assert index is not None
    return full, StoredOutline(conn, blobs.Manifest(conn, layout.manifest(conn)), index)


texts = st.one_of(
    document(),
    # non-ASCII titles and bodies: character and byte offsets differ
    document().map(lambda t: t.replace("Text", "Tëxt ✓").replace("item", "ítem 😀")),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_a_stored_outline_answers_like_the_full_one(text: str) -> None:
    full, old = stored(text)
    assert old.paths() == full.paths()
    assert old.text == text
    for heading in full.headings:
        span = full.resolve(heading.path)
        assert old.resolve(heading.path) == span
        assert old.resolve("section:" + heading.path) == full.resolve("section:" + heading.path)
        assert old.region_text(span) == full.region_text(span)
        assert resolved(old, heading.title) == resolved(full, heading.title)
        assert old.has_path(heading.path)
    for name in ("workspace", "*", "", "nope", "#2", "workspace#2"):
        assert resolved(old, name) == resolved(full, name)
        assert old.has_path(name) == full.has_path(name)
    assert old.region_text(full.resolve("workspace")) == text


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document(), st.data())
def test_the_index_built_around_a_change_equals_one_built_from_scratch(text: str, data: st.DataObject) -> None:
    conn = sqlite3.connect(":memory:")
    migrate(conn)
    # sections after the change, so blocks and headings move
    text += "\n\n" + "".join(f"# After {i}\n\nwords\n" for i in range(4))
    raw = text.encode()
    before = Outline(text)
    layout = blobs.store_blocks(conn, raw)
    previous = build_index(before, raw, layout)
    spans = [before.resolve(p) for p in before.paths()] or [before.resolve("workspace")]
    span = data.draw(st.sampled_from(spans))
    content = data.draw(st.one_of(
        document(), st.sampled_from(["", "# New\n", "# A\n# B\n# C\n", "x\n===\n", "```\n"])
    ))
    new_text = text[: span.start] + content + text[span.end :]
    new_raw = new_text.encode()
    outline = before.replaced(span, content)
    new_layout = blobs.store_replacement(
        conn, layout, new_raw, span.start, span.end, span.start + len(content.encode())
    )
    around = build_index(outline, new_raw, new_layout, previous=previous)
    scratch = build_index(Outline(new_text), new_raw, blobs.store_blocks(conn, new_raw))
    assert list(around.ordinals) == list(scratch.ordinals)
    assert list(around.offsets) == list(scratch.offsets)
    assert list(around.starts) == list(scratch.starts) and around.headings == scratch.headings


def big_document(sections: int) -> str:
    return "# Top\n\n" + "".join(
        f"## Section {i}\n\n" + f"Line {i} of the body, some words to fill it.\n" * 30 + "\n"
        for i in range(sections)
    )


def region_commit(engine: Engine, host: str, agent: str, region: str, content: str) -> int:
    prop = dispatch.execute(engine, "workspace.propose", agent, {
        "region": region, "base_version": engine.current_version, "summary": "edit",
        "content": content,
    })
    assert prop.error is None, prop.error
    proposal_id = to_wire(prop.result)["proposal_id"]
    review = dispatch.execute(engine, "workspace.review", host, {"proposal_id": proposal_id,
            "revision": 1, "decision": "approve"})
    assert review.error is None, review.error
    done = dispatch.execute(engine, "workspace.commit", agent, {"proposal_id": proposal_id})
    assert done.error is None, done.error
    return int(to_wire(done.result)["version"])


def agent_session(engine: Engine, host: str) -> str:
    engine.ports.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
    invite = dispatch.execute(engine, "workspace.invite", host, {})
    assert invite.error is None, invite.error
    joined = dispatch.execute(engine, "session.join", None, {"invite": invite.result.invitation, "name": "a"})
    assert joined.error is None, joined.error
    return str(to_wire(joined.result)["session_id"])


def test_old_region_reads_load_only_the_blocks_they_cover(tmp_path: Path) -> None:
    path = tmp_path / "big.md"
    text = big_document(2000)
    path.write_text(text)
    engine = open_engine(path, clock=ManualClock())
    host = sessions.mint_host_session(engine)
    agent = agent_session(engine, host)
    texts = {1: text}
    for n in range(5):
        region = f"Top/Section {100 * n + 7}"
        span = engine.current().outline.resolve(region)
        # more blocks than before: the blocks after the change move
        content = f"## Section {100 * n + 7}\n\nRewritten {n}.\n\n### Sub a\n\nx\n\n### Sub b\n\ny\n\n"
        version = region_commit(engine, host, agent, region, content)
        texts[version] = texts[version - 1][: span.start] + content + texts[version - 1][span.end :]
    assert path.read_text() == texts[engine.current_version]
    engine.versions.cache.clear()
    fetched: list[str] = []
    engine.conn.set_trace_callback(fetched.append)
    read = dispatch.execute(engine, "workspace.read", host, {"region": "Top/Section 1500", "version": 2}).result
    engine.conn.set_trace_callback(None)
    full = Outline(texts[2])
    assert read.content == full.region_text(full.resolve("Top/Section 1500"))
    block_reads = [s for s in fetched if "FROM blocks WHERE id IN" in s]
    # the headings block, position and manifest pieces, the region's own blocks:
    # a dozen at most of the version's thousands
    assert sum(s.count(",") + 1 for s in block_reads) <= 12
    # every version, every region, read cold, is what its text says
    for version, expected in texts.items():
        outline = Outline(expected)
        for region in ("Top", "Top/Section 7", "Top/Section 207", "Top/Section 1999", "workspace"):
            engine.versions.cache.clear()
            got = dispatch.execute(engine, "workspace.read", host, {"region": region, "version": version})
            assert got.error is None and got.result.content == outline.region_text(outline.resolve(region))
    engine.close()


def test_the_cache_holds_outlines_of_old_versions_within_its_bound(tmp_path: Path) -> None:
    path = tmp_path / "doc.md"
    path.write_text(big_document(3000))
    engine = open_engine(path, clock=ManualClock())
    host = sessions.mint_host_session(engine)
    agent = agent_session(engine, host)
    for n in range(12):
        region_commit(engine, host, agent, f"Top/Section {n}", f"## Section {n}\n\nnew {n}\n\n")
    for version in range(1, engine.current_version):
        dispatch.execute(engine, "workspace.read", host, {"region": "Top/Section 5", "version": version})
    cache = engine.versions.cache
    old = [s for v, s in cache.items() if v != engine.current_version]
    assert old and not any(s.in_memory for s in old)
    assert sum(s.footprint() for s in old) <= SNAPSHOT_CACHE_BYTES
    assert cache[engine.current_version].in_memory
    engine.close()


def test_a_sidecar_from_before_the_index_migrates_and_backfills(tmp_path: Path) -> None:
    path = tmp_path / "doc.md"
    path.write_text(big_document(50))
    engine = open_engine(path, clock=ManualClock())
    host = sessions.mint_host_session(engine)
    agent = agent_session(engine, host)
    texts = {1: path.read_text()}
    for n in range(3):
        version = region_commit(engine, host, agent, f"Top/Section {n}", f"## Section {n}\n\nv{n}\n\n")
        texts[version] = path.read_text()
    # make it what an older commonroom left: no index table, first-format manifests
    conn = engine.conn
    for version, manifest in conn.execute("SELECT version, manifest FROM versions").fetchall():
        ids = blobs.decode_manifest(conn, manifest)
        conn.execute("UPDATE versions SET manifest = ? WHERE version = ?",
                     (zlib.compress(blobs._varints(ids), 9), version))
    conn.execute("DROP TABLE version_index")
    engine.close()
    # ... and nothing of the migrations after the index one (schemas 5 and 6, issue 24); on a
    # connection of its own (the engine's undo triggers name every column)
    with contextlib.closing(sqlite3.connect(engine.sidecar_path)) as older:
        older.execute("ALTER TABLE participants DROP COLUMN label")  # narrow policies' labels
        older.execute("DROP INDEX proposals_pending")  # schema 10 (the pending-proposal limit)
        older.execute("DROP INDEX proposals_unpruned")  # schema 9 (pruning by the unpruned)
        # schema 7 (provenance, issue 23)
        older.execute("DROP TABLE blame_sections")
        older.execute("DROP TABLE policies")
        older.execute("DROP INDEX proposals_reviewer")
        older.execute("DELETE FROM meta WHERE key = 'blame_version'")
        for column in ("reverts", "restores"):
            older.execute(f"ALTER TABLE versions DROP COLUMN {column}")
        older.execute("DROP TABLE IF EXISTS owner_logins")  # schema 6 (the page's logins)
        # resident agents (PROTOCOL section 19)
        for table in ("participant_runtimes", "permission_requests"):
            older.execute(f"DROP TABLE IF EXISTS {table}")
        # schema 7 (the review conversation, issue 22)
        for table in ("threads", "thread_comments", "proposal_revisions"):
            older.execute(f"DROP TABLE IF EXISTS {table}")
        for column in ("revision", "rebased", "revised_at"):
            older.execute(f"ALTER TABLE proposals DROP COLUMN {column}")
        for index in ("sessions_invitation", "invitations_creator", "proposals_author",
                      "messages_sender"):
            older.execute(f"DROP INDEX {index}")
        for table, column in (("sessions", "invite_id"), ("invitations", "max_sessions"),
                              ("proposals", "content_bytes"), ("proposals", "pruned_at")):
            older.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        older.execute("DROP TABLE IF EXISTS task_surfaces")  # task surfaces (PROTOCOL.md 20)

        # the host's saves (wave 4): a save's undoes, a vanished lease region
        for table, column in (("versions", "undoes"), ("versions", "undoes_settled"),
                              ("leases", "vanished_at")):
            older.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        # the schema just before the index migration (3 -> 4)
        older.execute("PRAGMA user_version = 3")
        older.commit()

    reopened = open_engine(path, clock=ManualClock())
    assert reopened.conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
    host = sessions.mint_host_session(reopened)
    for version, text in texts.items():
        reopened.versions.cache.clear()
        outline = Outline(text)
        got = dispatch.execute(reopened, "workspace.read", host, {"region": "Top/Section 1", "version": version})
        assert got.result.content == outline.region_text(outline.resolve("Top/Section 1"))
    backfilled = reopened.conn.execute("SELECT count(*) FROM version_index").fetchone()[0]
    assert backfilled == len(texts)
    # and a commit on top of a legacy current version stores against it correctly
    agent = agent_session(reopened, host)
    version = region_commit(reopened, host, agent, "Top/Section 9", "## Section 9\n\nafter\n\n")
    reopened.versions.cache.clear()
    assert reopened.snapshot(version).data == path.read_bytes()
    # blame on a sidecar older than its line history: the history so far is replayed once
    blamed = dispatch.execute(reopened, "workspace.blame", host, {"region": "Top/Section 9"})
    assert blamed.error is None, blamed.error
    assert {line.version for line in blamed.result.lines if line.text == "after"} == {version}
    assert reopened.conn.execute("SELECT max(version) FROM blame_sections").fetchone()[0] == version
    reopened.close()


def test_unknown_old_region_is_an_invalid_region_error(tmp_path: Path) -> None:
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    path = folder / "doc.md"
    path.write_text(big_document(5))
    engine = open_engine(path, clock=ManualClock())
    host = sessions.mint_host_session(engine)
    dispatch.execute(engine, "workspace.commit", host, {"base_version": 1, "summary": "x", "content": "# Other\n"})
    engine.versions.cache.clear()
    outcome = dispatch.execute(engine, "workspace.read", host, {"region": "Nope", "version": 1})
    assert isinstance(outcome.error, CommonroomError) and outcome.error.code == "invalid_region"
    read = dispatch.execute(engine, "workspace.read", host, {"region": "Section 3", "version": 1})
    assert read.result.region == "Top/Section 3"
    assert Span("Top", 0, 1) != engine.snapshot(1).outline.resolve("Top")
    engine.close()


def test_superseded_versions_leave_memory(tmp_path: Path) -> None:
    import gc
    import weakref

    path = tmp_path / "doc.md"
    path.write_text(big_document(300))
    engine = open_engine(path, clock=ManualClock())
    host = sessions.mint_host_session(engine)
    agent = agent_session(engine, host)
    region_commit(engine, host, agent, "Top/Section 3", "## Section 3\n\nfirst\n\n")
    superseded = engine.current()
    assert superseded.index is not None
    index = weakref.ref(superseded.index)
    del superseded
    for n in range(4):
        region_commit(engine, host, agent, f"Top/Section {n + 10}", f"## Section {n + 10}\n\nv{n}\n\n")
    gc.collect()
    # its index is not kept (each new one is built from the one before), nor its text
    assert index() is None
    assert [v for v, s in engine.versions.cache.items() if s.in_memory] == [engine.current_version]
    engine.close()


def test_whole_document_writes_update_the_outline_and_blocks_around_the_change(tmp_path: Path) -> None:
    path = tmp_path / "doc.md"
    text = big_document(200)
    path.write_text(text)
    engine = open_engine(path, clock=ManualClock())
    host = sessions.mint_host_session(engine)
    edits = [
        lambda t: t.replace("## Section 50\n", "## Section fifty\n"),  # a title
        lambda t: t.replace("## Section 60\n", "```\n## Section 60\n", 1),  # an unclosed fence
        lambda t: t.replace("```\n## Section 60\n", "## Section 60\n", 1),  # closed again
        lambda t: t + "\n# Appendix\n\nThe end.\n",  # appended
        lambda t: t[: t.index("## Section 10\n")] + t[t.index("## Section 12\n") :],  # cut
        lambda t: "Intro ✓ non-ASCII\n\n" + t,  # characters and bytes differ from here on
    ]
    for edit in edits:
        text = edit(text)
        done = dispatch.execute(engine, "workspace.commit", host, {
            "base_version": engine.current_version, "summary": "raw", "content": text})
        assert done.error is None, done.error
        current = engine.current()
        assert current.outline.headings == Outline(text).headings
        assert current.layout == blobs.store_blocks(engine.conn, current.data)
    for version in range(1, engine.current_version + 1):
        engine.versions.cache.clear()
        assert sha256_hex(engine.snapshot(version).data) == engine.conn.execute(
            "SELECT content_hash FROM versions WHERE version = ?", (version,)).fetchone()[0]
    engine.close()


def test_an_old_version_whose_blocks_do_not_match_its_hash_is_refused(tmp_path: Path) -> None:
    import pytest

    path = tmp_path / "doc.md"
    path.write_text(big_document(20))
    engine = open_engine(path, clock=ManualClock())
    host = sessions.mint_host_session(engine)
    dispatch.execute(engine, "workspace.commit", host, {"base_version": 1, "summary": "x", "content": "# New\n"})
    (manifest,) = engine.conn.execute("SELECT manifest FROM versions WHERE version = 1").fetchone()
    first = blobs.decode_manifest(engine.conn, manifest)[0]
    engine.conn.execute("UPDATE blocks SET data = ? WHERE id = ?", (zlib.compress(b"tampered"), first))
    engine.versions.cache.clear()
    with pytest.raises(RuntimeError, match="content hash"):
        _ = engine.snapshot(1).data
    engine.close()


def test_a_host_saves_edited_regions_read_a_stored_version_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Which regions a host's save edited, against a stored (evicted) version: its text is
    built from the blocks once, not once per heading (a 1 MB save cost ~2 s of room CPU)."""
    from commonroom.engine.leases import edited_regions

    text = "".join(f"# Section {n}\n\nbody {n}\n\n" for n in range(300))
    full, old = stored(text)
    loads: list[int] = []
    real = blobs.load_blocks
    monkeypatch.setattr(blobs, "load_blocks", lambda conn, ids: loads.append(1) or real(conn, ids))
    after = Outline(text.replace("body 150\n", "body 150, edited\n"))
    assert edited_regions(old, after) == ["Section 150"] == edited_regions(full, after)
    assert len(loads) <= 3  # its text, its headings (a parse of the text); never one a heading
