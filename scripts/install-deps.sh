#!/bin/sh
# Installs the Debian packages that stepscope's build, tests and demo need.
# Idempotent: packages already present are left alone.  Run as root (or with
# sudo available).  iproute2 (`ip netns`) builds the virtual cluster of the
# multi-node tests (tests/netns.py); slurm-wlm and munge the one-host Slurm
# cluster of the srun tests (tests/slurm.py), which starts its own daemons.
# libpq-dev is the team database's client library; postgresql's server
# binaries run the team-store tests' own server (tests/support/pg_server.py,
# no system service is used).
set -eu
PKGS="build-essential cmake ninja-build pkg-config libuv1-dev libsqlite3-dev sqlite3
clang libclang-rt-14-dev python3 python3-pytest python3-torch python3-dev
libmicrohttpd-dev prometheus libcjson-dev libsodium-dev libdw-dev libxxhash-dev tmux chromium
chromium-driver iproute2 slurm-wlm munge postgresql libpq-dev"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# The build runs `npm ci` in web/ (the dashboard's uPlot): any Node.js with
# npm will do; Debian's npm package only when none is installed.
command -v npm >/dev/null 2>&1 || missing="$missing npm"
if [ -z "$missing" ]; then
    echo "install-deps: all packages present"
    exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "install-deps: installing$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
