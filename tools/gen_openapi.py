"""Rewrite docs/openapi.json from the operation table.

    .venv/bin/python tools/gen_openapi.py

tests/unit/test_openapi.py fails when the committed copy differs from what
`commonroom.openapi.openapi_document()` generates.
"""

from __future__ import annotations

from pathlib import Path

from commonroom.openapi import openapi_text

TARGET = Path(__file__).resolve().parent.parent / "docs" / "openapi.json"


def main() -> None:
    TARGET.write_text(openapi_text(), encoding="utf-8")
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
