#!/usr/bin/env bash
# The system programs the test suite needs besides Python packages, installed with apt when they
# are missing and this runs as root on Debian (`make test` runs it first; with everything present
# it only looks and takes no time). Elsewhere it names what to install and stops.
#
#   libkrb5-dev          krb5-config: the gssapi package (the kerberos extra) builds against it
#   krb5-kdc,            krb5kdc, kdb5_util, kadmin.local: the GSSAPI login tests run MIT
#   krb5-admin-server    Kerberos' KDC on a loopback port (tests/kerberos.py)
#   prometheus           promtool: tests/test_metrics.py checks /metrics with it
#   chromium             /usr/bin/chromium: the status page's browser tests (tests/test_page.py)
#   openjdk-17-jre-headless  java: PySpark's backtest tests
#   maven                mvn: the real-Kafka tests fetch Kafka's jars with it
#   burrow, zookeeper    Burrow 1.2.1 and the ZooKeeper it needs watch the same broker as the
#                        service in tests/test_burrow_beside.py and benchmarks/vs_burrow.py
#
# NOTIFIER_NO_SYSTEM_INSTALL=1 reports what is missing and carries on: the tests that need it skip
# and say why (without krb5-config, though, gssapi cannot build and the test install fails).
set -euo pipefail

# program (a name on PATH or an absolute path) → the Debian package that ships it
requirements=(
    "krb5-config libkrb5-dev"
    "/usr/sbin/krb5kdc krb5-kdc"
    "/usr/sbin/kdb5_util krb5-kdc"
    "/usr/sbin/kadmin.local krb5-admin-server"
    "promtool prometheus"
    "/usr/bin/chromium chromium"
    "java openjdk-17-jre-headless"
    "mvn maven"
    "/usr/bin/Burrow burrow"
    "/usr/share/zookeeper/bin/zkServer.sh zookeeper"
)

present() {
    case "$1" in
        /*) [ -x "$1" ] ;;
        *) command -v "$1" >/dev/null ;;
    esac
}

missing_programs=()
missing_packages=()
for requirement in "${requirements[@]}"; do
    read -r program package <<<"$requirement"
    if ! present "$program"; then
        missing_programs+=("$program")
        case " ${missing_packages[*]-} " in
            *" $package "*) ;;
            *) missing_packages+=("$package") ;;
        esac
    fi
done

if [ ${#missing_packages[@]} -eq 0 ]; then
    exit 0
fi

echo "setup-system: missing ${missing_programs[*]} (Debian packages: ${missing_packages[*]})"
if [ "${NOTIFIER_NO_SYSTEM_INSTALL:-}" = 1 ]; then
    echo "setup-system: NOTIFIER_NO_SYSTEM_INSTALL=1: not installing them; the tests that need them skip"
    exit 0
fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing_packages[@]}" >/dev/null
    echo "setup-system: installed ${missing_packages[*]}"
    exit 0
fi

cat >&2 <<EOF
setup-system: the tests need these system packages; this script installs them itself only as
root with apt-get. Install them, then run make test again:

    sudo apt-get install --no-install-recommends ${missing_packages[*]}

Elsewhere: MIT Kerberos with its development files (krb5-config) and its KDC (krb5kdc,
kdb5_util, kadmin.local), Prometheus' promtool, Chromium at /usr/bin/chromium, a Java 17 runtime
and Maven. Or run NOTIFIER_NO_SYSTEM_INSTALL=1 make test: the tests that need a missing program
skip and say why (but without krb5-config the gssapi package cannot build, so the test install
fails unless gssapi is already installed).
EOF
exit 1
