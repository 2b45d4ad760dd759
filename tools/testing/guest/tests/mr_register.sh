# SPDX-License-Identifier: GPL-2.0
# Memory regions from one page to gaudi.mr_max_mib MiB (default 1024) of
# ordinary, physically scattered user memory: the device reaches each
# through its MMU exactly as registered (checked through the emulator),
# nothing after deregistration; unsupported access rights fail; 1000
# register/deregister cycles leak nothing.
. /lib/gaudi/guest-lib.sh
max=$(kparam mr_max_mib 1024)
gaudi-verbs-test mr-register --max-mib "$max" --cycles 1000 ||
	fail "memory registration checks failed"
dmesg | grep -q "memory registration with access .* refused" ||
	fail "no log line for the refused access rights"
kmemleak_clean_after "1000 memory registrations"
