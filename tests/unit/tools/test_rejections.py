"""Rejection codes are a public vocabulary: documented, stable strings, never retried."""

from __future__ import annotations

from shared.errors import is_retryable
from shared.tools import Rejection, RejectionCode, rejections


def test_every_code_is_documented_in_the_module_docstring():
    documented = {line.split()[0] for line in rejections.__doc__.splitlines() if line[:1].isalpha()}
    assert {code.value for code in RejectionCode} <= documented


def test_each_code_is_its_own_lower_snake_case_name():
    assert all(code.value == code.name.lower() for code in RejectionCode)


def test_a_rejection_is_never_retried():
    assert not is_retryable(Rejection(RejectionCode.UNKNOWN_TOOL, "no such tool"))


def test_a_rejection_carries_its_code_and_message_apart():
    rejection = Rejection(RejectionCode.TENANT_MISMATCH, "another tenant's wallet")
    assert (rejection.code, rejection.message) == ("tenant_mismatch", "another tenant's wallet")
    assert str(rejection) == "tenant_mismatch: another tenant's wallet"
