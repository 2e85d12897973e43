#!/usr/bin/env bash
# The Azure Storage emulator eddy's az:// tests run against: Azurite (its
# blob service), installed from npm exactly as scripts/azurite/package-lock.json
# pins it (npm ci) into a cache directory outside the clone (EDDY_AZURITE_DIR,
# default ~/.cache/eddy-azurite), again whenever the lockfile changes.
#
#   scripts/azurite.sh start PORT DIR          serves blobs from DIR on 127.0.0.1:PORT (foreground)
#   scripts/azurite.sh container PORT NAME     creates the container NAME
#
# Clients take the emulator's well-known account (devstoreaccount1) with
# AZURE_STORAGE_USE_EMULATOR=true and
# AZURITE_BLOB_STORAGE_URL=http://127.0.0.1:PORT.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${EDDY_AZURITE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eddy-azurite}
install() {
  mkdir -p "$DIR"
  # One installer at a time (tests may call this concurrently).
  exec 9>"$DIR.lock"
  flock 9
  if ! cmp -s scripts/azurite/package-lock.json "$DIR/package-lock.json" || [ ! -x "$DIR/node_modules/.bin/azurite-blob" ]; then
    echo "installing Azurite as scripts/azurite/package-lock.json pins it into $DIR" >&2
    cp scripts/azurite/package.json scripts/azurite/package-lock.json "$DIR/"
    (cd "$DIR" && npm ci --silent --no-audit --no-fund >/dev/null)
  fi
  flock -u 9
}
case "${1:-}" in
  start)
    port=${2:?usage: azurite.sh start PORT DIR}
    data=${3:?usage: azurite.sh start PORT DIR}
    install
    mkdir -p "$data"
    exec "$DIR/node_modules/.bin/azurite-blob" --blobHost 127.0.0.1 --blobPort "$port" \
      --location "$data" --skipApiVersionCheck --silent ;;
  container)
    port=${2:?usage: azurite.sh container PORT NAME}
    name=${3:?usage: azurite.sh container PORT NAME}
    # Create Container, signed with the emulator's well-known key
    # (Shared Key authorization, as the Blob service documents it).
    exec python3 - "$port" "$name" <<'PY'
import base64, hashlib, hmac, sys, urllib.request
from email.utils import formatdate

port, name = sys.argv[1], sys.argv[2]
account = "devstoreaccount1"
key = base64.b64decode(
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
date, version = formatdate(usegmt=True), "2021-08-06"
to_sign = "\n".join(
    ["PUT"] + [""] * 11
    + [f"x-ms-date:{date}", f"x-ms-version:{version}", f"/{account}/{account}/{name}\nrestype:container"]
)
signature = base64.b64encode(hmac.new(key, to_sign.encode(), hashlib.sha256).digest()).decode()
request = urllib.request.Request(
    f"http://127.0.0.1:{port}/{account}/{name}?restype=container",
    method="PUT",
    headers={
        "x-ms-date": date,
        "x-ms-version": version,
        "Authorization": f"SharedKey {account}:{signature}",
        "Content-Length": "0",
    },
)
urllib.request.urlopen(request).close()
PY
    ;;
  *) echo "usage: azurite.sh start PORT DIR | container PORT NAME" >&2; exit 2 ;;
esac
