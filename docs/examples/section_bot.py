"""A bot that rewrites one section of a room's document once a person approves.

    python docs/examples/section_bot.py 'commonroom://join/…' Risks \
        --append "- Reviewed by section_bot: no new risks this week."

It joins, reads the section, leases it, proposes the section with the line
appended, and waits for the host's review (`ce review FILE ID --approve`, or
the owner page). Approved: it commits and prints the new version. If the
section changed under it — `stale_version` when proposing or committing, or
the proposal `superseded` while it waited — it reads the section again and
proposes anew on the fresh text, so nobody's edit is overwritten. If someone
holds the section (another agent's lease, or the host still typing in their
editor: a human-editing hold), it waits until that lease ends, watching the
room's events rather than polling. Rejected or withdrawn: it stops. It leaves
the room (releasing its lease) on the way out.

Exit status: 0 committed, 3 rejected/withdrawn, 4 still stale after
--attempts tries, 124 no review within --timeout seconds.
"""

from __future__ import annotations

import argparse
import os
import sys

import commonroom


def rewrite(section: str, line: str) -> str:
    """`section` with `line` added after its last non-blank line (the heading line stays)."""
    body = section.rstrip("\n")
    return f"{body}\n{line}\n\n"


def wait_until_free(room: commonroom.Client, lease_id: str, timeout: float | None) -> None:
    """Long-poll the room's events until the blocking lease is released or expires."""
    cursor = room.room().latest_event_id
    if not any(lease.lease_id == lease_id for lease in room.leases().leases):
        return  # it ended between the refusal and now
    waited = 0.0
    while timeout is None or waited < timeout:
        answer = room.wait(cursor, timeout_seconds=25)
        waited += 25 if not answer.events else 0
        cursor = answer.cursor
        ended = {getattr(event.payload, "lease_id", None) for event in answer.events
                 if event.type in ("lease.released", "lease.expired")}
        if lease_id in ended or answer.resync:
            return
    raise commonroom.Timeout(f"the section stayed held for {timeout:g} s", {"lease_id": lease_id})


def run(invitation: str, region: str, line: str, *, name: str, attempts: int,
        timeout: float | None) -> int:
    with commonroom.Client.join(invitation, name=name) as room:
        try:
            for attempt in range(1, attempts + 1):
                current = room.read(region)
                try:
                    with room.checkout(region):
                        proposal = room.propose(
                            region, rewrite(current.content, line),
                            base_version=current.version, summary=f"{name}: add one line",
                        )
                        print(f"proposed {proposal.proposal_id} on v{current.version}"
                              f" (attempt {attempt})", flush=True)
                        decided = room.wait_for_review(proposal.proposal_id, timeout=timeout)
                        if decided.status == "approved":
                            committed = room.commit(proposal.proposal_id)
                            print(f"committed version {committed.version}", flush=True)
                            return 0
                except commonroom.StaleVersion as stale:
                    print(f"stale: the section is at v{stale.current_version} now;"
                          " reading it again", flush=True)
                    continue
                except commonroom.LeaseConflict as held:
                    print(f"{held.region} is held ({held.lease_id}); waiting", flush=True)
                    wait_until_free(room, str(held.lease_id), timeout)
                    continue
                if decided.status in ("superseded", "conflicted"):
                    print(f"{decided.status}: the section changed; reading it again", flush=True)
                    continue
                print(f"proposal {decided.status}: stopping", flush=True)
                return 3
            print(f"still stale after {attempts} attempts", flush=True)
            return 4
        except commonroom.Timeout as waited:
            print(f"no review in time: {waited.message}", flush=True)
            return 124
        finally:
            room.leave()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("invitation", nargs="?", default=os.environ.get("CE_INVITATION"))
    parser.add_argument("region", help="the section: a heading path or a unique title")
    parser.add_argument("--append", required=True, help="the line to add to the section")
    parser.add_argument("--name", default="section_bot")
    parser.add_argument("--attempts", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds to wait for each review (default: for ever)")
    args = parser.parse_args()
    if not args.invitation:
        parser.error("give the invitation (or set CE_INVITATION)")
    try:
        return run(args.invitation, args.region, args.append, name=args.name,
                   attempts=args.attempts, timeout=args.timeout)
    except commonroom.CommonroomError as error:
        print(f"error: {error.code}: {error.message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
