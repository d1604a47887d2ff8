"""Browser tests: Debian's chromium (never a downloaded browser), driven by Playwright, against
the console served by the real query process. A screenshot of each page is written to
``test-artifacts/console/`` (or ``$INTENTLEDGER_ARTIFACTS/console/``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import ROOT

CHROMIUM = Path(os.environ.get("INTENTLEDGER_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(os.environ.get("INTENTLEDGER_ARTIFACTS", ROOT / "test-artifacts")) / "console"
# Chromium on a machine without network: background services would dial out and be refused.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="session")
async def browser():
    if not CHROMIUM.exists():
        pytest.skip(f"no chromium at {CHROMIUM} (Debian: apt-get install chromium)")
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=30_000)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        await browser.close()


@pytest.fixture
async def page(browser):
    """A fresh browser context (no cookies) per test; a script error on the page fails it."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    await context.close()
    assert errors == [], f"the page threw: {errors}"


async def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    return path
