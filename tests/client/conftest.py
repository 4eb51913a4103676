"""Fixtures for the client tests: a running :class:`FakeServer` per test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.client.fake_server import FakeServer


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    fake = FakeServer()
    async with fake.running():
        yield fake
