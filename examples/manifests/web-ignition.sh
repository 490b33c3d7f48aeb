#!/usr/bin/env bash
# Prints the Secret web-ignition that examples/manifests/web.yaml boots from: Ignition that authorises
# an SSH key for root, so that `ironpool ssh web` logs in. Apply it before the manifests:
#
#   examples/manifests/web-ignition.sh | ironpool apply -f -
#   ironpool apply -f examples/manifests/
#
# The key is the one `ironpool ssh` offers: id_ed25519 beside the client configuration
# ($IRONPOOL_CONFIG, else ~/.config/ironpool/config.yaml), made here when it is missing (the same key
# examples/ansible/site.yml hands over). Another public key: give its file as the argument.
set -euo pipefail

config="${IRONPOOL_CONFIG:-$HOME/.config/ironpool/config.yaml}"
public_key="${1:-$(dirname "$config")/id_ed25519.pub}"
if [ $# -eq 0 ] && [ ! -f "$public_key" ]; then
  mkdir -p -m 0700 "$(dirname "$public_key")"
  ssh-keygen -q -t ed25519 -N "" -C ironpool-example -f "${public_key%.pub}" </dev/null >&2
fi
if [ ! -r "$public_key" ]; then
  echo "error: cannot read the public key $public_key" >&2
  exit 1
fi
# The key as a JSON string (a key's comment may hold quotes or backslashes).
key_json=$(tr -d '\n' <"$public_key" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g')

cat <<YAML
apiVersion: v1
kind: Secret
metadata:
  name: web-ignition
  namespace: default
type: Opaque
stringData:
  ignition.yaml: |
    {"ignition": {"version": "3.4.0"},
     "passwd": {"users": [{"name": "root", "sshAuthorizedKeys": ["${key_json}"]}]}}
YAML
