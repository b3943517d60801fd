"""What the redis-py client scripts share: the command line, the tally of checks, and the run
over both protocols that reports it.

A script imports it (`from checks import ...`), defines `run(protocol)` and ends with
`run_protocols(run)`, which prints one line per failed check and a closing 'N passed, N
failed' line, deletes every key under the prefix and exits 1 on any failure.
"""

import sys

import redis

URL, PREFIX = sys.argv[1], sys.argv[2]
_tally = {"passed": 0, "failed": 0}


def check(what, condition, detail=""):
    if condition:
        _tally["passed"] += 1
    else:
        _tally["failed"] += 1
        print(f"FAILED: {what} {detail}")


def raises(what, call, text):
    try:
        got = call()
        check(what, False, f"returned {got!r}, should raise {text!r}")
    except redis.ResponseError as e:
        check(what, str(e) == text, f"{e!s} != {text!r}")


def run_protocols(run):
    for protocol in (2, 3):
        try:
            run(protocol)
        except Exception as e:  # a crash is a failure, reported with its cause
            check(f"RESP{protocol}", False, f"raised {type(e).__name__}: {e}")
        finally:
            cleanup = redis.Redis.from_url(URL)
            for name in cleanup.scan_iter(match=f"{PREFIX}:*"):
                cleanup.delete(name)
            cleanup.close()
    passed, failed = _tally["passed"], _tally["failed"]
    print(f"redis-py {redis.__version__}: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
