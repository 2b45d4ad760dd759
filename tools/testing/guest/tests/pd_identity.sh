# SPDX-License-Identifier: GPL-2.0
# Protection domains are told apart by identities that are never reused:
# with the driver loaded with first_pd_id three short of the end (2^64 - 4), a
# second context takes PDs until they run out (ENOSPC, no wrap), and with
# none of them does it reach the first context's region, by lkey or by
# key (gaudi-verbs-test pd-identity). The driver is loaded with its
# defaults again at the end.
. /lib/gaudi/guest-lib.sh
load_driver
rmmod gaudi_ib || fail "rmmod gaudi_ib"
insmod /lib/modules/gaudi_ib.ko $(gaudi_modargs) first_pd_id=18446744073709551612 ||
	fail "insmod gaudi_ib with first_pd_id near the end"
load_driver
gaudi-verbs-test pd-identity || fail "a PD reached another's region"
rmmod gaudi_ib || fail "rmmod gaudi_ib after the test"
load_driver
