#!/usr/bin/env bash
# tests/python/import_check.sh PYTHON BUILD_PYTHON_DIR — after scripts/bootstrap.sh, PYTHON imports the
# package of this build tree without PYTHONPATH (attncert.pth in its site-packages).
set -euo pipefail
py="$1"
want="$(cd "$2" && pwd)/attncert/__init__.py"
got="$(env -u PYTHONPATH "$py" -c 'import attncert; print(attncert.__file__)' 2>&1)" || {
  echo "import attncert failed without PYTHONPATH: $got"; echo "(run scripts/bootstrap.sh: it writes attncert.pth)"; exit 1; }
if [ "$got" != "$want" ]; then
  echo "import attncert found $got, not this build's $want (scripts/bootstrap.sh for this build directory writes attncert.pth)"
  exit 1
fi
echo "import attncert without PYTHONPATH: $got"
