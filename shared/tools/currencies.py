"""ISO 4217 minor-unit exponents: how many decimals an amount in each currency may carry.

The exponent turns a decimal amount into integer minor units, the only money form that hashes
the same however the agent spelled it. A currency not listed is refused rather than guessed:
a wrong exponent would silently scale an amount by a power of ten. Add currencies here.
"""

from __future__ import annotations

from shared.tools.rejections import Rejection, RejectionCode

_BY_EXPONENT = {
    0: "BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF",
    2: "AED ARS AUD BDT BGN BRL CAD CHF CNY COP CZK DKK EGP EUR GBP HKD HUF IDR ILS INR KES "
       "MAD MXN MYR NGN NOK NZD PEN PHP PKR PLN QAR RON SAR SEK SGD THB TRY TWD UAH USD ZAR",
    3: "BHD IQD JOD KWD LYD OMR TND",
    4: "CLF UYW",
}

EXPONENTS: dict[str, int] = {code: exponent for exponent, codes in _BY_EXPONENT.items()
                             for code in codes.split()}


def exponent_of(code: str, where: str) -> int:
    try:
        return EXPONENTS[code]
    except KeyError:
        raise Rejection(RejectionCode.CURRENCY_UNKNOWN,
                        f"{where}: currency {code[:8]!r} is not a known ISO 4217 code") from None
