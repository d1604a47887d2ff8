"""The wallet's rules, without I/O: may this debit or refund be applied?"""

from __future__ import annotations

from dataclasses import dataclass

from downstreams.wallet.contracts import WalletReason


@dataclass(frozen=True)
class Wallet:
    id: str
    currency: str
    balance_minor: int
    version: int


@dataclass(frozen=True)
class Debit:
    debit_id: str
    wallet_id: str
    amount_minor: int
    currency: str
    refunded_minor: int


def debit_refusal(wallet: Wallet | None, amount_minor: int, currency: str) -> WalletReason | None:
    if wallet is None:
        return WalletReason.UNKNOWN_WALLET
    if currency != wallet.currency:
        return WalletReason.CURRENCY_MISMATCH
    if amount_minor > wallet.balance_minor:
        return WalletReason.INSUFFICIENT_FUNDS
    return None


def refund_refusal(wallet: Wallet | None, debit: Debit | None, amount_minor: int,
                   currency: str) -> WalletReason | None:
    """A refund gives back part or all of one debit of the same wallet, never more in total."""
    if wallet is None:
        return WalletReason.UNKNOWN_WALLET
    if debit is None or debit.wallet_id != wallet.id:
        return WalletReason.DEBIT_NOT_FOUND
    if currency != wallet.currency or currency != debit.currency:
        return WalletReason.CURRENCY_MISMATCH
    if debit.refunded_minor + amount_minor > debit.amount_minor:
        return WalletReason.REFUND_EXCEEDS_DEBIT
    return None
