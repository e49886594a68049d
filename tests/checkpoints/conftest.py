import pytest

torch = pytest.importorskip("torch")

from fp8check.checkpoints import AuditOptions, audit  # noqa: E402


@pytest.fixture
def run_audit():
    """Audit paths with the library, one thread (tests run under xdist)."""

    def run(*paths, **options):
        options.setdefault("jobs", 1)
        result = audit([str(p) for p in paths], AuditOptions(**options))
        try:
            return result.to_dict()
        finally:
            result.close()

    return run
