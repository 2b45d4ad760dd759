# SPDX-License-Identifier: GPL-2.0
# The kernel booted to our init with the expected kernel and filesystems.
want=$(cat /etc/kernel-release)
got=$(uname -r)
[ "$got" = "$want" ] || fail "running kernel $got, expected $want"
grep -q ' /sys sysfs ' /proc/mounts || fail "sysfs not mounted"
grep -q ' /dev devtmpfs ' /proc/mounts || fail "devtmpfs not mounted"
echo "kernel $got"
