"""How `ce` prints: answers, errors, and the one guard every command runs inside.

Rules this module owns (docs/spec/PROTOCOL.md section 13):

- with `--json` a command prints one JSON object (or JSON lines for a stream)
  on stdout, and an error is the protocol's error object on stdout;
- without `--json` an answer is readable text on stdout and an error is one
  line `error: <code>: <message>` on stderr;
- the exit code says what kind of failure it was (`EXIT_CODES`, listed in
  `ce --help` and the README): a script branches on it; an unexpected
  exception is `error: internal: ...` (exit 1), never a traceback;
- no error line ever carries a session id or an invitation: `redact` strips
  both from every message before it is printed;
- nothing a participant wrote can drive the terminal (the terminal rule): human output
  shows control characters as caret notation (`visible`: ESC is `^[`, a lone
  carriage return `^M`) and bidirectional overrides as `<U+202E>`; JSON output
  escapes the ones JSON itself would print raw (DEL, C1, bidi).
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Callable
from typing import Any, Final, ParamSpec

import click

from commonroom.protocol.errors import RECOVERY_FIELDS, STATUS, CommonroomError

EXIT_OK: Final = 0
EXIT_ERROR: Final = 1
EXIT_USAGE: Final = 2
EXIT_CONFLICT: Final = 3
EXIT_STALE: Final = 4
EXIT_PERMISSION: Final = 5
EXIT_NOT_FOUND: Final = 6
EXIT_UNAUTHORIZED: Final = 7
EXIT_RATE_LIMITED: Final = 8
EXIT_UNAVAILABLE: Final = 9
EXIT_TIMEOUT: Final = 124
EXIT_INTERRUPTED: Final = 130

# What each exit code means, for `ce --help` and the README (docs/protocol.md, exit codes).
EXIT_CODES: Final[tuple[tuple[int, str], ...]] = (
    (EXIT_OK, "ok"),
    (EXIT_ERROR, "any other error"),
    (EXIT_USAGE, "usage (a missing or contradictory flag, no session profile)"),
    (EXIT_CONFLICT, "conflict: lease_conflict, proposal_conflict, handoff_conflict; `ce wait`:"
                    " rejected, superseded, withdrawn, conflicted or changes requested (a"
                    " thread: closed unanswered); `ce rebase`: conflicts"),
    (EXIT_STALE, "stale_version (read again, propose anew)"),
    (EXIT_PERMISSION, "permission_denied, invitation_expired/revoked/redeemed"),
    (EXIT_NOT_FOUND, "proposal_not_found, version_not_found, ... (*_not_found)"),
    (EXIT_UNAUTHORIZED, "unauthorized, session_expired"),
    (EXIT_RATE_LIMITED, "limit_exceeded (retry after retry_after_seconds)"),
    (EXIT_UNAVAILABLE, "transport_unavailable: the room is not reachable"),
    (EXIT_TIMEOUT, "`ce wait` timed out"),
    (EXIT_INTERRUPTED, "`ce wait` stopped by Ctrl-C or SIGTERM (`ce observe`, `ce join` and"
                       " `ce mcp` exit 0 then)"),
)
_BY_CODE: Final[dict[str, int]] = {
    "lease_conflict": EXIT_CONFLICT,
    "proposal_conflict": EXIT_CONFLICT,
    "handoff_conflict": EXIT_CONFLICT,
    "permission_conflict": EXIT_CONFLICT,
    "stale_version": EXIT_STALE,
    "permission_denied": EXIT_PERMISSION,
    "unauthorized": EXIT_UNAUTHORIZED,
    "session_expired": EXIT_UNAUTHORIZED,
    "limit_exceeded": EXIT_RATE_LIMITED,
    "transport_unavailable": EXIT_UNAVAILABLE,
    "timeout": EXIT_TIMEOUT,
}


def exit_code_for(code: str) -> int:
    """The exit code of a protocol error code (see `EXIT_CODES`)."""
    if code in _BY_CODE:
        return _BY_CODE[code]
    if code.startswith("invitation_"):
        return EXIT_PERMISSION
    if code.endswith("_not_found"):
        return EXIT_NOT_FOUND
    return EXIT_ERROR


def exit_codes_help() -> str:
    return "\n".join(f"{code:>4}  {meaning}" for code, meaning in EXIT_CODES)

_SECRETS: Final = (
    (re.compile(r"commonroom://join/[A-Za-z0-9_\-=]*"), "commonroom://join/…"),
    (re.compile(r"ses_[A-Za-z0-9_\-]+"), "ses_…"),
    (re.compile(r"(?i)(authorization:\s*bearer\s+)\S+"), r"\1…"),
)

P = ParamSpec("P")


# Control characters (C0 but tab and newline, DEL, C1), a carriage return not ending a
# line, and the bidirectional embeddings, overrides and isolates (which reorder text).
_UNSAFE: Final = re.compile("[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]|\r(?!\n)")
# What `json.dumps(..., ensure_ascii=False)` leaves raw of those (it escapes C0 itself).
_JSON_RAW: Final = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return "^" + chr(code + 0x40)  # ESC -> ^[, CR -> ^M
    if code == 0x7F:
        return "^?"
    if code <= 0x9F:
        return "^[" + chr(code - 0x40)  # a C1 control is ESC + a letter in 7 bits: CSI -> ^[[
    return f"<U+{code:04X}>"


def visible(text: str) -> str:
    """`text` safe to print at a terminal: no character in it moves the cursor or styles text."""
    return _UNSAFE.sub(_shown, text)


def redact(text: str) -> str:
    """`text` without session ids, invitation URIs or bearer values."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


def dumps(value: Any, *, pretty: bool = False) -> str:
    if pretty:
        text = json.dumps(value, indent=2, ensure_ascii=False)
    else:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    # Such characters can only be inside JSON strings, where \uXXXX means the same.
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def echo(text: str = "", *, err: bool = False) -> None:
    """One line, flushed at once (a parent process may be waiting for it); made `visible`."""
    stream = sys.stderr if err else sys.stdout
    stream.write(visible(text) + "\n")
    stream.flush()


def write_text(text: str) -> None:
    """Text as it is (`ce read`, a diff), made `visible` when stdout is a terminal."""
    sys.stdout.write(visible(text) if sys.stdout.isatty() else text)
    sys.stdout.flush()


def emit_json(value: Any, *, pretty: bool = False) -> None:
    echo(dumps(value, pretty=pretty))


def print_answer(answer: Any, json_mode: bool, lines: Callable[[Any], list[str]]) -> None:
    """An answer: the object itself with `--json`, else `lines(answer)` for a person."""
    if json_mode:
        emit_json(answer)
        return
    for line in lines(answer):
        echo(line)


def note(text: str) -> None:
    """A hint for a person at a terminal (on stderr); scripts never see it."""
    if sys.stderr.isatty():
        echo(text, err=True)


def colour_diff(diff: str, colour: bool) -> str:
    """A unified diff, with ANSI colours when `colour` (a terminal), else as it is."""
    if not diff.endswith("\n"):
        diff += "\n"
    diff = visible(diff)  # before the colours: only these escapes reach the terminal
    if not colour:
        return diff
    out = []
    for line in diff.splitlines(keepends=True):
        body = line.rstrip("\n")
        if line.startswith(("+++", "---")):
            out.append(f"\x1b[1m{body}\x1b[0m\n")
        elif line.startswith("@@"):
            out.append(f"\x1b[36m{body}\x1b[0m\n")
        elif line.startswith("+"):
            out.append(f"\x1b[32m{body}\x1b[0m\n")
        elif line.startswith("-"):
            out.append(f"\x1b[31m{body}\x1b[0m\n")
        else:
            out.append(line)
    return "".join(out)


# -- errors ----------------------------------------------------------------------


def error_from_wire(status: int, body: Any) -> CommonroomError:
    """The `CommonroomError` a room answered with (`status` non-2xx, `body` parsed JSON)."""
    if isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"] in STATUS:
        details = body.get("details")
        recovery = {key: body[key] for key in RECOVERY_FIELDS if key in body}
        return CommonroomError(
            body["error"],
            str(body.get("message", "")),
            details if isinstance(details, dict) else {},
            http_status=status,
            **recovery,
        )
    return CommonroomError(
        "transport_unavailable",
        f"the room answered HTTP {status} without a commonroom error object",
        {"status": status},
    )


def wire_of(error: CommonroomError) -> dict[str, Any]:
    wire = error.to_wire()
    wire["message"] = redact(str(wire["message"]))
    return wire


# Recovery fields that are text of many lines: shown after the error line, as they are.
_BLOCK_FIELDS: Final = ("diff",)


def error_line(code: str, message: str, recovery: dict[str, Any] | None = None) -> str:
    """`error: <code>: <message>`, plus the short recovery fields, all on one line (a diff is
    not one: `report_error` prints it below, line by line)."""
    extras = []
    for key, value in (recovery or {}).items():
        if key in _BLOCK_FIELDS:
            continue
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            extras.append(f"{key}={value}")
    line = f"error: {code}: {message}"
    if extras:
        line += f" ({', '.join(extras)})"
    return redact(" ".join(line.split()))


def report_error(error: CommonroomError, json_mode: bool, *, json_to_stderr: bool = False) -> None:
    if json_mode:
        echo(dumps(wire_of(error)), err=json_to_stderr)
    else:
        echo(error_line(error.code, error.message, error.recovery), err=True)
        diff = (error.recovery or {}).get("diff")
        if isinstance(diff, str) and diff.strip():
            # What changed since the version the caller had, as a diff reads: one line each
            # (coloured on a terminal), not squeezed into the error's line.
            sys.stderr.write(redact(colour_diff(diff, sys.stderr.isatty())))
            sys.stderr.flush()


def report_internal(exc: BaseException, json_mode: bool) -> None:
    detail = str(exc).strip()
    message = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    message = redact(" ".join(message.split()))
    if json_mode:
        emit_json({"error": "internal", "message": message, "details": {}})
    else:
        echo(f"error: internal: {message}", err=True)


def report_usage(error: click.UsageError) -> None:
    """A usage error in `--json` mode: the error object on stdout."""
    emit_json(
        {"error": "invalid_request", "message": redact(error.format_message()), "details": {}}
    )


# -- the guard -----------------------------------------------------------------------


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for inner in exc.exceptions:
            out.extend(_leaves(inner))
        return out
    return [exc]


def guarded(
    *, interrupt_exit: int = EXIT_INTERRUPTED
) -> Callable[[Callable[P, None]], Callable[P, None]]:
    """Run a command body so that every failure ends in one printed error and an exit code.

    The wrapped function takes a `json_mode` keyword (the `--json` flag).
    Ctrl-C exits with `interrupt_exit` quietly (0 for the long-running commands).
    click's own exceptions (usage errors, `--help`) pass through untouched.
    """

    def decorate(fn: Callable[P, None]) -> Callable[P, None]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> None:
            json_mode = bool(kwargs.get("json_mode"))
            try:
                fn(*args, **kwargs)
            except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort):
                raise
            except SystemExit:
                raise
            except BaseException as exc:  # every other way out becomes one error line
                raise SystemExit(handle_failure(exc, json_mode, interrupt_exit)) from None

        return wrapper

    return decorate


def handle_failure(exc: BaseException, json_mode: bool, interrupt_exit: int) -> int:
    """Print `exc` the CLI way; return the exit code."""
    leaves = _leaves(exc)
    if any(isinstance(leaf, BrokenPipeError) for leaf in leaves):
        # The reader went away (`ce observe | head`): nothing more to say, to anyone.
        _silence_stdout()
        return EXIT_ERROR
    for leaf in leaves:
        if isinstance(leaf, SystemExit):
            code = leaf.code
            return code if isinstance(code, int) else EXIT_ERROR
    if any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves):
        return interrupt_exit
    for leaf in leaves:
        if isinstance(leaf, CommonroomError):
            report_error(leaf, json_mode)
            return exit_code_for(leaf.code)
    for leaf in leaves:
        if isinstance(leaf, click.UsageError):
            if json_mode:
                report_usage(leaf)
            else:
                leaf.show()
            return EXIT_USAGE
    report_internal(leaves[0] if leaves else exc, json_mode)
    return EXIT_ERROR


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
