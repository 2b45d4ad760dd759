# SPDX-License-Identifier: GPL-2.0
# A QP set over all gaudi.ports ports has one QP index on every port (the
# index's send WQ slot of each port is mapped, read-only, in one ASID);
# with the index taken on one port, or by another set, or by a QP of the
# standard verbs, a set asking for it fails with EBUSY and maps no slot on
# any port; a destroyed set's slots are gone and its index can be taken
# again.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test qp-set-same-index || fail "QP sets did not keep one index on every port"
