# SPDX-License-Identifier: GPL-2.0
# A device whose identification is wrong is refused at probe (the emulated
# function's SVC_ID reads 0xdeadbeef for this test, "G2EF" after it).
. /lib/gaudi/guest-lib.sh
probe_refused "unknown identification 0xdeadbeef" "id 0xdeadbeef" "id 0x47324546"
