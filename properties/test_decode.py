"""Every code decoded, where the kernel decodes: exact values, NaN by class, -0 distinct."""

import pytest

from fp8check import engine


@pytest.mark.exhaustive
def test_decodes_every_code(fp8_decode_target):
    kernel, fmt = fp8_decode_target
    checked, wrong = engine.decode_check(kernel, fmt)
    assert checked == fmt.code_count
    assert not wrong, f"{kernel.name} decodes {len(wrong)} {fmt.name} codes wrongly: " + "; ".join(
        f"{d.input_hex} [{d.input_value}] -> {d.actual_value} (expected {d.expected_value})" for d in wrong[:8])
