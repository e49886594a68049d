"""A repository's declared gates (``[[tool.fp8check.gate]]``), measured as ``fp8check gate`` measures them.

Each gate (the repository's own test tolerance, or a public one) is handed the FP8 defect family
applied to the correct output of its recipe; the test fails, with the table of what the gate lets
through, when the gate accepts a defect that fp8check's own check of the same kernel rejects.
"""


def test_gate_lets_no_fp8_defect_through(fp8_gate_target):
    fp8_gate_target.check()
