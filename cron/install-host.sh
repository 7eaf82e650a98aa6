#!/bin/sh
# Install awc on a Debian or Ubuntu host for cron or systemd (README, "Deploying").
#
#   sudo cron/install-host.sh cron|timer|loop [PACKAGE]
#
# PACKAGE is what pip installs (default: the checkout this script is in, with
# the s3 extra; a wheel built from it works too, e.g.
# 'dist/awc_worker-0.1.0-py3-none-any.whl[s3]'). Steps, each safe to repeat
# (a repeat upgrades awc and never overwrites what the operator changed):
#   1. a virtual environment in /opt/awc: Debian 12's system pip is
#      "externally managed" and refuses `pip install`; `awc` is linked into
#      /usr/local/bin;
#   2. the system user `awc`, /var/log/awc (cron logs there, rotated by
#      /etc/logrotate.d/awc) and, for cron, /var/lib/awc (a file:// store);
#   3. /etc/awc with an empty database-url (mode 0600) for you to fill in, and
#      awc.env (the settings) from cron/awc.env; both only when absent;
#   4. the crontab file as /etc/cron.d/awc-tick (no dot: Debian's cron skips
#      such names), or the systemd units, reloaded. A file the operator
#      changed is kept; the shipped version is put beside it as NAME.new
#      (cron and systemd both ignore that name).
# DESTDIR installs into another root (the tests do); nothing is started there.
set -eu

mode="${1:-}"
here=$(cd "$(dirname "$0")" && pwd)
package="${2:-$(dirname "$here")[s3]}"
root="${DESTDIR:-}"
case "$mode" in
  cron|timer|loop) ;;
  *) echo "usage: $0 cron|timer|loop [PACKAGE]" >&2; exit 2 ;;
esac
# The system's Python, not the first python3 on root's PATH: a pyenv or
# conda Python lives under a home directory the awc user cannot read, and
# the venv would point there. PYTHON=... overrides it.
python="${PYTHON:-/usr/bin/python3}"
if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
  echo "install-host: $python cannot make a venv; apt-get install python3-venv" >&2
  exit 1
fi

# 1. awc in its own venv.
"$python" -m venv "$root/opt/awc"
"$root/opt/awc/bin/pip" install --quiet ${PIP_ARGS:-} "$package"
install -d -m 0755 "$root/usr/local/bin"
ln -sf /opt/awc/bin/awc "$root/usr/local/bin/awc"

# 2. The user the units and the crontab run as, and its log directory.
if [ -z "$root" ] && ! id awc >/dev/null 2>&1; then
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin awc
fi
owner=""
[ -z "$root" ] && owner="-o awc -g awc"
# shellcheck disable=SC2086
install -d -m 0750 $owner "$root/var/log/awc"
# A file:// store for cron ticks (the systemd units get theirs from
# StateDirectory=awc).
# shellcheck disable=SC2086
[ "$mode" = cron ] && install -d -m 0750 $owner "$root/var/lib/awc"

# 3. Settings: the connection string in a file only root (systemd's
# LoadCredential) or awc (cron) can read.
install -d -m 0755 "$root/etc/awc"
if [ ! -e "$root/etc/awc/database-url" ]; then
  # shellcheck disable=SC2086
  install -m 0600 $owner /dev/null "$root/etc/awc/database-url"
fi
[ -e "$root/etc/awc/awc.env" ] || install -m 0644 "$here/awc.env" "$root/etc/awc/awc.env"

# 4. The driver. keep SRC DEST: install SRC as DEST unless DEST is there and
# differs (the operator changed it): then DEST stays and SRC goes to DEST.new.
keep() {
  if [ ! -e "$2" ] || cmp -s "$1" "$2"; then
    install -m 0644 "$1" "$2"
  else
    install -m 0644 "$1" "$2.new"
    echo "install-host: kept your $2; the shipped version is $2.new"
  fi
}
if [ "$mode" = cron ]; then
  install -d -m 0755 "$root/etc/cron.d" "$root/etc/logrotate.d"
  keep "$here/awc-tick" "$root/etc/cron.d/awc-tick"
  keep "$here/awc.logrotate" "$root/etc/logrotate.d/awc"
else
  install -d -m 0755 "$root/etc/systemd/system"
  for unit in awc-tick.service awc-tick.timer awc-loop.service; do
    keep "$here/$unit" "$root/etc/systemd/system/$unit"
  done
  [ -z "$root" ] && systemctl daemon-reload
fi
echo "awc installed for $mode. Next: write the connection string to /etc/awc/database-url"
case "$mode" in
  cron) echo "and settings (AWC_CAS_URL, ...) in /etc/awc/awc.env." ;;
  timer) echo "and settings in /etc/awc/awc.env, then: systemctl enable --now awc-tick.timer" ;;
  loop) echo "and settings in /etc/awc/awc.env, then: systemctl enable --now awc-loop.service" ;;
esac
