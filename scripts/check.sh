#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# All tests: host-side unit tests of the tools, then guest tests in VM
# sessions against the emulated Gaudi2. TAP on stdout, ending with
# "N passed, N failed"; non-zero exit status if anything failed.

. "$(dirname "$0")/lib.sh"

# Guest sessions: name | emulator arguments | guest tests in order |
# extra QEMU arguments | kernel parameters | guest RAM in MiB (512 if
# empty). @P0@ and @P1@ are free UDP ports
# on loopback. KUnit runs at boot only in the kunit session; its results are
# taken from the console (KTAP).
# A virtio-net NIC on a QEMU "-netdev dgram" link: ID, local and remote UDP
# port (placeholders allowed), MAC address.
nic() {
	echo "-netdev dgram,id=$1,local.type=inet,local.host=127.0.0.1,local.port=$2,\
remote.type=inet,remote.host=127.0.0.1,remote.port=$3 \
-device virtio-net-pci,netdev=$1,mac=$4,romfile="
}
PEER_NIC=$(nic peer @P1@ @P0@ 02:00:00:00:00:02)
SESSIONS=(
	"main||boot,probe,msix,ibdev_single_device_all_ports,uverbs_ioctl,ownership,pd_single,mr_register,mr_no_foreign_frames,unsupported_opcodes,port_events,device_fatal,unbind_rebind,kmemleak_clean||gaudi.ports=24|2048"
	"bad_id|--id 0xdeadbeef|probe_bad_id||"
	"not_ready|--reset-hangs|probe_not_ready||"
	"link|--ports 2 --addr 0=02:1d:a3:00:00:00,10.0.0.1 --link 0=@P0@:@P1@|link_arp,ibdev_single_device_all_ports,port_events|$PEER_NIC|gaudi.ports=2"
	"write|--ports 2 --link 0=@P0@:@P1@ --link 1=@P1@:@P0@|mr_out_of_bounds,rkey_bounds,write_loopback,write_errors,cq_no_overflow,kmemleak_clean||gaudi.ports=2|3072"
	"strict|--strict --reset-delay-ms 200 --ports 2 --link 0=@P0@:@P1@ --link 1=@P1@:@P0@|dereg_during_transfer,teardown_quiesced,kmemleak_clean||gaudi.ports=2|2048"
	"dv|--link 0=@P0@:@P1@ --link 1=@P1@:@P0@|dv_write,dv_foreign_address,qp_set_same_index,uapi_bad_attrs,hbm_scrubbed,dv_unbind,limits_enforced,log_ratelimited,kmemleak_clean||gaudi.ports=24|3072"
	"rebind||probe,rebind||gaudi.ports=24"
	"kunit||||kunit.filter_glob=rust_* loglevel=7"
)
# Sessions of two VMs, each with its own emulated Gaudi2, started together:
# name | emulator arguments A | tests A | kernel parameters A | emulator
# arguments B | tests B | kernel parameters B | guest RAM in MiB of each |
# more QEMU arguments of B | of A.
# @P0@/@P1@ are the UDP ports of the Gaudi link between them; each VM also
# has a management NIC (virtio-net) on a link of its own to the other, for
# the tests' out-of-band exchange: 10.99.0.1 (A) and 10.99.0.2 (B).
# A tenth field gives B more QEMU arguments; emulator arguments "none": B
# has no Gaudi2. In "rxe", B runs the kernel's soft-RoCE on a virtio-net NIC
# on the link of A's port 1.
RXE_NIC=$(nic data @P1@ @P0@ 02:00:00:00:00:02)
PAIRS=(
	"two_hosts|--ports 2 --link 0=@P0@:@P1@|write_two_hosts,dv_write_two_hosts,hbm_dmabuf_p2p|gaudi.ports=2 gaudi.mgmt=10.99.0.1 gaudi.peer=10.99.0.2|--instance 1 --ports 2 --link 0=@P1@:@P0@|write_two_hosts_target,dv_write_two_hosts_target,hbm_dmabuf_p2p_target|gaudi.ports=2 gaudi.mgmt=10.99.0.2 gaudi.peer=10.99.0.1|2048|"
	"rxe|--ports 2 --link 0=@P0@:@P1@|write_to_rxe|gaudi.ports=2 gaudi.mgmt=10.99.0.1 gaudi.peer=10.99.0.2|none|write_to_rxe_target|gaudi.mgmt=10.99.0.2 gaudi.peer=10.99.0.1|1024|$RXE_NIC"
)
# The benchmark (BENCH=1, "make bench"): these sessions instead; their
# "bench:" lines are printed at the end. bench_two_hosts: both VMs have a
# Gaudi2 (port 1 linked) and rxe on a virtio-net NIC (linked too).
if [ "${BENCH:-0}" = 1 ]; then
	SESSIONS=(
		"bench_local|--ports 2 --link 0=@P0@:@P1@ --link 1=@P1@:@P0@|bench_local||gaudi.ports=2|3072"
	)
	PAIRS=(
		"bench_two_hosts|--ports 2 --link 0=@P0@:@P1@|bench_two_hosts|gaudi.ports=2 gaudi.mgmt=10.99.0.1 gaudi.peer=10.99.0.2 gaudi.data=10.0.9.1|--instance 1 --ports 2 --link 0=@P1@:@P0@|bench_two_hosts_target|gaudi.ports=2 gaudi.mgmt=10.99.0.2 gaudi.peer=10.99.0.1 gaudi.data=10.0.9.2|2048|$(nic data @D1@ @D0@ 02:00:00:00:09:02)|$(nic data @D0@ @D1@ 02:00:00:00:09:01)"
	)
fi
VM_TIMEOUT=${VM_TIMEOUT:-180}
# Kernel messages that mean a test kernel found a bug.
SPLAT='BUG:|WARNING:|Oops|KASAN|UBSAN|kernel BUG|Call Trace|circular locking|unreferenced object|Kernel panic|blocked for more than|list_add corruption|list_del corruption'

n=0 passed=0 failed=0

# KUnit results (KTAP on the console) of our suites: the rust_kernel_rdma*,
# rust_kernel_dma_buf* and rust_kernel_ratelimit suites and the
# rdma/dma_buf/ratelimit doctests, one TAP line
# each as kunit:SUITE.TEST; the other suites run are summed up in a comment.
kunit_results() { # CONSOLE_LOG
	local line suite= t res ours=0 others=0 others_failed=0
	while IFS= read -r line; do
		line=${line%$'\r'}
		line=${line#\[*\] }
		case "$line" in
		*"# Subtest: "*) suite=${line##*# Subtest: } ;;
		"    ok "* | "    not ok "*)
			t=$(echo "$line" | sed -E 's/^ *(not )?ok [0-9]+ ([^ #]+).*/\2/')
			res=ok
			case "$line" in "    not ok "*) res=not-ok ;; esac
			case "$line" in *"# SKIP"*) res=skip ;; esac
			case "$suite.$t" in
			rust_kernel_rdma* | rust_kernel_dma_buf* | rust_kernel_ratelimit* | \
				rust_doctests_kernel.*rdma* | rust_doctests_kernel.*dma_buf* | \
				rust_doctests_kernel.*ratelimit*)
				ours=$((ours + 1))
				if [ $res = skip ]; then tap ok "kunit:$suite.$t" "# SKIP"; else tap $res "kunit:$suite.$t"; fi ;;
			*)
				others=$((others + 1))
				[ $res = not-ok ] && others_failed=$((others_failed + 1))
				;;
			esac
			;;
		esac
	done <"$1"
	[ $ours = 0 ] && [ $others = 0 ] && return 0
	echo "# other KUnit tests run: $others, $others_failed failed"
}
tap() { # tap ok|not-ok NAME [COMMENT]
	n=$((n + 1))
	if [ "$1" = ok ]; then
		passed=$((passed + 1))
		echo "ok $n - $2${3:+ # $3}"
	else
		failed=$((failed + 1))
		echo "not ok $n - $2${3:+ # $3}"
	fi
}
diag() { sed -u 's/^/# /'; }
finish() {
	echo "1..$n"
	echo "$passed passed, $failed failed"
	[ "$failed" = 0 ]
}

echo "TAP version 13"
t0=$SECONDS
if ! vars=$("$TOP/scripts/build.sh" 2> >(diag >&2)); then
	tap not-ok build "set-up or build failed"
	finish
	exit 1
fi
eval "$vars"
export KERNEL INITRD EMU
echo "# build and set-up: $((SECONDS - t0)) s"

# Host-side tests of the emulator and tools.
t0=$SECONDS
cargo_env test --release >"$CACHE/cargo-test.log" 2>&1 || true
while read -r _ name _ res; do
	[ "$res" = ok ] && tap ok "host: $name" || tap not-ok "host: $name"
done < <(grep -E '^test .* \.\.\. (ok|FAILED)$' "$CACHE/cargo-test.log" | LC_ALL=C sort)
if grep -q -E '^error' "$CACHE/cargo-test.log"; then
	tap not-ok "host: cargo test builds"
	diag <"$CACHE/cargo-test.log"
fi
echo "# host tests: $((SECONDS - t0)) s"

# Kernel coding conventions on the overlay's Rust code.
t0=$SECONDS
if "$TOP/scripts/lint.sh" rustfmtcheck >"$CACHE/rustfmt.log" 2>&1; then
	tap ok rustfmt
else
	tap not-ok rustfmt
	diag <"$CACHE/rustfmt.log"
fi
# The kernel is built with CLIPPY=1: lints of our Rust code are warnings in
# the build log of the build that compiled it. When none of our files
# changed since a clean verdict, nothing of ours was compiled, and the
# verdict stands.
ours='hw/gaudi/|rust/kernel/pci/irq_handlers|rust/kernel/rdma|rust/kernel/dma_buf'
clippy_key=$(cd "$TOP" && cat kernel/patches/* $(find drivers rust -type f | sort) | sha256sum | cut -c1-16)
if [ -e "$CACHE/clippy-clean-$clippy_key" ]; then
	tap ok clippy
elif grep -E -A12 '^(warning|error)' "$KOUT/build.log" | grep -q -E "$ours"; then
	tap not-ok clippy
	grep -E -A12 '^(warning|error)' "$KOUT/build.log" | diag
else
	touch "$CACHE/clippy-clean-$clippy_key"
	tap ok clippy
fi
# rustdoc of the kernel crate: our modules document without warnings.
if [ -e "$CACHE/rustdoc-clean-$clippy_key" ]; then
	tap ok rustdoc
elif ! "$TOP/scripts/kernel.sh" make rustdoc >"$CACHE/rustdoc.log" 2>&1; then
	tap not-ok rustdoc "make rustdoc failed"
	tail -n 40 "$CACHE/rustdoc.log" | diag
elif grep -E -A8 '^warning' "$CACHE/rustdoc.log" | grep -q -E 'rust/kernel/(rdma|dma_buf)'; then
	tap not-ok rustdoc
	grep -E -A8 '^warning' "$CACHE/rustdoc.log" | diag
else
	touch "$CACHE/rustdoc-clean-$clippy_key"
	tap ok rustdoc
fi
# Configurations with the RDMA core or uverbs as modules drop the driver
# and kernel::rdma cleanly (no link error), without building them.
if "$TOP/scripts/kconfig-deps.sh" >"$CACHE/kconfig-deps.log" 2>&1; then
	tap ok kconfig_deps
else
	tap not-ok kconfig_deps
	diag <"$CACHE/kconfig-deps.log"
fi
echo "# lint: $((SECONDS - t0)) s"

# Run a VM session in the background; sets vm_pid.
vm_start() { # NAME EMU_ARGS TESTS QEMU_ARGS KERNEL_ARGS MEM LIMIT
	# shellcheck disable=SC2086
	MEM=${6:-512} QEMU_EXTRA=$4 KERNEL_ARGS=${5:-kunit.enable=0} \
		in_env "$TOP/tools/testing/vm/session.sh" "$CACHE/vm/$1" check "$3" "$7" -- $2 &
	vm_pid=$!
}

# Report the tests of a finished VM session as TAP.
vm_report() { # NAME TESTS STATUS LIMIT
	local name=$1 tests=$2 status=$3 limit=$4 out=$CACHE/vm/$1 why line t
	# A session that never started has no logs: its tests are reported as
	# failed, and the report goes on to its end.
	mkdir -p "$out" && touch "$out/results.log" "$out/console.log"
	tr -d '\r' <"$out/results.log" >"$out/results.txt"
	why="no result"
	[ "$status" = 124 ] && why="no result: VM killed after ${limit} s"
	grep -q '^# guest done' "$out/results.txt" || why="$why; guest did not finish"
	for t in ${tests//,/ }; do
		line=$(grep -E "^(not )?ok - $t( |\$)" "$out/results.txt" | tail -n 1 || true)
		case "$line" in
		"ok - $t"*) tap ok "$t" ;;
		"not ok - $t"*)
			tap not-ok "$t"
			awk -v t="$t" '$0 == "== test " t { p = 1; next } /^== test / { p = 0 } p' \
				"$out/console.log" | tail -n 40 | diag
			;;
		*)
			tap not-ok "$t" "$why"
			tail -n 40 "$out/console.log" | diag
			;;
		esac
	done
	kunit_results "$out/console.log"
	if [ "$name" = kunit ] && ! grep -q '# Subtest: rust_kernel_rdma' "$out/console.log"; then
		tap not-ok "kunit:rust_kernel_rdma" "no KUnit results on the console"
		tail -n 40 "$out/console.log" | diag
	fi
	if grep -q -E "$SPLAT" "$out/console.log"; then
		tap not-ok "kernel_log_clean_$name"
		# sed reads to the end: no SIGPIPE for grep on a long splat.
		grep -E -A 20 "$SPLAT" "$out/console.log" | sed -n '1,60p' | diag
	else
		tap ok "kernel_log_clean_$name"
	fi
}

ports() { # TEXT: the placeholders replaced
	echo "$1" | sed "s/@P0@/$p0/g; s/@P1@/$((p0 + 1))/g; s/@M0@/$((p0 + 2))/g; s/@M1@/$((p0 + 3))/g;
		s/@D0@/$((p0 + 4))/g; s/@D1@/$((p0 + 5))/g"
}

# ONLY=name,name runs just those sessions (while working on them).
wanted() { [ -z "${ONLY:-}" ] || [[ ",$ONLY," == *",$1,"* ]]; }

for s in "${SESSIONS[@]}"; do
	IFS='|' read -r name emu_args tests qemu_args kernel_args mem <<<"$s"
	wanted "$name" || continue
	p0=$((30000 + ($$ * 7 + n * 8) % 20000))
	t0=$SECONDS
	status=0
	limit=$VM_TIMEOUT
	# Under TCG with KASAN, 100 bind cycles take about 140 s of guest time,
	# the main session (1 GiB registrations, 1000 cycles) about 170 s, and
	# the write session (1 GiB WRITEs, error recovery) 160 to 200 s.
	case "$name" in rebind | main | write) limit=$((VM_TIMEOUT * 2)) ;; dv) limit=$((VM_TIMEOUT * 4)) ;; esac
	vm_start "$name" "$(ports "$emu_args")" "$tests" "$(ports "$qemu_args")" "$kernel_args" "$mem" "$limit"
	wait "$vm_pid" || status=$?
	echo "# session $name (accelerator ${ACCEL:-tcg}): $((SECONDS - t0)) s, exit status $status"
	vm_report "$name" "$tests" "$status" "$limit"
done

# Each VM of a pair gets a management NIC linked to the other's.
for s in "${PAIRS[@]}"; do
	IFS='|' read -r name emu_a tests_a kargs_a emu_b tests_b kargs_b mem qemu_b qemu_a <<<"$s"
	wanted "$name" || continue
	p0=$((30000 + ($$ * 7 + n * 8) % 20000))
	t0=$SECONDS
	# Two VMs share the CPUs: 1 GiB written and checked takes about 150 s,
	# and two_hosts writes 2 GiB and 64 MiB.
	limit=$((VM_TIMEOUT * 2))
	[ "$name" = two_hosts ] && limit=$((VM_TIMEOUT * 4))
	mgmt_a=$(ports "$(nic mgmt @M0@ @M1@ 02:00:00:99:00:01)")
	mgmt_b=$(ports "$(nic mgmt @M1@ @M0@ 02:00:00:99:00:02)")
	vm_start "${name}_a" "$(ports "$emu_a")" "$tests_a" "$mgmt_a $(ports "$qemu_a")" "$kargs_a" "$mem" "$limit"
	pid_a=$vm_pid
	vm_start "${name}_b" "$(ports "$emu_b")" "$tests_b" "$mgmt_b $(ports "$qemu_b")" "$kargs_b" "$mem" "$limit"
	pid_b=$vm_pid
	status_a=0 status_b=0
	wait "$pid_a" || status_a=$?
	wait "$pid_b" || status_b=$?
	echo "# session $name (two VMs): $((SECONDS - t0)) s, exit status $status_a/$status_b"
	vm_report "${name}_a" "$tests_a" "$status_a" "$limit"
	vm_report "${name}_b" "$tests_b" "$status_b" "$limit"
done

if [ "${BENCH:-0}" = 1 ]; then
	echo "# benchmark figures:"
	cat "$CACHE"/vm/bench_*/console.log 2>/dev/null | tr -d '\r' | grep '^bench:' | sed 's/^/# /'
fi
finish
