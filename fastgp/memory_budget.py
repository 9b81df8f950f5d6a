"""Deprecated: the machine's memory ledger is :mod:`fastgp.memory.ledger`;
its names imported from here still work, with a DeprecationWarning."""

from ._moved import moved_names

__getattr__ = moved_names(__name__, {
    **{name: "fastgp.memory.ledger" for name in (
        "LIMIT_ENV", "LEDGER_ENV", "TIMEOUT_ENV", "DEFAULT_TIMEOUT", "Reservation",
        "parse_memory_size", "memory_limit", "wait_timeout", "ledger_dir",
        "budget_reading", "budget_capacity", "reserve", "check_could_fit",
        "covered_by_reservation")},
    "MemoryWaitWarning": "fastgp.exceptions",
})
