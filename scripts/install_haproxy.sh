#!/usr/bin/env bash
# Install Debian's haproxy for the multi-node tests (tests/service/test_multi_node.py: three service processes behind
# one load balancer). Idempotent: nothing to do when haproxy is on the PATH. Non-interactive. Exits 0 even when it
# cannot install (no apt-get, not root, no network): those tests then skip, saying haproxy is missing.
set -uo pipefail
if command -v haproxy >/dev/null 2>&1; then
  exit 0
fi
say() { echo "install_haproxy: $*" >&2; }
if ! command -v apt-get >/dev/null 2>&1; then
  say "apt-get not found; the multi-node tests will skip"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
  else
    say "not root and no password-less sudo; the multi-node tests will skip"
    exit 0
  fi
fi
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y -qq --no-install-recommends haproxy >/dev/null 2>&1; then
  if ! $SUDO apt-get update -qq >/dev/null 2>&1; then
    say "apt-get update failed; trying the package lists already present"
  fi
  if ! $SUDO apt-get install -y -qq --no-install-recommends haproxy >/dev/null 2>&1; then
    say "apt-get install haproxy failed; the multi-node tests will skip"
    exit 0
  fi
fi
say "installed $(haproxy -v 2>/dev/null | head -1 || echo haproxy)"
exit 0
