"""The docs site: mkdocs.yml's nav lists every page in docs/, so every page the README links is on the site."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]


def nav_pages(nav) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in nav_pages(value)]
    return [page for item in nav for page in nav_pages(item)]


def test_the_nav_lists_every_docs_page_once():
    pages = nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    docs = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    extra = sorted({page for page in pages if pages.count(page) > 1 or page not in docs})
    assert sorted(pages) == docs, f"add to mkdocs.yml's nav: {sorted(set(docs) - set(pages))}; drop: {extra}"


def test_every_docs_page_the_readme_links_is_in_the_nav():
    linked = set(re.findall(r"\(docs/([\w.-]+\.md)(?:#[\w-]*)?\)", (ROOT / "README.md").read_text()))
    assert linked, "the README links no docs page: has the link syntax changed?"
    assert linked <= set(nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]))
