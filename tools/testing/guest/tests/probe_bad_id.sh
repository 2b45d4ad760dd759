# SPDX-License-Identifier: GPL-2.0
# A device whose identification register is wrong is refused at probe (the
# emulator's ID register reads 0xdeadbeef for this test).
. /lib/gaudi/guest-lib.sh
probe_refused "unknown identification 0xdeadbeef" "id 0xdeadbeef" "id 0x47415532"
