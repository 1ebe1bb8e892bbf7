#!/usr/bin/env bash
# Install Debian packages some tests need, once: `apt_install.sh NAME "WHAT NEEDS THEM" "PROGRAMS" PACKAGE...`.
# Idempotent: nothing to do when every one of PROGRAMS (absolute paths, or names on the PATH) is there.
# Non-interactive; tries the package lists already present before `apt-get update`. Exits 0 even when it cannot
# install (no apt-get, not root, no network): the tests that need the programs then skip, saying why.
set -uo pipefail
name="$1" needs="$2" programs="$3"
shift 3
say() { echo "$name: $*" >&2; }
present() {
  local program
  for program in $programs; do
    case "$program" in
      /*) [ -x "$program" ] || return 1 ;;
      *) command -v "$program" >/dev/null 2>&1 || return 1 ;;
    esac
  done
}
if present; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  say "apt-get not found; $needs will skip"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
  else
    say "not root and no password-less sudo; $needs will skip"
    exit 0
  fi
fi
export DEBIAN_FRONTEND=noninteractive
install() { $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1; }
if ! install "$@"; then
  $SUDO apt-get update -qq >/dev/null 2>&1 || say "apt-get update failed; trying the package lists already present"
  if ! install "$@"; then
    say "apt-get install $* failed; $needs will skip"
    exit 0
  fi
fi
if present; then
  say "installed $*"
else
  say "$* installed, but one of $programs is missing; $needs will skip"
fi
exit 0
