"""The dispatcher: authority re-checked at dispatch, effects once per intent, UNKNOWN reconciled."""
