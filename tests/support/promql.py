"""The metric names a PromQL expression selects, without a PromQL parser: label matchers,
grouping clauses, ranges and strings are removed first, then every identifier that is not a
function, an aggregation or a keyword is a metric name. Enough for the expressions this
project writes; promtool checks their syntax."""

from __future__ import annotations

import re

_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
             "unless", "bool", "offset", "inf", "nan"}
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = _GROUPING.sub(" ", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        following = text[match.end():].lstrip()
        if following.startswith("(") or match.group().lower() in _KEYWORDS:
            continue  # a function or aggregation, or a keyword
        names.add(match.group())
    return names


def label_values(expr: str, label: str) -> set[str]:
    """The values an expression's matchers give ``label`` (= and =~ alternatives)."""
    values = set()
    for operator, value in re.findall(rf'\b{label}\s*(=~|=)\s*"([^"]*)"', expr):
        if operator == "=":
            values.add(value)
        else:
            prefix, _, rest = value.partition("(")
            values |= {prefix + alternative for alternative in rest.rstrip(")").split("|")}
    return values
