#!/usr/bin/env bash
# Debian's chromium and chromium-driver for the browser tests (tests/browser/); see apt_install.sh.
exec bash "$(dirname "$0")/apt_install.sh" install_browser "the browser tests" \
  "/usr/bin/chromium /usr/bin/chromedriver" chromium chromium-driver
