#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# kernel::rdma is part of the kernel crate, so it exists only when the RDMA
# core and uverbs are built in. Check, without building anything, that a
# configuration with either as a module drops the driver cleanly (Kconfig)
# and leaves out the abstraction and its helpers (no link error), and that
# the test configuration keeps all of them.
#
# usage: kconfig-deps.sh   (after kernel.sh config; prints one line per case,
#                           exit status 0 when every case holds)

. "$(dirname "$0")/lib.sh"

KSRC=$CACHE/linux/$KVER_PIN/src
KOUT=$("$TOP/scripts/kernel.sh" path)
[ -f "$KOUT/.config" ] || die "no kernel configuration: run kernel.sh config first"

# The gates in the kernel crate and its C helpers must ask for built-in.
grep -B1 '^pub mod rdma;' "$KSRC/rust/kernel/lib.rs" |
	grep -q 'CONFIG_INFINIBAND = "y", CONFIG_INFINIBAND_USER_ACCESS = "y"' ||
	die "rust/kernel/lib.rs: kernel::rdma is not gated on INFINIBAND=y and INFINIBAND_USER_ACCESS=y"
grep -q 'IS_BUILTIN(CONFIG_INFINIBAND) && IS_BUILTIN(CONFIG_INFINIBAND_USER_ACCESS)' \
	"$KSRC/rust/helpers/rdma.c" ||
	die "rust/helpers/rdma.c: helpers are not gated on built-in INFINIBAND and INFINIBAND_USER_ACCESS"

# The verdict depends only on the configuration, our Kconfig files and
# the patches to the kernel's (the kernel's are pinned with the build
# directory) and this script: a clean one is kept under their key (two
# olddefconfig runs cost about 30 s, minutes while the CPUs are busy).
key=$({
	cat "$KOUT/.config" "$0"
	grep -l '^+++ b/.*Kconfig' "$TOP"/kernel/patches/*.patch | xargs -r cat
	cd "$TOP" && find . -name 'Kconfig*' -not -path './.git/*' | sort | xargs cat
} | sha256sum | cut -c1-16)
verdict=$KOUT/kconfig-deps-$key
if [ -e "$verdict" ]; then
	cat "$verdict"
	exit 0
fi

tmp=$(mktemp -d "$CACHE/kconfig-deps.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
status=0
# Each line is printed and kept for the verdict.
say() { echo "$*" | tee -a "$tmp/out"; }
for sym in INFINIBAND INFINIBAND_USER_ACCESS; do
	out=$tmp/$sym
	mkdir -p "$out"
	cp "$KOUT/.config" "$out/.config"
	in_env "$KSRC/scripts/config" --file "$out/.config" --module "$sym"
	in_env make -s -C "$KSRC" O="$out" LLVM=1 olddefconfig >/dev/null
	got=$(grep -E "^CONFIG_$sym=" "$out/.config" || echo "CONFIG_$sym unset")
	gaudi=$(grep -E '^CONFIG_INFINIBAND_GAUDI=' "$out/.config" || true)
	if [ "$got" != "CONFIG_$sym=m" ]; then
		say "$sym=m: Kconfig did not keep it as a module ($got); case not checked"
		status=1
	elif [ -n "$gaudi" ]; then
		say "$sym=m: the driver stays selected ($gaudi), but kernel::rdma is not built"
		status=1
	else
		say "$sym=m: the driver is dropped, kernel::rdma and its helpers are left out"
	fi
done
grep -q '^CONFIG_INFINIBAND_GAUDI=m' "$KOUT/.config" ||
	{ say "the test configuration lost the driver"; status=1; }
[ $status != 0 ] || cp "$tmp/out" "$verdict"
exit $status
