"""The attack tests' fixtures: a real `ce serve` (tests/e2e/conftest.py's `served`, a `Room`),
its document, and every `ce` keeping its session profiles in a temp folder, never in ~."""

from tests.e2e.conftest import config_home, doc, served  # noqa: F401 - fixtures for this folder
