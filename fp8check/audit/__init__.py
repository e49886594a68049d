"""``fp8check audit``: what an FP8 checkpoint holds, read without executing anything.

    from fp8check.audit import audit, AuditOptions
    report = audit(["model/"], AuditOptions(targets=("mi300",)))
    report["summary"]["errors"], report["portability"][0]["verdict"]

See docs/audit.md for the findings, their firing rules and the JSON schema.
"""

from fp8check.audit.engine import AUDIT_SCHEMA_VERSION, AuditOptions, audit
from fp8check.audit.errors import CheckpointError, MissingDependencyError, UnsafeCheckpointError
from fp8check.audit.findings import CODES as FINDING_CODES
from fp8check.audit.targets import TARGETS

__all__ = ["audit", "AuditOptions", "AUDIT_SCHEMA_VERSION", "CheckpointError", "UnsafeCheckpointError",
           "MissingDependencyError", "FINDING_CODES", "TARGETS"]
