#!/usr/bin/env bash
# Install Debian's chromium and chromium-driver for the browser tests (tests/browser/). Idempotent: nothing to do
# when /usr/bin/chromium and /usr/bin/chromedriver exist. Non-interactive. Exits 0 even when it cannot install
# (no apt-get, not root, no network): the browser tests then skip, saying the browser could not be installed.
set -uo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
say() { echo "install_browser: $*" >&2; }
if ! command -v apt-get >/dev/null 2>&1; then
  say "apt-get not found; the browser tests will skip"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
  else
    say "not root and no password-less sudo; the browser tests will skip"
    exit 0
  fi
fi
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get update -qq >/dev/null 2>&1; then
  say "apt-get update failed; trying the package lists already present"
fi
if ! $SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null 2>&1; then
  say "apt-get install chromium chromium-driver failed; the browser tests will skip"
  exit 0
fi
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  say "installed $(/usr/bin/chromium --version 2>/dev/null || echo chromium)"
else
  say "chromium installed, but /usr/bin/chromium or /usr/bin/chromedriver is missing; the browser tests will skip"
fi
exit 0
