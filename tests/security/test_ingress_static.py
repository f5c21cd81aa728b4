"""Issue 24 item 3: the ingress served `<working folder>/static/**` to anyone, following symlinks.

Quart's default static route is rooted at the process's working folder. The
attack: a `static/passwd -> /etc/passwd` symlink (and a `static/rootdir -> /`
one) beside the document, then `GET /static/passwd` on the ingress without a
bearer. The room is a real `ce serve` whose working folder holds them.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path

from tests.e2e.conftest import SAMPLE, start_room


def _get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_static_files_of_the_working_folder_are_404_on_the_ingress(tmp_path: Path) -> None:
    doc = tmp_path / "idea.md"
    doc.write_text(SAMPLE.read_text())
    static = tmp_path / "static"
    static.mkdir()
    os.symlink("/etc/passwd", static / "passwd")
    os.symlink("/", static / "rootdir")
    (static / "plain.txt").write_text("a file of the working folder\n")
    room = start_room(doc, "--port-ingress", "0")
    try:
        ingress, owner = room.ready["ingress_port"], room.ready["owner_port"]
        for path in ("/static/passwd", "/static/rootdir/etc/passwd", "/static/plain.txt"):
            for port in (ingress, owner):
                status, body = _get(port, path)
                assert status == 404, (port, path, status)
                assert b"root:" not in body and b"working folder" not in body
        # The owner page's own files still come from the package.
        status, body = _get(owner, "/static/app.js")
        assert status == 200 and b"use strict" in body
    finally:
        room.close()


def test_serving_refuses_an_app_that_keeps_a_static_route() -> None:
    import pytest
    from quart_trio import QuartTrio

    from commonroom.http.hardened_app import harden

    with pytest.raises(ValueError, match="static_folder=None"):
        harden(QuartTrio("with-static"), max_body_bytes=1024)
    harden(QuartTrio("without", static_folder=None), max_body_bytes=1024)
