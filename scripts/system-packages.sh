#!/usr/bin/env bash
# The Debian packages the tests need, installed only when missing: chromium-headless-shell
# for the playground's browser tests (the distribution's build of Chromium without the desktop
# browser around it, never a browser Playwright downloads), PostgreSQL for the store tests,
# which start a throw-away cluster of their own with its initdb (no service is started here;
# SPEECHGATE_TEST_DATABASE_URL names a server instead), and Redis for the shared-limits tests,
# which start their own redis-server likewise (SPEECHGATE_TEST_REDIS_URL names a server
# instead).
set -euo pipefail

packages=()
[ -x /usr/bin/chromium-headless-shell ] || packages+=(chromium-headless-shell)
if [ -z "${SPEECHGATE_TEST_DATABASE_URL:-}" ] && ! command -v initdb > /dev/null \
    && ! compgen -G "/usr/lib/postgresql/*/bin/initdb" > /dev/null; then
  packages+=(postgresql)
fi
if [ -z "${SPEECHGATE_TEST_REDIS_URL:-}" ] && ! command -v redis-server > /dev/null; then
  packages+=(redis-server)
fi
if [ ${#packages[@]} -gt 0 ]; then
  sudo=$([ "$(id -u)" = 0 ] || echo sudo)
  echo "apt-get install ${packages[*]}"
  # dpkg's progress (a line or three per package) on stdout is dropped; errors stay on stderr.
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" > /dev/null
fi
