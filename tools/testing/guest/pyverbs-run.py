#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Run rdma-core's test suite as its run_tests.py does (its report on
standard error), and write one line per test to RESULTS for the pyverbs
guest test to compare with the expected skips:

    STATUS<TAB>TEST ID<TAB>REASON

STATUS is pass, fail, error, skip or unsupported. "unsupported" is an error
whose exception is a pyverbs error with errno EOPNOTSUPP: a verb the device
refuses, as documented (SEND, receives, READ, atomics, other QP types). The
suite itself turns EOPNOTSUPP into a skip where it expects a device may
lack a feature; where it does not (its traffic helpers post receives and
SENDs unconditionally), the error says the same thing, and the guest test
holds it to the same list of expected skips.

usage: pyverbs-run.py RESULTS TESTS_DIR [run_tests.py arguments]
"""

import errno
import functools
import os
import sys
import time
import unittest
from importlib.machinery import SourceFileLoader

RESULTS = open(sys.argv.pop(1), "w", encoding="utf-8")
TESTS = sys.argv.pop(1)
sys.path.insert(0, TESTS)

from args_parser import parser  # noqa: E402  (the suite's own, from TESTS)


def reason_of(err):
    """The first line of an exception, for one line of output."""
    exc = err[1]
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0] if text else type(exc).__name__


# Seconds each test took, for the slowest's list at the end.
TIMES = {}


class Result(unittest.TextTestResult):
    def startTest(self, test):
        self.t0 = time.monotonic()
        super().startTest(test)

    def stopTest(self, test):
        super().stopTest(test)
        TIMES[test.id()] = time.monotonic() - self.t0

    def report(self, status, test, reason=""):
        reason = " ".join(str(reason).split())
        print(f"{status}\t{test.id()}\t{reason}", file=RESULTS, flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self.report("pass", test)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.report("fail", test, reason_of(err))

    def addError(self, test, err):
        if getattr(err[1], "error_code", None) == errno.EOPNOTSUPP:
            super().addSkip(test, reason_of(err))
            self.report("unsupported", test, reason_of(err))
            return
        super().addError(test, err)
        self.report("error", test, reason_of(err))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.report("skip", test, reason)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is None:
            return
        if issubclass(err[0], test.failureException):
            self.report("fail", subtest, reason_of(err))
        else:
            self.report("error", subtest, reason_of(err))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.report("pass", test, "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.report("fail", test, "unexpected success")


tests = SourceFileLoader("tests", os.path.join(TESTS, "__init__.py")).load_module()
# The set-up of every traffic test asks `rdma link` and `ip addr` (a process
# each) for the port's interface and its address, which the guest test set
# up before the run and which no test changes: ask once.
base = sys.modules["tests.base"]
for helper in ("get_net_name", "get_ip_mac_address"):
    setattr(
        base.RDMATestCase,
        helper,
        staticmethod(functools.cache(getattr(base.RDMATestCase, helper))),
    )
parser.parse_args()
prog = unittest.main(
    module=tests,
    testRunner=unittest.TextTestRunner(resultclass=Result, stream=sys.stderr, verbosity=2),
    exit=False,
)
print(f"# {sum(TIMES.values()):.1f} s in {len(TIMES)} tests; the slowest:", file=sys.stderr)
for name, secs in sorted(TIMES.items(), key=lambda t: -t[1])[:15]:
    print(f"#   {secs:6.1f} s  {name}", file=sys.stderr)
sys.exit(not prog.result.wasSuccessful())
