#!/usr/bin/env bash
# The browser tests (tests/browser) drive Debian's Chromium with Playwright.
# Playwright cannot download its own browsers here, so install the distribution's
# package when it is missing. Fails loudly when that is impossible: the browser
# tests must never be skipped silently.
set -euo pipefail
CHROMIUM="${COMMONROOM_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$CHROMIUM" ]; then
    exit 0
fi
echo "install-browser: $CHROMIUM is missing; installing Debian's chromium" >&2
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-browser: FAILED: no apt-get here; install Chromium so that $CHROMIUM exists" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
        echo "install-browser: FAILED: not root and no sudo; run: apt-get install -y chromium" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium >/dev/null
if [ ! -x "$CHROMIUM" ]; then
    echo "install-browser: FAILED: apt-get installed chromium but $CHROMIUM is still missing" >&2
    exit 1
fi
echo "install-browser: $("$CHROMIUM" --version 2>/dev/null || echo chromium) installed" >&2
