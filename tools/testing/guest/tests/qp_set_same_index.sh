# SPDX-License-Identifier: GPL-2.0
# A QP set over all gaudi.ports ports has one QP index on every port (the
# emulator lists a QP of that index on each); with the index taken on one
# port, or by another set, or by a QP of the standard verbs, a set asking
# for it fails with EBUSY and leaves no QP on any port; a destroyed set's
# index can be taken again.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test qp-set-same-index || fail "QP sets did not keep one index on every port"
