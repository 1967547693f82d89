"""The e2e Python tests' report: a line per check ("ok   what" or "FAIL what" with details
indented below it) and the counts at the end.

    from checks import check, bad, summary
    check(x == 3, "x is 3", f"x = {x}")    # the details print only on failure
    sys.exit(summary())                     # "N passed, M failed"; 1 if any failed
"""
counts = {"passed": 0, "failed": 0}


def ok(name):
    counts["passed"] += 1
    print(f"ok   {name}")


def bad(name, *detail):
    counts["failed"] += 1
    print(f"FAIL {name}")
    for d in detail:
        print(f"     {d}")


def check(cond, name, *detail):
    (ok if cond else bad)(name, *(() if cond else detail))
    return cond


def summary():
    print(f"{counts['passed']} passed, {counts['failed']} failed")
    return 1 if counts["failed"] else 0
