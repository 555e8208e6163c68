"""The bundled ``specjit`` CLI (shipped in the wheel next to libspecjit.so)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from .errors import SpecjitError


def cli_path() -> str:
    """The CLI in the package (bin/specjit), else the one on PATH."""
    bundled = Path(__file__).with_name("bin") / "specjit"
    if bundled.is_file() and os.access(bundled, os.X_OK):
        return str(bundled)
    found = shutil.which("specjit")
    if not found:
        raise SpecjitError("the specjit CLI is neither in the package (bin/specjit) nor on PATH")
    return found


def run_json(args: list[str], env: dict | None = None) -> tuple[int, dict | None, str]:
    """Runs ``specjit ARGS --json``: (exit code, parsed stdout or None, stderr)."""
    proc = subprocess.run([cli_path(), *args, "--json"], capture_output=True, text=True,
                          env=env)
    try:
        parsed = json.loads(proc.stdout) if proc.stdout.strip() else None
    except json.JSONDecodeError:
        parsed = None
    return proc.returncode, parsed, proc.stderr.strip()


def setting(name: str, env: dict | None = None) -> str:
    """One setting's effective value, as the library resolves it (``specjit config``)."""
    code, out, err = run_json(["config"], env)
    if code != 0 or not out:
        raise SpecjitError(err or f"specjit config exited {code}")
    for s in out["settings"]:
        if s["name"] == name:
            return s["value"]
    raise SpecjitError(f"specjit config has no setting {name!r}")
