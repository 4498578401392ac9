"""``protocol/``, ``runs/`` and ``adapters/`` never import Django or Channels (docs/architecture.md, "Rooms")."""

from __future__ import annotations

import subprocess
import sys

from .conftest import ROOT

PURE_PACKAGES = ["uistream_app.protocol", "uistream_app.runs", "uistream_app.adapters"]


def test_pure_packages_import_without_django() -> None:
    # A fresh interpreter in which importing django fails: any import of it
    # (direct or through a dependency) from the pure rooms breaks loudly.
    code = f"""
import importlib, pkgutil, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('django', 'channels', 'rest_framework'):
            raise ImportError('blocked: ' + name)
sys.meta_path.insert(0, Block())
found = 0
for root in {PURE_PACKAGES!r}:
    try:
        pkg = importlib.import_module(root)
    except ModuleNotFoundError as exc:
        if exc.name == root:
            continue
        raise
    for info in pkgutil.walk_packages(pkg.__path__, root + '.'):
        importlib.import_module(info.name)
        found += 1
assert found >= 5, found
assert not [m for m in sys.modules if m.split('.')[0] in ('django', 'channels')]
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
