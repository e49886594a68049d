"""Gates: which FP8 defects a repository's own acceptance test lets through.

::

    from fp8check import gates
    report = gates.measure_gates(["assert_close", "deepgemm", "mytests.gates:close_enough"],
                                 recipe="block-1x128", views=gates.parse_views("256x512", ["128x256x512"]))
    for verdict in report.verdicts:
        print(verdict.gate, verdict.rate(), [o.defect.name for o in verdict.escapes])

A gate is a callable ``(actual, expected) -> bool | None`` that raises or returns False to reject.
The built-in public gates (:data:`PUBLIC_GATES`: ``torch.testing.assert_close``, ``numpy.allclose``,
DeepGEMM's ``calc_diff``, aiter's ``checkAllclose``, KernelBench's tolerance, torchao's SQNR) are
computed as their sources compute them (:mod:`.public` cites each). The defect family
(:data:`DEFECTS`) is data; :func:`measure_gates` applies each defect to the correct output of the
recipe's reference (or of a conforming kernel), hands both to the gate in the form it compares,
and runs fp8check's own check of the same defective kernel beside it.
"""

from __future__ import annotations

from fp8check.gates.defects import DEFECTS, Defect, defect, exposing_input, mutate
from fp8check.gates.measure import (DefectOutcome, GateReport, GateVerdict, View, fp8check_rejects, measure_gates,
                                    mutant_kernel, parse_views)
from fp8check.gates.public import PUBLIC_GATES, PublicGate, gate_accepts, parse_gate, public_gate

__all__ = ["DEFECTS", "Defect", "defect", "exposing_input", "mutate", "DefectOutcome", "GateReport", "GateVerdict",
           "View", "fp8check_rejects", "measure_gates", "mutant_kernel", "parse_views", "PUBLIC_GATES", "PublicGate",
           "gate_accepts", "parse_gate", "public_gate"]
