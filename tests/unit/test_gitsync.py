"""engine/gitsync.py on a real repository in tmp_path, read back with the git CLI."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from commonroom.engine.gitsync import GitSync, VersionCommit
from commonroom.protocol.errors import CommonroomError


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True,
                          timeout=30).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "config", "user.name", "Host Person")
    git(tmp_path, "config", "user.email", "host@example.com")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "idea.md").write_text("# Idea\n")
    (tmp_path / "other.txt").write_text("other\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "start")
    return tmp_path


def version(n: int, text: str, *, source: str = "proposal", reviewer: str | None = "Rev <r@x>"
            ) -> tuple[VersionCommit, bytes]:
    commit = VersionCommit(n, f"edit  {n}\nsecond line", "ada <evil>", "pt_ada", reviewer,
                           "2026-12-01T10:00:00.000000+00:00", source)
    return commit, text.encode()


def test_a_version_is_a_commit_of_that_file_only(repo: Path) -> None:
    doc = repo / "docs" / "idea.md"
    sync = GitSync(doc, "ws_one")
    doc.write_text("# Idea\n\nmore\n")  # the room wrote the file first
    sha = sync.record(*version(2, "# Idea\n\nmore\n"))
    assert sha is not None and git(repo, "rev-parse", "HEAD").strip() == sha
    assert git(repo, "show", "--format=", "--name-only", "HEAD").split() == ["docs/idea.md"]
    assert git(repo, "log", "-1", "--format=%an <%ae>|%cn|%s|%aI").strip() == (
        "ada evil <pt_ada@commonroom.invalid>|Host Person|edit 2 second line|"
        "2026-12-01T10:00:00+00:00")
    body = git(repo, "log", "-1", "--format=%b")
    assert "Reviewed-by: Rev <r@x>\nCommonroom-Version: 2\nCommonroom-Workspace: ws_one" in body
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""
    sync.close()
    # a restart resumes after the newest version of *this* workspace only
    again = GitSync(doc, "ws_one")
    assert again.last_version == 2 and again.record(*version(2, "x")) is None
    assert GitSync(doc, "ws_other").last_version == 0


def test_staged_changes_mean_no_commit_and_one_report(repo: Path) -> None:
    doc = repo / "docs" / "idea.md"
    lines: list[str] = []
    sync = GitSync(doc, "ws_one", report=lines.append)
    (repo / "other.txt").write_text("changed\n")
    git(repo, "add", "other.txt")
    head = git(repo, "rev-parse", "HEAD")
    assert sync.record(*version(2, "# Idea\n\nnew\n")) is None
    assert git(repo, "rev-parse", "HEAD") == head
    assert len(lines) == 1 and "the index has staged changes" in lines[0]
    git(repo, "reset", "-q", "other.txt")
    doc.write_text("# Idea\n\nmine\n")
    git(repo, "add", "docs/idea.md")
    assert sync.record(*version(3, "# Idea\n\nnew\n")) is None
    assert "the document has staged changes" in lines[1]


def test_host_saves_only_with_all_saves_and_never_version_one(repo: Path) -> None:
    doc = repo / "docs" / "idea.md"
    assert GitSync(doc, "ws").record(*version(2, "a\n", source="external")) is None
    assert GitSync(doc, "ws").record(*version(1, "a\n", source="initial")) is None
    assert GitSync(doc, "ws", all_saves=True).record(
        *version(2, "a\n", source="external", reviewer=None)) is not None
    assert "Reviewed-by" not in git(repo, "log", "-1", "--format=%b")


def test_outside_a_work_tree_is_refused(tmp_path: Path) -> None:
    doc = tmp_path / "idea.md"
    doc.write_text("# Idea\n")
    with pytest.raises(CommonroomError) as caught:
        GitSync(doc, "ws")
    assert caught.value.code == "invalid_request" and "not inside a git work tree" in (
        caught.value.message)
