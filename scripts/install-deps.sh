#!/usr/bin/env bash
# Installs the system packages mediafetch builds and tests with (Debian/Ubuntu).
# Runs apt-get only when something is missing, so repeated runs are quick.
set -euo pipefail

# python3 serves the HTTPS origin of the TLS end-to-end tests (/usr/bin/python3),
# nginx the HTTP/2 origin of the connection tests.
packages=(libcurl4-openssl-dev libsndfile1-dev libsqlite3-dev zlib1g-dev pkg-config tmux python3 nginx "$@")
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
