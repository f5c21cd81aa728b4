"""The host keeps saving a 330 KB file in their editor while agents work (issue 18).

A real `ce serve` (default settle, 250 ms). Four agents each hold a lease and a
pending proposal on a section of their own and poll the status and their
section throughout; a fifth has an approved proposal. The host saves the
file the three ways editors do: truncate then write in chunks with a few ms
between them, overwrite then truncate, temp file + rename; each save changes
one or two of the host's own sections. Then the host keeps saving while the
fifth agent commits.

- every version the room recorded is byte-equal to one whole save (or to the
  agent's commit), and there is at most one version per save;
- no agent ever read a cut-off or missing section; every lease and pending
  proposal survives; holds fall on exactly the sections the host changed;
- the agent's approved change commits while the host goes on saving, and the
  final file holds both.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import pytest

import commonroom
from commonroom.credentials import read_credentials
from tests.e2e.conftest import start_room

pytestmark = pytest.mark.e2e

SECTIONS = 40
AGENT_SECTIONS = [1, 2, 3, 4]
COMMITTER_SECTION = 10
HOST_SECTIONS = list(range(20, 40))
WRITE_GAP_S = 0.003  # between the writes of one in-place save
CHUNKS = 5


def section(n: int, words: str = "original") -> str:
    lines = "".join(f"Line {i} of section {n}, {words} text that fills the page.\n" for i in range(140))
    return f"## S{n:02d}\n\n{lines}\n"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def save(path: Path, text: str, how: str) -> bytes:
    """Save `text` the way `how` editors do; the bytes saved."""
    data = text.encode()
    step = len(data) // CHUNKS + 1
    if how == "rename":
        temp = path.with_name(f".{path.name}.swp")
        temp.write_bytes(data)
        os.replace(temp, path)
        return data
    with open(path, "r+b", buffering=0) as handle:
        if how == "truncate_write":
            handle.truncate(0)
        for start in range(0, len(data), step):
            handle.write(data[start:start + step])
            time.sleep(WRITE_GAP_S)
        if how == "overwrite_truncate":
            handle.truncate(len(data))
    return data


def edit(text: str, n: int, words: str) -> str:
    start = text.index(f"## S{n:02d}\n")
    end = text.index("## S", start + 4) if n + 1 < SECTIONS else len(text)
    return text[:start] + section(n, words) + text[end:]


def wait_for_hash(host: commonroom.Client, digest: str, timeout: float = 15.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = host.status()
        if status.content_hash == digest:
            return status.version
        time.sleep(0.02)
    raise AssertionError("the save never became the current version")


class Poller(threading.Thread):
    """An agent polling the status and reading its own section, as agents do."""

    def __init__(self, client: commonroom.Client, region: str, text: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.client, self.region, self.text, self.stop = client, region, text, stop
        self.problems: list[str] = []
        self.states: set[str] = set()
        self.polls = 0

    def run(self) -> None:
        last = 0
        while not self.stop.is_set():
            try:
                status = self.client.status()
                read = self.client.read(self.region)
            except commonroom.CommonroomError as error:
                self.problems.append(f"{error.code}: {error.message}")
                return
            self.states.add(status.file)
            if status.version < last:
                self.problems.append(f"version went back from {last} to {status.version}")
            last = status.version
            if read.content != self.text:
                self.problems.append(f"read {len(read.content)} chars of {self.region} at v{read.version}")
            self.polls += 1
            self.stop.wait(0.2)  # 10 requests a second of the 600 a minute allowed


def test_host_saves_in_place_and_by_rename_while_agents_work(tmp_path: Path) -> None:
    doc = tmp_path / "plan.md"
    text = "# Plan\n\nThe host's plan.\n\n" + "".join(section(n) for n in range(SECTIONS))
    doc.write_text(text)
    assert len(text) > 300_000
    room = start_room(doc, "--port-ingress", "0")
    stop = threading.Event()
    pollers: list[Poller] = []
    try:
        creds = read_credentials(doc)
        assert creds is not None
        host = commonroom.Client(room.ready["invitation"], session=creds.host_session)
        invitations = [host.invite(max_uses=1).invitation for _ in range(len(AGENT_SECTIONS) + 1)]
        agents = [commonroom.Client.join(inv, name=f"agent{i}") for i, inv in enumerate(invitations)]
        leases, pending = {}, {}
        for agent, n in zip(agents, AGENT_SECTIONS, strict=False):
            region = f"S{n:02d}"
            leases[agent.session] = agent.checkout(region, minutes=30).lease_id
            pending[agent.session] = agent.propose(region, section(n, "proposed"), base_version=1,
                                                   summary="mine").proposal_id
        committer = agents[-1]
        approved = committer.propose(f"S{COMMITTER_SECTION}", section(COMMITTER_SECTION, "committed"),
                                     base_version=1, summary="approved").proposal_id
        host.review(approved, "approve", revision=1)
        for agent, n in zip(agents, AGENT_SECTIONS, strict=False):
            pollers.append(Poller(agent, f"S{n:02d}", section(n), stop))
        for poller in pollers:
            poller.start()

        saves: list[bytes] = []
        changed: set[int] = set()
        # 1. Twelve saves, four of each kind, each recorded before the next.
        hows = ["truncate_write", "overwrite_truncate", "rename"] * 4
        for i, how in enumerate(hows):
            edited = {HOST_SECTIONS[(2 * i) % len(HOST_SECTIONS)]}
            if i % 2:
                edited.add(HOST_SECTIONS[(2 * i + 1) % len(HOST_SECTIONS)])
            current = doc.read_text()
            for n in edited:
                current = edit(current, n, f"host save {i}")
            saves.append(save(doc, current, how))
            changed |= edited
            wait_for_hash(host, sha(saves[-1]))

        # 2. The host goes on saving (every 0.6 s) while the approved change commits.
        def host_keeps_saving() -> None:
            for i, how in enumerate(hows[:6], start=len(hows)):
                n = HOST_SECTIONS[i % len(HOST_SECTIONS)]
                saves.append(save(doc, edit(doc.read_text(), n, f"host save {i}"), how))
                changed.add(n)
                time.sleep(0.6)

        saver = threading.Thread(target=host_keeps_saving)
        saver.start()
        time.sleep(0.9)  # a save or two in
        committed = committer.commit(approved)
        saver.join()
        final = doc.read_bytes()
        assert final == saves[-1]  # the last save read the file the commit wrote
        wait_for_hash(host, sha(final))
        stop.set()
        for poller in pollers:
            poller.join(5)

        # Every version is one whole save (or the commit), at most one per save.
        status = host.status()
        assert status.file == "settled"
        whole = {sha(s) for s in saves} | {sha(text.encode()), committed.content_hash}
        hashes = [sha(host.read("workspace", version=v).content.encode())
                  for v in range(1, status.version + 1)]
        assert all(h in whole for h in hashes), "a version that is no whole save"
        assert len(set(hashes)) == len(hashes) == status.version
        assert status.version <= 1 + len(saves) + 1
        assert status.version >= 1 + len(hows) + 1  # phase 1's saves each one version, the commit
        assert committed.content_hash in hashes
        final_text = final.decode()
        assert section(COMMITTER_SECTION, "committed") in final_text  # both: the agent's change
        assert "host save 17" in final_text  # and the host's last save
        # No agent ever saw a cut-off section; every lease and proposal survived.
        for poller in pollers:
            assert poller.problems == [] and poller.polls > 10, (poller.region, poller.problems)
        assert {"settling", "settled"} <= set().union(*(p.states for p in pollers))
        listed = host.leases().leases
        ordinary = {lease.lease_id for lease in listed if lease.reason is None}
        assert set(leases.values()) <= ordinary
        states = {p.proposal_id: p.status for p in host.proposals(limit=50).proposals}
        assert all(states[pid] == "pending" for pid in pending.values())
        holds = {lease.region for lease in listed if lease.reason == "human_editing"}
        assert holds == {f"Plan/S{n:02d}" for n in changed}
        assert "Traceback" not in room.stderr_path.read_text()
    finally:
        stop.set()
        for poller in pollers:
            poller.join(5)
        room.close()
