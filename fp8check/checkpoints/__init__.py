"""``fp8check audit``: what an FP8 checkpoint holds, read without executing anything.

    from fp8check.checkpoints import audit, AuditOptions
    report = audit(["model/"], AuditOptions(targets=("mi300",)))
    report["summary"]["errors"], report["portability"][0]["verdict"]

See docs/audit.md for the findings, their firing rules and the JSON schema.
"""

from fp8check.checkpoints.audit import AUDIT_SCHEMA_VERSION, AuditOptions, audit
from fp8check.errors import CheckpointError, MissingDependencyError, UnsafeCheckpointError
from fp8check.checkpoints.findings import CODES as FINDING_CODES
from fp8check.checkpoints.targets import TARGETS

__all__ = ["audit", "AuditOptions", "AUDIT_SCHEMA_VERSION", "CheckpointError", "UnsafeCheckpointError",
           "MissingDependencyError", "FINDING_CODES", "TARGETS"]
