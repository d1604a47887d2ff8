"""RFC 8785 canonical JSON, with the library's refusals turned into proposal rejections.

rfc8785 refuses integers beyond ±(2^53−1) and non-finite floats by raising; an agent must get
a reason code for those, never a crashed consumer.
"""

from __future__ import annotations

import rfc8785

from shared.tools.rejections import Rejection, RejectionCode


def jcs(value: object) -> bytes:
    try:
        return rfc8785.dumps(value)
    except rfc8785.IntegerDomainError:
        raise Rejection(RejectionCode.INTEGER_OUT_OF_RANGE, "an integer exceeds ±(2^53−1), which "
                        "JSON cannot carry exactly; send it as a string") from None
    except rfc8785.FloatDomainError:
        raise Rejection(RejectionCode.NUMBER_NOT_FINITE,
                        "NaN and Infinity have no JSON form") from None
    except rfc8785.CanonicalizationError as error:
        raise Rejection(RejectionCode.ARGUMENTS_INVALID,
                        f"no canonical JSON form: {error}") from None
