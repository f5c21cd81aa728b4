"""Versions as git commits (docs/spec/PROTOCOL.md section 18, `ce serve --git`, `ce export FILE --git`).

When the document is inside a git work tree, each committed version (not the
host's own saves, unless `all_saves`) becomes a commit on the current branch
that changes only that file: the agent is the author (`NAME
<participant_id@commonroom.invalid>`), the proposal summary the subject, and
the message ends with the trailers `Reviewed-by:` (the approver, or the
policy) and `Commonroom-Version:`. The index entry of the file is updated to
the committed blob, so `git status` stays clean.

A dirty index (anything staged) means no commit: one line on stderr, the room
goes on. Export and a restarted room skip the versions the branch already has
(the newest `Commonroom-Version:` trailer on a commit touching the file), so
both are idempotent.

Library: dulwich (pure Python, no system library; pygit2 needs libgit2 in its
wheel and the git CLI a process per commit). It is imported only here.

The engine calls `on_document_change` (a hook) inside the transaction to
read what the commit will say, and runs the git write after the transaction
and the file write landed (`Tx.after_commit`), so a refused version is never
committed to git.
"""

from __future__ import annotations

import os
import re
import sqlite3
import stat
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final

import attrs

from commonroom.engine.snapshot import Snapshot
from commonroom.engine.tx import Tx
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.timefmt import parse_ts

if TYPE_CHECKING:
    from dulwich.repo import Repo

TRAILER: Final = "Commonroom-Version"
EMAIL_DOMAIN: Final = "commonroom.invalid"
WORKSPACE_TRAILER: Final = "Commonroom-Workspace"
_TRAILER_LINE: Final = re.compile(rb"^Commonroom-Version: (\d+)\s*$", re.MULTILINE)
_WORKSPACE_LINE: Final = re.compile(rb"^Commonroom-Workspace: (\S+)\s*$", re.MULTILINE)
_SKIPPED_SOURCES: Final = frozenset({"initial"})
_HOST_SOURCES: Final = frozenset({"external"})
_NAME_UNSAFE: Final = re.compile(r"[<>\n\r\x00]")
HISTORY_SCAN: Final = 10_000
"""How many commits touching the file are searched for the last exported version."""


@attrs.frozen
class VersionCommit:
    """What one version's git commit says."""

    version: int
    summary: str
    author_name: str
    author_id: str | None
    reviewer: str | None
    """`Reviewed-by:` value, or None (the host's own versions)."""
    created_at: str
    source: str


def _identity(name: str, participant_id: str | None) -> bytes:
    clean = _NAME_UNSAFE.sub("", name).strip() or "participant"
    local = participant_id or "host"
    return f"{clean} <{local}@{EMAIL_DOMAIN}>".encode()


def check_work_tree(document: Path) -> None:
    """Refuse `--git` for a file outside a git work tree, before anything opens."""
    work_tree(document).close()


def work_tree(document: Path) -> Repo:
    """The git repository whose work tree holds `document`; a clear refusal outside one."""
    from dulwich.errors import NotGitRepository
    from dulwich.repo import Repo

    try:
        return Repo.discover(str(document.resolve().parent))
    except NotGitRepository:
        raise CommonroomError(
            "invalid_request",
            f"{document.name} is not inside a git work tree: run `git init` in its folder,"
            " or leave out --git", {"field": "git"},
        ) from None


class GitSync:
    """The git work tree around one document, and the commits the room makes in it."""

    def __init__(self, document: Path, workspace_id: str, *, all_saves: bool = False,
                 report: Callable[[str], None] | None = None) -> None:
        document = document.resolve()
        self.repo = work_tree(document)
        root = Path(self.repo.path).resolve()
        self.document = document
        self.relpath = document.relative_to(root).as_posix().encode()
        self.workspace_id = workspace_id
        self.all_saves = all_saves
        self.report = report or (lambda line: None)
        self.last_version = self.exported_version()

    def close(self) -> None:
        self.repo.close()

    # -- what the branch has

    def exported_version(self) -> int:
        """The newest version of this room's history the branch has a commit of (0: none).

        Only commits of this workspace count: a new sidecar on the same file starts at
        version 1 again, and must not be taken for one the branch already has.
        """
        try:
            head = self.repo.head()
        except KeyError:
            return 0
        walker = self.repo.get_walker(include=[head], paths=[self.relpath], max_entries=HISTORY_SCAN)
        mine = self.workspace_id.encode()
        for entry in walker:
            message = entry.commit.message
            found = _TRAILER_LINE.findall(message)
            if found and mine in _WORKSPACE_LINE.findall(message):
                return int(found[-1])
        return 0

    def wants(self, commit: VersionCommit) -> bool:
        if commit.source in _SKIPPED_SOURCES or commit.version <= self.last_version:
            return False
        return self.all_saves or commit.source not in _HOST_SOURCES

    # -- writing one

    def staged_changes(self) -> list[bytes]:
        """Paths whose index entry differs from HEAD's tree (what `git diff --cached` names)."""
        index = self.repo.open_index()
        try:
            tree = self.repo[self.repo.head()].tree  # type: ignore[attr-defined]
        except KeyError:  # no commit yet: everything in the index is staged
            return list(index.paths())
        return [new or old or b"" for (old, new), _, _ in
                index.changes_from_tree(self.repo.object_store, tree)]

    def record(self, commit: VersionCommit, data: bytes) -> str | None:
        """Commit `data` as the file's content; the commit id, or None when refused (reported)."""
        if not self.wants(commit):
            return None
        staged = self.staged_changes()
        if staged:
            which = "the document has" if self.relpath in staged else "the index has"
            self.report(f"commonroom: git: version {commit.version} not committed: {which} staged"
                        " changes (commit or unstage them; the room goes on)")
            return None
        sha = self._commit(commit, data)
        self.last_version = commit.version
        return sha

    def _commit(self, commit: VersionCommit, data: bytes) -> str:
        from dulwich.index import IndexEntry, index_entry_from_stat
        from dulwich.objects import Blob
        from dulwich.repo import get_user_identity

        blob = Blob.from_string(data)
        self.repo.object_store.add_object(blob)
        index = self.repo.open_index()
        try:
            info = os.stat(self.document)
            on_disk = self.document.read_bytes() == data
        except OSError:
            info, on_disk = None, False
        mode = stat.S_IFREG | 0o644
        if info is not None and info.st_mode & 0o100:
            mode = stat.S_IFREG | 0o755
        if info is not None and on_disk:
            entry = index_entry_from_stat(info, blob.id, mode)
        else:  # the file moved on already: no stat, so git looks at it again
            entry = IndexEntry(ctime=(0, 0), mtime=(0, 0), dev=0, ino=0, mode=mode, uid=0, gid=0,
                               size=0, sha=blob.id)
        index[self.relpath] = entry
        index.write()
        moment = parse_ts(commit.created_at)
        author = _identity(commit.author_name, commit.author_id)
        try:
            committer = get_user_identity(self.repo.get_config_stack())
        except Exception:  # no identity configured: the room's own
            committer = f"commonroom <room@{EMAIL_DOMAIN}>".encode()
        sha = self.repo.get_worktree().commit(
            message=_message(commit, self.workspace_id).encode(), author=author,
            committer=committer,
            author_timestamp=_seconds(moment), author_timezone=0,
            commit_timestamp=_seconds(moment), commit_timezone=0, no_verify=True,
        )
        return sha.decode() if isinstance(sha, bytes) else str(sha)


def _seconds(moment: datetime) -> int:
    return int(moment.timestamp())


def _message(commit: VersionCommit, workspace_id: str) -> str:
    subject = " ".join(commit.summary.split()) or f"version {commit.version}"
    trailers = []
    if commit.reviewer:
        trailers.append(f"Reviewed-by: {commit.reviewer}")
    trailers.append(f"{TRAILER}: {commit.version}")
    trailers.append(f"{WORKSPACE_TRAILER}: {workspace_id}")
    return f"{subject}\n\n" + "\n".join(trailers) + "\n"


# -- reading what a version's commit says ---------------------------------------------


def _names(conn: sqlite3.Connection) -> dict[str, str]:
    return dict(conn.execute("SELECT participant_id, name FROM participants").fetchall())


def describe(conn: sqlite3.Connection, version: int, host_id: str | None,
             names: dict[str, str] | None = None) -> VersionCommit:
    """The commit of `version`: author (a proposal's author), subject, reviewer."""
    names = _names(conn) if names is None else names
    row = conn.execute(
        "SELECT v.summary, v.participant_id, v.source, v.created_at, p.participant_id,"
        " p.reviewer_id FROM versions v LEFT JOIN proposals p ON p.proposal_id = v.proposal_id"
        " WHERE v.version = ?", (version,),
    ).fetchone()
    summary, committer, source, created_at, author, reviewer_id = row
    who = author or committer or host_id
    name = names.get(who or "", "host") if source != "external" else "host editor"
    reviewer = None
    if reviewer_id:
        if reviewer_id.startswith("policy:"):
            reviewer = f"auto-approve {reviewer_id[len('policy:'):]}"
        else:
            reviewer = _identity(names.get(reviewer_id, "reviewer"), reviewer_id).decode()
    return VersionCommit(version, summary, name, who, reviewer, created_at, source)


def on_document_change(tx: Tx, before: Snapshot, after: Snapshot, committed: str | None) -> None:
    """The hook: once this version landed, commit it in git (`Engine.git`, when serving --git)."""
    git = tx.engine.git
    if git is None:
        return
    commit = describe(tx.conn, after.version, tx.engine.host_participant_id)
    if not git.wants(commit):
        return
    data = after.data

    def land() -> None:
        try:
            git.record(commit, data)
        except Exception as exc:  # the room goes on whatever git says
            git.report(f"commonroom: git: version {commit.version} not committed: "
                       f"{type(exc).__name__}: {exc}")

    tx.after_commit.append(land)


def export(document: Path, sidecar: Path, *, all_saves: bool = False,
           report: Callable[[str], None] | None = None) -> list[int]:
    """`ce export FILE --git`: commit every version the branch lacks; the versions committed."""
    from commonroom.store import blobs

    work_tree(document).close()  # outside a work tree: say so before anything else
    with _read_only(sidecar) as conn:
        workspace = conn.execute("SELECT value FROM meta WHERE key = 'workspace_id'").fetchone()
        git = GitSync(document, str(workspace[0]), all_saves=all_saves, report=report)
        done: list[int] = []
        try:
            host = conn.execute("SELECT participant_id FROM participants WHERE is_host = 1"
                                ).fetchone()
            names = _names(conn)
            for (version,) in conn.execute(
                    "SELECT version FROM versions WHERE version > ? ORDER BY version",
                    (git.last_version,)).fetchall():
                commit = describe(conn, version, host[0] if host else None, names)
                if not git.wants(commit):
                    continue
                manifest = conn.execute("SELECT manifest FROM versions WHERE version = ?",
                                        (version,)).fetchone()[0]
                data, _ = blobs.load_layout(conn, manifest)
                if git.record(commit, data) is not None:
                    done.append(version)
                else:
                    break  # refused (reported): later versions would build on a gap
        finally:
            git.close()
    return done


class _read_only:
    def __init__(self, sidecar: Path) -> None:
        self.sidecar = sidecar

    def __enter__(self) -> sqlite3.Connection:
        if not self.sidecar.exists():
            raise CommonroomError("invalid_request",
                                  f"no room history beside the document ({self.sidecar.name})")
        self.conn = sqlite3.connect(f"file:{self.sidecar}?mode=ro", uri=True)
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

