"""Building django-uistream's sdist and wheel as a release would.

``build_dist(outdir)`` copies the checkout's files as a clean clone holds
them (git's tracked files and the new ones it does not ignore, so no
``__pycache__``, ``node_modules``, virtualenv or an earlier build's
``egg-info``) into a scratch directory and runs ``python -m build`` there:
the sdist first, then the wheel built from that sdist, so a file the sdist
leaves out is missing from the wheel too. Building in a copy also keeps the
build's ``build/`` and ``*.egg-info`` out of the checkout, where another
process may be building at the same time.

It builds without isolation, with the setuptools pinned in requirements.txt:
the same backend on every machine and leg, no package index needed, and a
few seconds less than setting up a fresh build environment each time;
``build`` still refuses to run when that setuptools is older than
``[build-system] requires``.

tests/test_packaging.py checks what the two files hold; the ``dists``
fixture (tests/conftest.py) builds them once per test process for any test
that needs them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def checkout_files(root: Path = ROOT) -> list[str]:
    """The paths (relative, with ``/``) of the files a clean clone of
    ``root`` would hold, plus the new files git does not ignore, so a
    template not yet added to git counts as part of the tree."""
    try:
        listing = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        raise RuntimeError(
            f"the package is built from the files git lists in {root}; git ls-files failed: "
            f"{exc} {detail.decode(errors='replace')}".strip()
        ) from exc
    names = (name for name in listing.stdout.decode().split("\0") if name)
    # --cached lists files deleted from the work tree but not from the index.
    return sorted(name for name in names if (root / name).is_file())


def build_dist(outdir: Path, root: Path = ROOT) -> tuple[Path, Path]:
    """Build the wheel and the sdist of ``root`` into ``outdir``; returns
    ``(wheel, sdist)``. A failed build raises ``RuntimeError`` with the
    build's output."""
    outdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="uistream-build-") as scratch:
        source = Path(scratch) / "source"
        for name in checkout_files(root):
            target = source / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / name, target)
        result = subprocess.run(
            [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(outdir), str(source)],
            capture_output=True,
            text=True,
        )
    if result.returncode != 0:
        raise RuntimeError(f"python -m build failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    wheels = sorted(outdir.glob("*.whl"))
    sdists = sorted(outdir.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise RuntimeError(f"expected one wheel and one sdist in {outdir}, found {wheels + sdists}")
    return wheels[0], sdists[0]
