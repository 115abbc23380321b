"""The README and docs/ cite only what is in the repository, and their links resolve."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OUTSIDE = re.compile(r"REFERENCE(\.md)?\b|DESIGN-NOTES|TOOLCHAIN|\.\./shared"
                     r"|\b00\d_[0-9a-f]{16}\.txt")


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_no_reference_to_files_outside_the_repository(page):
    for n, line in enumerate(page.read_text().splitlines(), 1):
        assert not OUTSIDE.search(line), f"{page.name}:{n}: {line.strip()}"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_relative_links_resolve(page):
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
        if "://" in target:
            continue
        assert (page.parent / target).exists(), f"{page.name}: link to {target}"
