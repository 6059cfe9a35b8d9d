"""The steps of a scenario: each runs a check, prints one line, and the
script exits non-zero at the first that fails."""

import sys

passed = 0


def step(name, check):
    """Runs `check()`; prints `ok   name`, or the failure and exits 1."""
    global passed
    try:
        check()
    except Exception as error:  # noqa: BLE001 - every failure is reported as the step's
        print(f"FAIL {name}: {type(error).__name__}: {error}")
        sys.exit(1)
    passed += 1
    print(f"ok   {name}")


def summary(label):
    """Prints how many steps passed."""
    print(f"{label}: {passed} passed, 0 failed")
