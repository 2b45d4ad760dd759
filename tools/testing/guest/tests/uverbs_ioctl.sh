# SPDX-License-Identifier: GPL-2.0
# A user program opens the uverbs device and, through the uverbs ioctl
# path, allocates a context and a PD, calls the driver's QUERY_PORT method
# for every port and checks each typed reply byte for byte, and checks the
# errnos of bad attributes, a second context and a second PD.
. /lib/gaudi/guest-lib.sh
load_driver
ports=$(kparam ports 24)
gaudi-verbs-test uverbs --ports "$ports" || fail "uverbs checks failed"
