# SPDX-License-Identifier: GPL-2.0
# Helpers for the guest's init and tests (busybox sh).

GAUDI_VENDOR=0x1da3
GAUDI_DEVICE=0x1020

# Report a result line to the host on the second serial port.
result() {
	echo "$1" >/dev/ttyS1
	echo "$1"
}

fail() {
	# On standard error: a helper whose output a test captures ($(...))
	# still reports why it failed.
	echo "FAIL: $*" >&2
	exit 1
}

# PCI addresses of all Gaudi2 functions.
gaudi_devices() {
	# Shell built-ins only (each process costs a tenth of a second under
	# TCG); the names are the helper's own.
	for _gd in /sys/bus/pci/devices/*; do
		read -r _gv <"$_gd/vendor" && read -r _gp <"$_gd/device" &&
			[ "$_gv" = $GAUDI_VENDOR ] && [ "$_gp" = $GAUDI_DEVICE ] &&
			echo "${_gd##*/}"
	done
	return 0
}

# iproute2's ip, not busybox's applet (which the shell would run instead).
ip() { /usr/bin/ip "$@"; }

# Name of the driver bound to PCI function $1, or nothing.
bound_driver() {
	[ -L "/sys/bus/pci/devices/$1/driver" ] &&
		basename "$(readlink "/sys/bus/pci/devices/$1/driver")"
	return 0
}

# An lspci -nnk like listing from sysfs (busybox has no lspci).
lspci_k() {
	for d in /sys/bus/pci/devices/*; do
		a=$(basename "$d")
		v=$(cat "$d/vendor")
		p=$(cat "$d/device")
		c=$(cat "$d/class")
		r=$(cat "$d/revision")
		name=
		[ "$v" = $GAUDI_VENDOR ] && [ "$p" = $GAUDI_DEVICE ] &&
			name=" Habana Labs Ltd. Gaudi2 NIC"
		printf '%s [%s]:%s [%s:%s] (rev %s)\n' "${a#0000:}" "${c#0x}" "$name" \
			"${v#0x}" "${p#0x}" "${r#0x}"
		drv=$(bound_driver "$a")
		[ -n "$drv" ] && printf '\tKernel driver in use: %s\n' "$drv"
	done
	return 0
}

# Value of kernel parameter gaudi.$1, or $2.
kparam() {
	for a in $(cat /proc/cmdline); do
		case "$a" in "gaudi.$1="*) echo "${a#gaudi.$1=}" && return 0 ;; esac
	done
	echo "$2"
}

# The kernel log lines added since the current test started (init records
# where the log stood).
test_log() {
	dmesg | tail -n +$(($(cat /tmp/log-mark 2>/dev/null || echo 0) + 1))
}

# Declare that the current test provokes driver log lines of warning level
# or worse matching the extended regular expression $1 (init reports any
# other as unexpected).
expect_warning() {
	echo "$1" >>/tmp/expected-warnings
}

# Fail unless the emulator saw no DMA outside guest memory and none, and no
# interrupt, while bus mastering or the vector was off; $1 says after what.
emu_quiet_after() {
	s=$(emu_ctl stat) || fail "emulator stat failed"
	for k in dma_audit dma_no_master irq_no_master; do
		v=$(echo "$s" | awk -v k="$k" '$1 == k { print $2 }')
		[ "$v" = 0 ] || fail "emulator $k is '$v' after $1"
	done
	echo "emulator after $1: dma_audit 0, dma_no_master 0, irq_no_master 0"
}

# The interfaces of the first device's ports 1 and 2, in a and b.
port_ifaces() {
	d=$(gaudi_devices | head -n 1)
	a="" b=""
	for i in /sys/class/net/*; do
		[ "$(basename "$(readlink "$i/device" 2>/dev/null)")" = "$d" ] || continue
		case "$(cat "$i/dev_port")" in
		0) a=$(basename "$i") ;;
		1) b=$(basename "$i") ;;
		esac
	done
	[ -n "$a" ] && [ -n "$b" ] || fail "no interfaces of ports 1 and 2"
}

# Bring a and b up quiet (no IPv6 neighbour discovery or MLD) with an MTU
# of 9000, for frames of up to 9014 bytes; at the test's exit they are as
# they were (with $1 run first, if given).
quiet_ifaces() {
	quiet_was=""
	quiet_first=${1:-true}
	for i in "$a" "$b"; do
		quiet_was="$quiet_was $(cat "/sys/class/net/$i/mtu") $(($(cat "/sys/class/net/$i/flags") & 1))"
	done
	trap quiet_restore EXIT
	for i in "$a" "$b"; do
		sysctl -qw "net.ipv6.conf.$i.disable_ipv6=1" 2>/dev/null || true
		ip link set "$i" mtu 9000 up || fail "$i: not up"
	done
}

quiet_restore() {
	$quiet_first >/dev/null 2>&1 || true
	set -- $quiet_was
	for i in "$a" "$b"; do
		ip link set "$i" down
		ip link set "$i" mtu "$1"
		sysctl -qw "net.ipv6.conf.$i.disable_ipv6=0" 2>/dev/null || true
		[ "$2" = 1 ] && ip link set "$i" up
		shift 2
	done
}

# Mount debugfs once.
debugfs() {
	[ -e /sys/kernel/debug/kmemleak ] || mount -t debugfs none /sys/kernel/debug 2>/dev/null
	return 0
}

# Fail unless kmemleak finds no unreferenced object (it reports objects older
# than 5 s, hence the wait); $1 says after what. A scan of the guest's
# memory takes seconds under TCG: one scan, and a second only to confirm
# what the first found (an object whose only reference was in flight
# during the first scan is found referenced by the second).
kmemleak_clean_after() {
	debugfs
	[ -e /sys/kernel/debug/kmemleak ] || fail "kmemleak is not available"
	sleep 6
	echo scan >/sys/kernel/debug/kmemleak
	leaks=$(cat /sys/kernel/debug/kmemleak)
	if [ -n "$leaks" ]; then
		echo scan >/sys/kernel/debug/kmemleak
		leaks=$(cat /sys/kernel/debug/kmemleak)
	fi
	if [ -n "$leaks" ]; then
		echo "$leaks" | head -n 60
		fail "kmemleak reports unreferenced objects after $1"
	fi
	return 0
}

# The emulator's control interface, on the guest's third serial port.
EMU_CTL=/dev/ttyS2

# Send one command to the emulator and print its reply lines; fail on an
# "err" reply or when no reply comes within 10 s.
emu_ctl() {
	if [ -z "${emu_ctl_raw:-}" ]; then
		stty -F $EMU_CTL raw -echo || return 1
		emu_ctl_raw=1
	fi
	exec 9<>$EMU_CTL
	echo "$*" >&9
	while IFS= read -r -t 10 line <&9; do
		case "$line" in
		ok)
			exec 9<&-
			return 0
			;;
		"err "*)
			exec 9<&-
			echo "emulator: '$*': $line" >&2
			return 1
			;;
		*) echo "$line" ;;
		esac
	done
	exec 9<&-
	echo "emulator: no reply to '$*'" >&2
	return 1
}

# Run "$@" in the background with its output in $1.out ($1 is a name), and
# wait until it prints "listening"; sets $bg_pid.
start_listener() {
	name=$1
	shift
	"$@" >"/tmp/$name.out" 2>&1 &
	bg_pid=$!
	i=0
	while ! grep -q listening "/tmp/$name.out" && [ $i -lt 100 ]; do
		kill -0 $bg_pid 2>/dev/null || break
		sleep 0.1
		i=$((i + 1))
	done
	grep -q listening "/tmp/$name.out" || {
		cat "/tmp/$name.out"
		fail "$name did not start listening"
	}
}

# Wait up to $2 tenths of a second until file $1 has a line matching $3;
# fail (showing the file) if it does not.
wait_for_line() {
	i=0
	until grep -q -E "$3" "$1" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt "$2" ] || { cat "$1"; fail "no '$3' in $1 after $(($2 / 10)) s"; }
		sleep 0.1
	done
}

# Start `gaudi-verbs-test removal` (traffic until the device goes away) and
# wait until its WRITEs flow; sets $bg_pid, output in /tmp/removal.out.
# The ports' interfaces are brought up first: the program takes any event
# but DEVICE_FATAL for a failure, and an interface it brought up itself
# (to reach its GIDs) would give it PORT_ACTIVE.
start_removal_traffic() {
	ports_up "$(gaudi_devices | head -n 1)" "$(kparam ports 24)" "before the traffic"
	start_listener removal gaudi-verbs-test removal
	wait_for_line /tmp/removal.out 600 '^traffic$'
}

# Fail unless `rdma link show` attaches each port of gaudi_0, in state $2 (a
# pattern), to the interface of Gaudi2 function $1 whose dev_port is the
# port's index, and the function has $3 interfaces; $4 says when. The
# interfaces are gaudi_en's (children of the function) and a port's state
# is its interface's: ACTIVE only while it is up with carrier (ports_up).
# One pass over the function's interfaces, with shell built-ins only: a
# lookup per port reads every interface's sysfs once per port, and each
# process costs a tenth of a second under TCG.
ports_attached() {
	_want=$(for _i in /sys/bus/pci/devices/"$1"/net/*; do
		[ -e "$_i" ] || continue
		read -r _p <"$_i/dev_port"
		echo "gaudi_0/$((_p + 1)) ${_i##*/}"
	done | sort)
	[ "$(echo "$_want" | grep -c .)" = "$3" ] ||
		fail "$4: $(echo "$_want" | grep -c .) interfaces are children of $1, expected $3: $_want"
	_links=$(rdma link show) || fail "$4: rdma link show failed"
	_got=$(echo "$_links" | sed -n "s/^link \(gaudi_0\/[0-9]*\) state $2 .* netdev \([^ ]*\) *\$/\1 \2/p" | sort)
	[ "$_got" = "$_want" ] || {
		echo "$_links"
		fail "$4: rdma link show does not attach each port ($2) to its interface: want $_want, got $_got"
	}
}

# Bring up every network interface of Gaudi2 function $1 and wait up to
# 10 s until each of the $2 ports of gaudi_0 is ACTIVE, then check that
# each is attached to its own interface (ports_attached); $3 says when.
# As for mlx5's RoCE ports, a port's state is its interface's (the RDMA
# core's): ACTIVE only while the interface is up and has carrier (the
# emulated link's, up unless a test takes it down), DOWN otherwise, and
# the core reports each change as PORT_ACTIVE or PORT_ERR. So a test that
# wants ACTIVE ports brings their interfaces up, before a program opens
# its async event file. The interfaces stay up.
ports_up() {
	_ui=""
	for _i in /sys/bus/pci/devices/"$1"/net/*; do
		if [ -e "$_i" ]; then _ui="$_ui ${_i##*/}"; fi
	done
	[ -n "$_ui" ] || fail "$3: $1 has no network interface (gaudi_en not bound?)"
	if [ "$(active_ports)" != "$2" ]; then
		# One process for all of them (each costs a tenth of a second
		# under TCG).
		# shellcheck disable=SC2086 # one word per interface
		printf 'link set dev %s up\n' $_ui | ip -batch - || fail "$3: cannot bring up$_ui"
		_t=0
		until [ "$(active_ports)" = "$2" ]; do
			_t=$((_t + 1))
			[ $_t -lt 100 ] || {
				rdma link show
				fail "$3: not $2 ports of gaudi_0 ACTIVE with an interface 10 s after bringing up$_ui"
			}
			sleep 0.1
		done
		# A carrier that comes after the interface is up reaches the RDMA
		# core through the link watcher, up to a second later: its
		# PORT_ACTIVE goes before a program opens its event file.
		sleep 1
	fi
	ports_attached "$1" ACTIVE "$2" "$3"
}

# How many ports of gaudi_0 `rdma link show` has ACTIVE with an interface.
active_ports() {
	rdma link show 2>/dev/null | grep -c '^link gaudi_0/[0-9]* state ACTIVE .* netdev ' || true
}

# The auxiliary device whose name starts with $1 (gaudi_cn.en., ...), if
# there is one.
aux_device() {
	for _ad in /sys/bus/auxiliary/devices/"$1"*; do
		[ -e "$_ad" ] && echo "${_ad##*/}" && return 0
	done
	return 0
}

# Frames from interface $2 (MAC $3) to interface $4 (MAC $5) of two linked
# ports, and back: each interface is brought up with address $1.0.1 or
# $1.0.2, and $1.9.9 is an address behind the other side (its MAC, a
# permanent neighbour), so that `ping -I $2 $1.9.9` sends frames across the
# link (a local address would use the loopback) that $4 receives.
cross_link_up() {
	_cp=$1
	for x in "$2 $1.0.1 $5" "$4 $1.0.2 $3"; do
		set -- $x
		ip link set "$1" up || fail "$1: cannot bring it up"
		ip addr add "$2/32" dev "$1" || fail "$1: cannot add $2"
		ip neigh replace "$_cp.9.9" lladdr "$3" dev "$1" nud permanent ||
			fail "$1: no neighbour $_cp.9.9"
		ip route replace "$_cp.9.9/32" dev "$1" || fail "$1: no route to $_cp.9.9"
	done
}

# After a fatal error: the InfiniBand device is gone while PCI function $1
# stays bound to the driver and the chip's auxiliary device to the NIC
# core; unbinding the function leaves no DMA or interrupt behind (after
# $3), and binding it again gives a working device whose $2 links are each
# attached to its new interface (DOWN, as the interface is: turning them
# ACTIVE opens every raw path, which costs seconds on 24 ports, and other
# tests show it).
rebind_after_fatal() {
	n=$(rdma dev show | grep -c ': gaudi_' || true)
	[ "$n" = 0 ] || fail "the gaudi device is still registered after the fatal error"
	[ "$(bound_driver "$1")" = gaudi_pci ] || fail "the PCI device lost its driver"
	_cn=$(aux_device gaudi_pci.cn.)
	[ -n "$_cn" ] || fail "no gaudi_pci.cn auxiliary device after the fatal error"
	[ -e "/sys/bus/auxiliary/devices/$_cn/driver" ] || fail "the NIC core let go of $_cn after the fatal error"
	echo "$1" >/sys/bus/pci/drivers/gaudi_pci/unbind || fail "unbind failed"
	emu_quiet_after "$3 and unbind"
	echo "$1" >/sys/bus/pci/drivers/gaudi_pci/bind || fail "bind failed"
	ports_attached "$1" DOWN "$2" "after rebind"
	gaudi-verbs-test uverbs --ports "$2" >/tmp/uverbs.out 2>&1 || {
		cat /tmp/uverbs.out
		fail "the rebound device does not work"
	}
}

# State of link $1 (e.g. gaudi_0/1) in `rdma link show`.
link_state() {
	rdma link show "$1" | sed -n 's/.* state \([A-Z_]*\) .*/\1/p'
}

# Load the driver on a device it must refuse, the emulator made faulty by
# control command $2 (undone by $3 afterwards), and check that the refusal
# left nothing behind: the module loads, the first Gaudi2 function is
# unbound, has no interrupt and is disabled, and the kernel log has line $1
# for it. Prints the driver's log lines for that function, then unloads
# the driver (the device stays unbound for the next test to load it).
probe_refused() {
	d=$(gaudi_devices | head -n 1)
	[ -n "$d" ] || fail "no 1da3:1020 device on the PCI bus"
	unload_drivers
	emu_ctl "$2" >/dev/null || fail "emulator: $2 failed"
	# The refusal is an error of the driver, and of the driver core.
	expect_warning "gaudi_pci $d: $1"
	expect_warning "gaudi_pci $d: probe with driver gaudi_pci failed"
	if insmod /lib/modules/gaudi_pci.ko; then :; fi
	emu_ctl "$3" >/dev/null || fail "emulator: $3 failed"
	grep -q '^gaudi_pci ' /proc/modules || fail "module did not load"
	drv=$(bound_driver "$d")
	[ -z "$drv" ] || fail "refused device bound to $drv"
	! ls /sys/bus/auxiliary/devices | grep -q '^gaudi_pci\.' || fail "refused probe left an auxiliary device"
	test_log | grep -q "gaudi_pci $d: $1" || fail "no log line '$1'"
	! grep -q gaudi_pci /proc/interrupts || fail "refused probe left interrupts behind"
	[ "$(cat "/sys/bus/pci/devices/$d/enable")" = 0 ] || fail "refused probe left the device enabled"
	test_log | grep "gaudi_pci $d"
	rmmod gaudi_pci || fail "rmmod gaudi_pci failed after a refused probe"
}

# Unload the drivers that are loaded: the RDMA driver, the Ethernet driver,
# the NIC core, then the emulated function's.
unload_drivers() {
	for m in gaudi_ib gaudi_en gaudi_cn gaudi_pci; do
		! grep -q "^$m " /proc/modules || rmmod $m || fail "rmmod $m failed"
	done
}

# The driver's module parameters the session gives (gaudi.modargs=a=1,b=2 on
# the kernel command line).
gaudi_modargs() {
	for arg in $(cat /proc/cmdline); do
		case "$arg" in
		gaudi.modargs=*) echo "${arg#gaudi.modargs=}" | tr , ' ' ;;
		esac
	done
}

# Load the drivers unless they are loaded (the emulated function's, which
# owns the chip, the NIC core, the Ethernet driver and the RDMA driver),
# and wait until gaudi_0 exists. The Ethernet driver's interfaces are
# down, and so are the ports, until a test brings them up (ports_up).
load_driver() {
	for m in gaudi_pci gaudi_cn gaudi_en; do
		grep -q "^$m " /proc/modules || insmod /lib/modules/$m.ko ||
			fail "insmod $m failed"
	done
	# shellcheck disable=SC2046 # one word per parameter
	grep -q '^gaudi_ib ' /proc/modules || insmod /lib/modules/gaudi_ib.ko $(gaudi_modargs) ||
		fail "insmod gaudi_ib failed"
	i=0
	while [ ! -e /sys/class/infiniband/gaudi_0 ] && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ -e /sys/class/infiniband/gaudi_0 ] || fail "no gaudi_0 after loading the driver"
}

# Bring up the management NIC (the first Ethernet interface) with the
# address of gaudi.mgmt, and wait until gaudi.peer answers a ping.
mgmt_up() {
	ip=$(kparam mgmt "")
	peer=$(kparam peer "")
	[ -n "$ip" ] && [ -n "$peer" ] || fail "gaudi.mgmt and gaudi.peer are needed"
	ifc=$(nic_with_mac '02:00:00:99:00:')
	[ -n "$ifc" ] || fail "no management NIC"
	up_and_ping "$ifc" "$ip" "$peer"
	echo "management NIC $ifc: $ip, peer $peer answers"
}

# Interface $1 up with address $2/24, and wait until $3 answers a ping.
up_and_ping() {
	ip link set lo up
	ip addr replace "$2/24" dev "$1"
	ip link set "$1" up
	# Up to two minutes of the guest's clock: a ping can also fail at once
	# (no neighbour entry yet, the link still coming up), so a count of
	# tries is no measure of time.
	t0=$(uptime_cs)
	until ping -c 1 -W 1 "$3" >/dev/null 2>&1; do
		[ $(($(uptime_cs) - t0)) -lt 12000 ] || fail "peer $3 does not answer on $1"
		sleep 0.2
	done
}

# The network interface of port $1 (dev_port $1 - 1) of the Gaudi2, if it
# has one.
port_if() {
	_pd=$(gaudi_devices | head -n 1)
	for _pi in /sys/class/net/*; do
		[ "$(basename "$(readlink "$_pi/device" 2>/dev/null)")" = "$_pd" ] || continue
		[ "$(cat "$_pi/dev_port" 2>/dev/null)" = $(($1 - 1)) ] || continue
		echo "${_pi##*/}"
		return 0
	done
}

# The exchange of the two-host tests (addresses, keys, checks) over the
# link of port 1 itself: its network interface gets 10.98.0.N/24, N the
# last octet of gaudi.mgmt; prints the peer's exchange address
# (10.98.0.M, M that of gaudi.peer) once it answers. Messages go to
# standard error.
exchange_up() {
	me=$(kparam mgmt "")
	them=$(kparam peer "")
	[ -n "$me" ] && [ -n "$them" ] || fail "gaudi.mgmt and gaudi.peer are needed"
	me=10.98.0.${me##*.}
	them=10.98.0.${them##*.}
	load_driver
	xifc=$(port_if 1)
	[ -n "$xifc" ] || fail "no interface on the link of port 1"
	up_and_ping "$xifc" "$me" "$them"
	echo "exchange over $xifc (the Gaudi link): $me, peer $them answers" >&2
	echo "$them"
}

# The network interface whose MAC address starts with $1.
nic_with_mac() {
	for _ni in /sys/class/net/*; do
		read -r _nm <"$_ni/address" || continue
		case "$_nm" in "$1"*) echo "${_ni##*/}" && return 0 ;; esac
	done
}

# Bring up port 1's network interface (dev_port 0 of the Gaudi2) with IPv4
# address $1/24 and IPv6 address $2/64, MTU 9000, and no IPv6
# autoconfiguration traffic of its own; prints its name.
data_if_up() {
	n=$(port_if 1)
	[ -n "$n" ] || fail "no network interface of port 1"
	sysctl -qw "net.ipv6.conf.$n.accept_ra=0" "net.ipv6.conf.$n.router_solicitations=0" 2>/dev/null || true
	ip link set "$n" mtu 9000 || fail "$n: MTU 9000 refused"
	ip addr add "$1/24" dev "$n" || fail "$n: cannot add $1"
	ip addr add "$2/64" dev "$n" nodad || fail "$n: cannot add $2"
	ip link set "$n" up || fail "$n: cannot bring it up"
	echo "$n"
}

# Take one TCP connection on port $1 and store what it carries in file $2,
# until the sender closes. (A plain "nc -l" ends the connection as soon as
# its own input ends, which cuts the sender off.)
recv_file() {
	nc -l -p "$1" -e /bin/sh -c "cat >$2"
}

# Send standard input to port $2 of host $1 (TCP), waiting up to $3 seconds
# (default 60) for the other side to listen.
send_to() {
	cat >/tmp/send_to.$$
	t=0
	until nc -w 10 "$1" "$2" </tmp/send_to.$$ 2>/dev/null; do
		t=$((t + 1))
		[ $t -lt "${3:-60}" ] || { rm -f /tmp/send_to.$$; return 1; }
		sleep 1
	done
	rm -f /tmp/send_to.$$
}

# Frames and bytes sent, then received, by interface $1.
counters() {
	# One read of /proc/net/dev takes all four from one snapshot of the
	# driver's counters; four sysfs files would be four, and a frame
	# arriving between them would count in one and not the other.
	awk -v i="$1:" '$1 == i { print $11, $10, $3, $2 }' /proc/net/dev
}

# Soft-RoCE (rxe0) on the NIC whose MAC starts with $1, with address $2/24;
# prints the NIC's name.
rxe_up() {
	for m in udp_tunnel ip6_udp_tunnel rdma_rxe; do
		grep -q "^$m " /proc/modules || insmod "/lib/modules/$m.ko" ||
			fail "insmod $m failed"
	done
	nic=$(nic_with_mac "$1")
	[ -n "$nic" ] || fail "no NIC with MAC $1*"
	ip addr replace "$2/24" dev "$nic"
	ip link set "$nic" up
	rdma link add rxe0 type rxe netdev "$nic" || fail "rdma link add rxe0 failed"
	echo "$nic"
}

# The link between the two hosts' Gaudi2 and soft-RoCE: port 2 of this
# host's Gaudi2 (RXE_LINK_GAUDI) and, on the other host, a virtio-net NIC
# with MAC RXE_NIC_MAC running rxe (RXE_LINK_RXE); the hosts exchange
# addresses and verdicts over the Gaudi2 link of port 1 (exchange_up).
RXE_LINK_GAUDI=10.0.1.1
RXE_LINK_RXE=10.0.1.2
RXE_NIC_MAC=02:00:00:00:00:02

# Bring up the network interface of port 2 (dev_port 1) of the Gaudi2 with
# RXE_LINK_GAUDI/24, the side of the link to the rxe host; prints its name.
rxe_link_up() {
	n=$(port_if 2)
	[ -n "$n" ] || fail "no network interface of port 2"
	ip addr replace "$RXE_LINK_GAUDI/24" dev "$n" || fail "$n: cannot add $RXE_LINK_GAUDI"
	ip link set "$n" up || fail "$n: cannot bring it up"
	echo "$n"
}

# rxe0 on this host's NIC of the link to the other host's Gaudi2 port 2
# (RXE_LINK_RXE/24), unless it is there already; prints the NIC's name.
rxe_link_rxe_up() {
	if rdma link show rxe0/1 >/dev/null 2>&1; then
		nic_with_mac "$RXE_NIC_MAC"
	else
		rxe_up "$RXE_NIC_MAC" "$RXE_LINK_RXE"
	fi
}

# The value of counter $1 (dma_audit, stale_translation, ...) of the
# emulator's "stat" reply.
emu_stat() {
	emu_ctl stat | sed -n "s/^$1 //p"
}

# Whether process $1 is still running (a zombie is not: the shell may not
# have reaped it yet).
running() {
	[ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status"
}

# Wait up to $2 seconds for process $1 to end; 1 if it is still running.
wait_gone() {
	i=0
	while running "$1"; do
		[ $i -lt $(($2 * 10)) ] || return 1
		sleep 0.1
		i=$((i + 1))
	done
	return 0
}

# Guest uptime in hundredths of a second.
uptime_cs() {
	read -r up _ </proc/uptime
	echo "${up%.*}${up#*.}"
}

# Run perftest program $2 as client of the server at $3 (further arguments
# passed on), on port 1 of gaudi_0 (port PERFTEST_PORT of PERFTEST_DEV if
# set), its output in file $1. Only a refused connection (the server not listening yet:
# perftest's client gives up at once) is tried again, for up to 30 s; a run
# is killed after PERFTEST_TIMEOUT seconds (300).
perftest_client() {
	out=$1
	prog=$2
	server=$3
	shift 3
	i=0
	while :; do
		timeout "${PERFTEST_TIMEOUT:-300}" "$prog" -d "${PERFTEST_DEV:-gaudi_0}" -i "${PERFTEST_PORT:-1}" -F "$@" "$server" >"$out" 2>&1 && return 0
		grep -q "Couldn't connect to $server" "$out" || return 1
		i=$((i + 1))
		[ $i -lt 30 ] || return 1
		sleep 1
	done
}

# The report in file $1 has $2 result lines (one per message size: first
# column a size in bytes, second the iterations).
perftest_sizes() {
	n=$(awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ { n++ } END { print n + 0 }' "$1")
	[ "$n" = "$2" ] || { echo "$n result lines, expected $2" >&2; return 1; }
}

# The index in the GID table of port $3 (1 if not given) of RDMA device $1
# of the RoCE v2 GID of IPv4 address $2 (waiting up to 5 s for the core to
# add it).
gid_index_v4() {
	want=$(echo "$2" | awk -F. '{ printf "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", $1, $2, $3, $4 }')
	i=0
	while [ $i -lt 50 ]; do
		for g in /sys/class/infiniband/"$1"/ports/"${3:-1}"/gids/*; do
			[ "$(cat "$g" 2>/dev/null)" = "$want" ] || continue
			[ "$(cat "/sys/class/infiniband/$1/ports/${3:-1}/gid_attrs/types/${g##*/}" 2>/dev/null)" = "RoCE v2" ] || continue
			echo "${g##*/}"
			return 0
		done
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# Benchmarks run their measurements BENCH_RUNS times (at least 5) and
# report each figure as the minimum, median and maximum over the runs.
BENCH_RUNS=5

# Summarise the "bench:" lines of file $1, collected over several runs:
# lines that differ only in their numbers are one figure, printed once with
# every number that varies as min/median/max over the runs (and the run
# count).
bench_summary() {
	awk '
	/^bench:/ {
		shape = $0; n = 0; rest = $0; vals = ""
		while (match(rest, /[0-9]+(\.[0-9]+)?/)) {
			n++; vals = vals (n > 1 ? " " : "") substr(rest, RSTART, RLENGTH)
			rest = substr(rest, RSTART + RLENGTH)
		}
		gsub(/[0-9]+(\.[0-9]+)?/, "#", shape)
		if (!(shape in runs)) { order[++shapes] = shape }
		runs[shape]++
		all[shape, runs[shape]] = vals
	}
	function sort(a, k,   i, j, t) {
		for (i = 2; i <= k; i++)
			for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	}
	END {
		for (s = 1; s <= shapes; s++) {
			shape = order[s]; k = runs[shape]
			m = split(all[shape, 1], first, " ")
			out = shape
			for (f = 1; f <= m; f++) {
				for (r = 1; r <= k; r++) { split(all[shape, r], v, " "); col[r] = v[f] }
				sort(col, k)
				fig = (col[1] == col[k]) ? col[1] : col[1] "/" col[int((k + 1) / 2)] "/" col[k]
				sub(/#/, fig, out)
			}
			print out " [min/median/max of " k " runs]"
		}
	}' "$1"
}
