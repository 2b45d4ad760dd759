# SPDX-License-Identifier: GPL-2.0
# Memory regions from one page to gaudi.mr_max_mib MiB (default 1024) of
# ordinary, physically scattered user memory, and of huge pages (64 MiB of
# 2 MiB pages; a 1 GiB page too with gaudi.huge1g=1 and a page reserved at
# boot, which needs a guest whose memory has a free GiB-aligned GiB): the device
# reaches each through its MMU exactly as registered, with device pages as
# large as the memory's (checked through the emulator), and nothing after
# deregistration; unsupported access rights fail; 1000 register/deregister
# cycles give 1000 distinct keys without a fixed stride and leak nothing.
. /lib/gaudi/guest-lib.sh
load_driver
max=$(kparam mr_max_mib 1024)
huge=
if echo 32 >/proc/sys/vm/nr_hugepages 2>/dev/null &&
	[ "$(cat /proc/sys/vm/nr_hugepages)" = 32 ]; then
	huge="--huge2m-mib 64"
else
	fail "cannot reserve 32 huge pages of 2 MiB"
fi
g=/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages
if [ "$(kparam huge1g 0)" = 1 ]; then
	[ "$(cat $g 2>/dev/null)" -ge 1 ] 2>/dev/null || fail "no free 1 GiB page (hugepagesz=1G hugepages=1)"
	huge="$huge --huge1g"
fi
gaudi-verbs-test mr-register --max-mib "$max" --cycles 1000 $huge ||
	fail "memory registration checks failed"
echo 0 >/proc/sys/vm/nr_hugepages
test_log | grep -q "memory registration with access .* refused" ||
	fail "no log line for the refused access rights"
