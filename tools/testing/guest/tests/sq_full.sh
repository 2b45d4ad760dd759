# SPDX-License-Identifier: GPL-2.0
# A full send queue: the request after 16 outstanding ones fails with
# ENOMEM and nothing of it is posted; a list is posted up to the first
# request that does not fit; once completions are polled the queue works
# on. Posted WRITEs land, refused ones do not.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test sq-full || fail "full send queue not handled as documented"
