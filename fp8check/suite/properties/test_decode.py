"""Every code decoded, where the kernel decodes: exact values, NaN by class, -0 distinct."""

import pytest


@pytest.mark.exhaustive
def test_decodes_every_code(fp8_decode_target):
    fp8_decode_target.check()
