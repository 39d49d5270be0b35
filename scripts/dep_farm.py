"""Link a wheel's installed dependencies into one folder, without copying them.

    python scripts/dep_farm.py WHEEL DEST [EXTRA ...]

For ``scripts/wheel_check.sh``: a fresh venv that holds the wheel (not editable) and, through a
``.pth`` line that adds DEST as a site dir, exactly the distributions the wheel requires (its
``Requires-Dist`` without extras, or with the EXTRAs named, and theirs in turn), taken from the
environment running this script. Unpacking those (torch and the bundled generator's 1 GB of weights)
again cost the check 3 to 4 minutes of CI; a symbolic link per top-level entry costs none, and a
dependency missing from ``pyproject.toml`` still fails the check's runs with ModuleNotFoundError,
since packages that only the test extras install are not linked.
"""

from __future__ import annotations

import re
import sys
import zipfile
from email.parser import Parser
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_requirements(wheel: Path) -> list[Requirement]:
    """The wheel's own Requires-Dist lines, read from its METADATA."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode("utf-8")
    return [Requirement(line) for line in Parser().parsestr(text).get_all("Requires-Dist") or []]


def _applies(req: Requirement, extras: set[str]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({"extra": e}) for e in extras | {""})


def closure(roots: list[Requirement], extras: set[str]) -> dict[str, metadata.Distribution]:
    """Every installed distribution the requirements reach (markers evaluated here, with the extras
    asked for), each at a version its requirement allows, as a fresh install would resolve it."""
    found: dict[str, metadata.Distribution] = {}
    todo = [r for r in roots if _applies(r, extras)]
    while todo:
        req = todo.pop()
        key = _norm(req.name)
        try:
            dist = found.get(key) or metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            sys.exit(f"dep_farm: {req} is required but not installed in {sys.prefix}")
        if not req.specifier.contains(dist.version, prereleases=True):  # every requirement on it, not only the first
            sys.exit(f"dep_farm: {req} is required but {dist.version} is installed in {sys.prefix}")
        if key in found:
            continue
        found[key] = dist
        todo += [r for r in map(Requirement, dist.requires or []) if _applies(r, set(req.extras))]
    return found


def top_level_entries(dist: metadata.Distribution) -> set[Path]:
    """The site-packages entries a distribution installed (packages, modules, its .dist-info, .libs)."""
    site = Path(str(dist.locate_file("")))
    tops = {Path(f.parts[0]) for f in dist.files or [] if f.parts and f.parts[0] != ".."}
    return {site / t for t in tops if (site / t).exists()}


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    wheel, dest, extras = Path(argv[0]), Path(argv[1]), set(argv[2:])
    dest.mkdir(parents=True, exist_ok=True)
    dists = closure(wheel_requirements(wheel), extras)
    linked = 0
    for dist in dists.values():
        for entry in top_level_entries(dist):
            link = dest / entry.name
            if not link.exists():  # a namespace folder two distributions share: linked once, holds both
                link.symlink_to(entry)
                linked += 1
    print(f"dep_farm: {len(dists)} distributions, {linked} entries linked into {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
