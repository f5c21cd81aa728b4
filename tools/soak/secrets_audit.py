"""The secrets audit: did the room say any secret it handed out, anywhere but to its owner?

`find_secrets(secrets, texts)` scans texts (events, log lines, error bodies,
diagnostics, discovery documents...) for every secret (session ids, bearers,
invitation secrets and URIs, owner tokens). It is exact: a secret is found
wherever it occurs as a substring, also inside a longer token.

Secrets are random URL-safe tokens, so a leaked one always lies inside a
maximal run of URL-safe characters (`[A-Za-z0-9_-]`) of the text. The scan
splits each text into those runs once (at C speed) and looks up, in one set,
every window of each secret length inside the runs that are long enough:
the cost follows the text size, not (texts x secrets).

A `Hit` names the secret's kind and where it was seen, never the secret.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

# A secret is at least this long (shorter strings would hit by chance).
MIN_SECRET_LENGTH = 16
_RUN = re.compile(r"[A-Za-z0-9_\-]+")
# `commonroom://join/<base64url>` is a run too, but its `:` and `/` split it:
# invitation URIs are audited through their secret and their base64 payload.


@dataclass(frozen=True)
class Secret:
    kind: str  # "session", "invitation_secret", "owner_login_token", ...
    value: str


@dataclass(frozen=True)
class Hit:
    kind: str  # the secret's kind
    source: str  # where it was seen: "event 41", "room stderr", "error body (workspace.commit)"...
    fingerprint: str  # sha256 prefix of the secret, to tell two hits apart without printing it


def fingerprint(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:12]


def find_secrets(secrets: Iterable[Secret], texts: Iterable[tuple[str, str]]) -> list[Hit]:
    """Every (secret, source) pair where a secret occurs in a text; `texts` are (source, text)."""
    by_value: dict[str, Secret] = {}
    for secret in secrets:
        if len(secret.value) < MIN_SECRET_LENGTH:
            raise ValueError(f"a {secret.kind} secret shorter than {MIN_SECRET_LENGTH} characters")
        if _RUN.fullmatch(secret.value) is None:
            raise ValueError(f"a {secret.kind} secret with characters outside [A-Za-z0-9_-]")
        by_value.setdefault(secret.value, secret)
    lengths = sorted({len(value) for value in by_value})
    hits: list[Hit] = []
    seen: set[tuple[str, str]] = set()
    if not lengths:
        return hits
    shortest = lengths[0]
    for source, text in texts:
        for run in _RUN.findall(text):
            if len(run) < shortest:
                continue
            for length in lengths:
                if length > len(run):
                    break
                for start in range(len(run) - length + 1):
                    found = by_value.get(run[start:start + length])
                    if found is not None and (found.value, source) not in seen:
                        seen.add((found.value, source))
                        hits.append(Hit(found.kind, source, fingerprint(found.value)))
    return hits
