#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# All tests: host-side unit tests of the tools, then guest tests in VM
# sessions against the emulated Gaudi2. TAP on stdout, ending with
# "N passed, N failed"; non-zero exit status if anything failed.

. "$(dirname "$0")/lib.sh"

# Guest sessions, longest first (they run two at a time); every emulator
# but those of the refused-probe tests runs in strict mode (late commands
# and invalidations, slow resets, refused doorbells): name |
# emulator arguments | guest tests in order |
# extra QEMU arguments | kernel parameters | guest RAM in MiB (512 if
# empty) | CPUs (1 if empty; each takes one of the host's CPUs). Guests boot
# without ACPI unless their kernel parameters say acpi=force (two CPUs,
# PCI hotplug), which costs about 10 s of boot under TCG.
# @P0@ and @P1@ are free UDP ports on loopback. KUnit runs at boot only in
# the boot session (KUNIT_SESSION); its results are taken from the console
# (KTAP).
# A virtio-net NIC on a QEMU "-netdev dgram" link: ID, local and remote UDP
# port (placeholders allowed), MAC address.
nic() {
	echo "-netdev dgram,id=$1,local.type=inet,local.host=127.0.0.1,local.port=$2,\
remote.type=inet,remote.host=127.0.0.1,remote.port=$3 \
-device virtio-net-pci,netdev=$1,mac=$4,romfile="
}
PEER_NIC=$(nic peer @P1@ @P0@ 02:00:00:00:00:02)
KUNIT_SESSION=boot
KUNIT_ARGS='kunit.filter_glob=rust_* loglevel=7'
SESSIONS=(
	"queues|--strict --ports 2 --link 0=@P0@:@P1@ --link 1=@P1@:@P0@|probe,rebind,aux_load_order,rings_wrap,sq_full,cq_overflow,eq_overflow,device_errors,wire_faults,link_flap_traffic,fatal_under_traffic,device_fatal,emulator_crash||gaudi.ports=2|1024"
	"pyverbs|--strict --ports 2|pyverbs|-virtfs local,path=$ENVROOT,mount_tag=env,security_model=none,readonly=on|gaudi.ports=2|2048"
	"main|--strict|boot,probe,aux_layout,msix,ibdev_single_device_all_ports,ibv_devinfo,uverbs_ioctl,ownership,pd_single,mr_register,mr_no_foreign_frames,port_events,unbind_rebind,kmemleak_clean||gaudi.ports=24|2048"
	"dv|--strict --link 0=@P0@:@P1@ --link 1=@P1@:@P0@|dv_write,dv_foreign_address,asid_isolation,qp_set_same_index,uapi_bad_attrs,hbm_scrubbed,dv_unbind,limits_enforced,log_ratelimited,kmemleak_clean||gaudi.ports=24|3072"
	"write|--strict --ports 2 --link 0=@P0@:@P1@ --link 1=@P1@:@P0@|write_errors,mr_out_of_bounds,rkey_bounds,unsupported_opcodes,write_loopback,cq_no_overflow,netdev_ports,netdev_loopback,roce_gid_table,modify_qp_av_refused,rkey_rebind,netdev_unbind,aux_unbind_each,pd_identity,asid_mappings,kmemleak_clean||gaudi.ports=2|3072"
	"concurrency|--strict --msi --ports 2 --link 0=@P0@:@P1@ --link 1=@P1@:@P0@|concurrency,hot_unplug||gaudi.ports=2 acpi=force|1024|2"
	"strict|--strict --reset-delay-ms 200 --ports 2 --link 0=@P0@:@P1@ --link 1=@P1@:@P0@|dereg_during_transfer,stale_wqe_after_dereg,teardown_quiesced,fuzz_uverbs,fuzz_device,fuzz_nic||gaudi.ports=2|2048"
	"boot|--strict --ports 2 --addr 0=02:1d:a3:00:00:00,10.0.0.1 --link 0=@P0@:@P1@|link_arp,ibdev_single_device_all_ports,port_events,probe_bad_id,probe_not_ready|$PEER_NIC|gaudi.ports=2 $KUNIT_ARGS"
)
# Sessions of two VMs, each with its own emulated Gaudi2, started together:
# name | emulator arguments A | tests A | kernel parameters A | emulator
# arguments B | tests B | kernel parameters B | guest RAM in MiB of each |
# more QEMU arguments of B | of A.
# @P0@/@P1@ are the UDP ports of the Gaudi link between them; each VM also
# has a management NIC (virtio-net) on a link of its own to the other, for
# what a test must keep off the Gaudi link (netdev_traffic's counters):
# 10.99.0.1 (A) and 10.99.0.2 (B); the other tests exchange over the Gaudi
# link itself (exchange_up in guest-lib.sh).
# In "two_hosts", B also runs the kernel's soft-RoCE on a virtio-net NIC on
# the link of A's port 2 (@D0@/@D1@), the peer of the rxe tests.
RXE_NIC=$(nic data @D1@ @D0@ 02:00:00:00:00:02)
PAIRS=(
	"two_hosts|--strict --ports 2 --link 0=@P0@:@P1@ --link 1=@D0@:@D1@|write_two_hosts,write_av,dv_write_two_hosts,hbm_dmabuf_p2p,netdev_traffic,perftest_write_bw,perftest_write_imm_bw,perftest_write_lat,rc_pingpong_refused,write_to_rxe,write_from_rxe,perftest_gaudi_to_rxe,perftest_rxe_to_gaudi|gaudi.ports=2 gaudi.mgmt=10.99.0.1 gaudi.peer=10.99.0.2 @TSC@|--strict --instance 1 --ports 2 --link 0=@P1@:@P0@|write_two_hosts_target,write_av_target,dv_write_two_hosts_target,hbm_dmabuf_p2p_target,netdev_traffic_target,perftest_write_bw_target,perftest_write_imm_bw_target,perftest_write_lat_target,rc_pingpong_refused_target,write_to_rxe_target,write_from_rxe_target,perftest_gaudi_to_rxe_target,perftest_rxe_to_gaudi_target|gaudi.ports=2 gaudi.mgmt=10.99.0.2 gaudi.peer=10.99.0.1 @TSC@|2048|$RXE_NIC"
)
# The benchmark (BENCH=1, "make bench"): these sessions instead; their
# "bench:" lines are printed at the end. bench_two_hosts: both VMs have a
# Gaudi2 (port 1 linked) and rxe on a virtio-net NIC (linked too).
if [ "${BENCH:-0}" = 1 ]; then
	SESSIONS=(
		"bench_local|--ports 2 --link 0=@P0@:@P1@ --link 1=@P1@:@P0@|bench_local||gaudi.ports=2 gaudi.test_limit=1700|3072"
	)
	PAIRS=(
		"bench_two_hosts|--ports 2 --link 0=@P0@:@P1@|bench_two_hosts|gaudi.ports=2 gaudi.mgmt=10.99.0.1 gaudi.peer=10.99.0.2 gaudi.data=10.0.9.1 gaudi.peer_data=10.0.9.2 gaudi.test_limit=1700 @TSC@|--instance 1 --ports 2 --link 0=@P1@:@P0@|bench_two_hosts_target|gaudi.ports=2 gaudi.mgmt=10.99.0.2 gaudi.peer=10.99.0.1 gaudi.data=10.0.9.2 gaudi.test_limit=1700 @TSC@|2048|$(nic data @D1@ @D0@ 02:00:00:00:09:02)|$(nic data @D0@ @D1@ 02:00:00:00:09:01)"
	)
	# Every figure is measured BENCH_RUNS (5) times (guest-lib.sh); a test
	# may take most of the session (init's limit is 900 s).
	VM_TIMEOUT=${VM_TIMEOUT:-1800}
fi
# The soak (SOAK=1, "make soak"): 1000 unbind/bind and 1000 rmmod/insmod
# cycles, memory regions in a 1 GiB page (a 5 GiB guest, where boot and
# kmemleak's scans take minutes under TCG), and mixed traffic with faults
# for SOAK_SECONDS (default an hour).
# The fuzzer (FUZZ=1, "make fuzz"): FUZZ_CALLS calls (default 1,000,000)
# within FUZZ_SECONDS (default 3000) from seed FUZZ_SEED (default: new).
if [ "${SOAK:-0}" = 1 ]; then
	SOAK_SECONDS=${SOAK_SECONDS:-3600}
	SESSIONS=(
		"soak_cycles|--strict|probe,rebind||gaudi.ports=24 gaudi.cycles=1000 gaudi.test_limit=$((SOAK_SECONDS + 1700))|1024"
		"soak_huge1g|--strict|probe,mr_register||gaudi.ports=24 hugepagesz=1G hugepages=1 gaudi.huge1g=1|5120"
		"soak_traffic|--strict --ports 2 --link 0=@P0@:@P1@ --link 1=@P1@:@P0@|soak_traffic||gaudi.ports=2 gaudi.soak_seconds=$SOAK_SECONDS gaudi.test_limit=$((SOAK_SECONDS + 1700)) acpi=force|1024|2"
	)
	PAIRS=()
	VM_TIMEOUT=${VM_TIMEOUT:-$((SOAK_SECONDS + 1800))}
fi
if [ "${FUZZ:-0}" = 1 ]; then
	FUZZ_SEED=${FUZZ_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
	FUZZ_SECONDS=${FUZZ_SECONDS:-3000}
	echo "# fuzz seed $FUZZ_SEED"
	SESSIONS=(
		"fuzz_long|--strict --ports 2 --link 0=@P0@:@P1@ --link 1=@P1@:@P0@|fuzz_uverbs||gaudi.ports=2 gaudi.fuzz_calls=${FUZZ_CALLS:-1000000} gaudi.fuzz_seconds=$FUZZ_SECONDS gaudi.fuzz_seed=$FUZZ_SEED gaudi.test_limit=$((FUZZ_SECONDS + 800))|2048"
	)
	PAIRS=()
	VM_TIMEOUT=${VM_TIMEOUT:-$((FUZZ_SECONDS + 900))}
fi
VM_TIMEOUT=${VM_TIMEOUT:-180}
# Kernel messages that mean a test kernel found a bug.
# "unexpected driver warning" is init's report of a driver warning or
# error that the running test did not declare.
SPLAT='BUG:|WARNING:|Oops|KASAN|kernel BUG|Call Trace|circular locking|unreferenced object|Kernel panic|blocked for more than|list_add corruption|list_del corruption|detected stalls|unexpected driver warning'
# The emulator's warnings and errors, and its panics. It warns about what
# only a driver can cause (DMA refused by its audit or with bus mastering
# off, a stale translation, commands or doorbells while resetting, bad
# register accesses); what user space or a peer can cause (doorbells of
# the mapped queues, full CQs) it logs as information.
EMU_SPLAT='^\[(WARN|ERROR) |panicked'

n=0 passed=0 failed=0 skipped=0

# The KUnit tests of ours, as SUITE.TEST: the #[test] functions of every
# kunit_tests module in our files of the kernel crate, and the doctests of
# those files (the kernel build lists them in doctests_kernel_generated.rs).
OUR_KUNIT_FILES='rust/kernel/rdma rust/kernel/dma_buf.rs rust/kernel/ratelimit.rs rust/kernel/random.rs rust/kernel/io/ops.rs rust/kernel/net/gaudi'
kunit_expected() {
	local f
	# shellcheck disable=SC2086
	for f in $(cd "$TOP" && find $OUR_KUNIT_FILES -name '*.rs' 2>/dev/null | sort); do
		awk '/kunit_tests\(/ { match($0, /kunit_tests\([a-z0-9_]+\)/); suite = substr($0, RSTART + 12, RLENGTH - 13) }
			suite != "" && /#\[test\]/ { t = 1; next }
			t && /fn [a-z0-9_]+/ { match($0, /fn [a-z0-9_]+/); print suite "." substr($0, RSTART + 3, RLENGTH - 3); t = 0 }' "$TOP/$f"
	done
	grep -o -E 'rust_doctest_kernel_(rdma|dma_buf|ratelimit|random|io_ops)[a-z0-9_]*_rs_[0-9]+' \
		"$KOUT/rust/doctests_kernel_generated.rs" 2>/dev/null | sort -u | sed 's/^/rust_doctests_kernel./'
}

# KUnit results (KTAP on the console) of our tests, one TAP line each as
# kunit:SUITE.TEST; an expected test that did not report (a hung or
# crashed run) is not ok, a skipped one a skip; the other suites run are
# summed up in a comment. chip_backend_habanalabs sums up the habanalabs
# back end (kernel::net::gaudi::habanalabs, built and linted with the
# kernel crate): every test of its suite of the mapping of each operation
# passed.
kunit_results() { # CONSOLE_LOG WHY
	local line suite= t res others=0 others_failed=0 seen hb_ok=0 hb_bad=0
	declare -A expected=()
	for t in $(kunit_expected); do expected[$t]=1; done
	[ "${#expected[@]}" -gt 0 ] || tap not-ok "kunit:expected" "no KUnit tests of ours found in the sources"
	seen=$(mktemp)
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
			if [ -n "${expected[$suite.$t]:-}" ]; then
				echo "$suite.$t" >>"$seen"
				tap $res "kunit:$suite.$t"
				if [ "$suite" = rust_gaudi_habanalabs ]; then
					if [ $res = ok ]; then hb_ok=$((hb_ok + 1)); else hb_bad=$((hb_bad + 1)); fi
				fi
			else
				others=$((others + 1))
				[ $res = not-ok ] && others_failed=$((others_failed + 1))
			fi
			;;
		esac
	done <"$1"
	for t in $(printf '%s\n' "${!expected[@]}" | sort); do
		if ! grep -q -x -F "$t" "$seen"; then
			tap not-ok "kunit:$t" "did not report ($2)"
			case "$t" in rust_gaudi_habanalabs.*) hb_bad=$((hb_bad + 1)) ;; esac
		fi
	done
	if [ $hb_ok -gt 0 ] && [ $hb_bad = 0 ]; then
		tap ok chip_backend_habanalabs "$hb_ok KUnit tests of the mapping passed"
	else
		tap not-ok chip_backend_habanalabs "$hb_ok KUnit tests of the mapping passed, $hb_bad did not"
	fi
	rm -f "$seen"
	echo "# other KUnit tests run: $others, $others_failed failed"
}
tap() { # tap ok|not-ok|skip NAME [COMMENT]
	n=$((n + 1))
	case "$1" in
	ok)
		passed=$((passed + 1))
		echo "ok $n - $2${3:+ # $3}"
		;;
	skip)
		skipped=$((skipped + 1))
		echo "ok $n - $2 # SKIP${3:+ $3}"
		;;
	*)
		failed=$((failed + 1))
		echo "not ok $n - $2${3:+ # $3}"
		;;
	esac
}
diag() { sed -u 's/^/# /'; }
finish() {
	echo "1..$n"
	echo "# $skipped skipped"
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
# The kernel is built with CLIPPY=1, and kernel.sh recompiles our objects
# whenever their sources have no verdict yet: the verdict recorded for the
# current sources comes from a build that compiled and linted them.
clippy_keys
clippy_ok=1
for v in "$KOUT/clippy-drv-$drv_key" "$KOUT/clippy-crate-$crate_key"; do
	if [ ! -e "$v" ]; then
		clippy_ok=0
		echo "no clippy verdict for the current sources ($(basename "$v")): built with CLIPPY=0?" | diag
	elif [ "$(cat "$v")" != clean ]; then
		clippy_ok=0
		diag <"$v"
	fi
done
[ $clippy_ok = 1 ] && tap ok clippy || tap not-ok clippy
# rustdoc documents the kernel crate only: its verdict is kept per key of
# our part of the crate.
clippy_key=$crate_key
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
# The rdma-core provider as rdma-core's reviewers check it (it built with
# -Werror and no warning before the VMs were assembled).
if "$TOP/scripts/lint.sh" checkpatch-provider >"$CACHE/checkpatch-provider.log" 2>&1; then
	tap ok checkpatch_provider
else
	tap not-ok checkpatch_provider
	diag <"$CACHE/checkpatch-provider.log"
fi
echo "# lint: $((SECONDS - t0)) s"

# Run a VM session in the background; sets vm_pid.
# PROFILE=1: each guest's CPU is sampled through a QEMU monitor of its own
# (tools/testing/vm/guest-profile.py) into $CACHE/vm/NAME/profile.txt.
vm_start() { # NAME EMU_ARGS TESTS QEMU_ARGS KERNEL_ARGS MEM LIMIT [CPUS]
	local extra=$4 mon=$CACHE/vm/$1/hmp.sock
	if [ "${PROFILE:-0}" = 1 ]; then
		mkdir -p "$CACHE/vm/$1"
		rm -f "$mon"
		extra="$extra -monitor unix:$mon,server=on,wait=off"
		in_env python3 "$TOP/tools/testing/vm/guest-profile.py" "$mon" "$KOUT/System.map" \
			"$CACHE/vm/$1/profile.txt" >/dev/null 2>&1 &
	fi
	# shellcheck disable=SC2086
	MEM=${6:-512} CPUS=${8:-1} QEMU_EXTRA=$extra KERNEL_ARGS=$5 \
		in_env "$TOP/tools/testing/vm/session.sh" "$CACHE/vm/$1" check "$3" "$7" -- $2 &
	vm_pid=$!
}

# Report the tests of a finished VM session as TAP.
vm_report() { # NAME TESTS STATUS LIMIT
	local name=$1 tests=$2 status=$3 limit=$4 out=$CACHE/vm/$1 why line t
	# A session that never started has no logs: its tests are reported as
	# failed, and the report goes on to its end.
	mkdir -p "$out" && touch "$out/results.log" "$out/console.log" "$out/emu.log"
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
			# The console's lines end in CR LF.
			awk -v t="$t" '{ sub(/\r$/, "") } $0 == "== test " t { p = 1; next } /^== test / { p = 0 } p' \
				"$out/console.log" | tail -n 40 | diag
			;;
		*)
			tap not-ok "$t" "$why"
			tail -n 40 "$out/console.log" | diag
			;;
		esac
	done
	[ "$name" = "$KUNIT_SESSION" ] && kunit_results "$out/console.log" "$why"
	# The kernel's own reports, driver warnings no test declared (init
	# marks them), and the emulator's warnings, errors and panics.
	if grep -q -E "$SPLAT" "$out/console.log" ||
		grep -q -E "$EMU_SPLAT" "$out/emu.log"; then
		tap not-ok "kernel_log_clean_$name"
		# sed reads to the end: no SIGPIPE for grep on a long splat.
		{ grep -E -A 20 "$SPLAT" "$out/console.log" || true; } | sed -n '1,60p' | diag
		{ grep -E -A 5 "$EMU_SPLAT" "$out/emu.log" || true; } | sed -n '1,30p' | sed 's/^/emulator: /' | diag
	else
		tap ok "kernel_log_clean_$name"
	fi
}

# @TSC@: the guest's clock from its TSC (tsc_args in lib.sh).
TSC_ARGS=$(tsc_args)

ports() { # TEXT: the placeholders replaced
	echo "$1" | sed "s/@P0@/$p0/g; s/@P1@/$((p0 + 1))/g; s/@M0@/$((p0 + 2))/g; s/@M1@/$((p0 + 3))/g;
		s/@D0@/$((p0 + 4))/g; s/@D1@/$((p0 + 5))/g; s/@TSC@/$TSC_ARGS/g"
}

# ONLY=name,name runs just those sessions (while working on them); a name
# that is no session is an error, not a silent empty run.
wanted() { [ -z "${ONLY:-}" ] || [[ ",$ONLY," == *",$1,"* ]]; }
if [ -n "${ONLY:-}" ]; then
	known=" $(for s in "${SESSIONS[@]}" "${PAIRS[@]}"; do printf '%s ' "${s%%|*}"; done)"
	for o in ${ONLY//,/ }; do
		[[ "$known" == *" $o "* ]] || { tap not-ok "ONLY=$o" "no such session (sessions:$known)"; }
	done
fi

# Every session ends with a kmemleak scan: what any of its tests leaked is
# reported, nothing is cleared in between.
with_leak_scan() { # TESTS
	case ",$1," in *,kmemleak_clean,*) echo "$1" ;; ,,) echo kmemleak_clean ;; *) echo "$1,kmemleak_clean" ;; esac
}

# The sessions run two at a time (a single-VM session keeps one CPU busy
# under TCG); a pair of VMs takes both CPUs. Pairs and sessions that take
# both CPUs go first, then the single sessions longest first, each
# reported as it finishes. A session whose guests have all begun their
# last test (kmemleak_clean: 6 s of waiting for the youngest objects to
# age, then a scan) gives its CPUs to the next one, whose boot fills that
# wait (not for the benchmark, whose figures are taken with nothing else
# running).
SLOTS=${VM_SLOTS:-$(($(nproc) < 2 ? 1 : 2))}
declare -A job_desc job_t0 job_slots job_tail
free=$SLOTS
queue=()
for s in "${PAIRS[@]}"; do
	IFS='|' read -r name _ <<<"$s"
	wanted "$name" && queue+=("pair|$s")
done
# Single sessions that take every CPU go with the pairs, so that none of
# them waits for one slot to free while the other idles.
for s in "${SESSIONS[@]}"; do
	IFS='|' read -r name _ _ _ _ _ cpus <<<"$s"
	wanted "$name" && [ "${cpus:-1}" -ge "$SLOTS" ] && queue+=("single|$s")
done
for s in "${SESSIONS[@]}"; do
	IFS='|' read -r name _ _ _ _ _ cpus <<<"$s"
	wanted "$name" && [ "${cpus:-1}" -lt "$SLOTS" ] && queue+=("single|$s")
done

# The CPU time (user and system) in seconds of the waited-for children of
# a (sub)shell, from what its "times" wrote to FILE: QEMU, the emulator
# and what runs them ("times" must run in that shell, not in a pipeline's
# fork, which has no children of its own).
cpu_seconds() { # FILE
	awk 'NR == 2 {
		split($1, u, /[ms]/); split($2, s, /[ms]/)
		printf "%d\n", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$1" 2>/dev/null || echo '?'
}

start_job() { # INDEX DESC
	local i=$1 kind=${2%%|*} s=${2#*|} name emu_args tests qemu_args kernel_args mem cpus limit
	local emu_a tests_a kargs_a emu_b tests_b kargs_b qemu_b qemu_a mgmt_a mgmt_b
	p0=$((30000 + ($$ * 7 + i * 8) % 20000))
	if [ "$kind" = single ]; then
		IFS='|' read -r name emu_args tests qemu_args kernel_args mem cpus <<<"$s"
		cpus=${cpus:-1}
		[ "$cpus" -gt "$SLOTS" ] && cpus=$SLOTS
		limit=$VM_TIMEOUT
		# Times under TCG with KASAN, two sessions sharing the CPUs:
		# main 230 s, queues (with the drivers' loads and unbinds)
		# 450 s, write 240 s, dv 230 s, pyverbs 180 s.
		case "$name" in strict | concurrency) limit=$((VM_TIMEOUT * 2)) ;; write) limit=$((VM_TIMEOUT * 3)) ;; main | pyverbs | dv) limit=$((VM_TIMEOUT * 4)) ;; queues) limit=$((VM_TIMEOUT * 5)) ;; esac
		tests=$(with_leak_scan "$tests")
		rm -f "$CACHE/vm/$name.status" "$CACHE/vm/$name.times" "$CACHE/vm/$name/console.log"
		(
			st=0
			vm_start "$name" "$(ports "$emu_args")" "$tests" "$(ports "$qemu_args")" "$kernel_args" "$mem" "$limit" "$cpus"
			wait "$vm_pid" || st=$?
			times >"$CACHE/vm/$name.times"
			echo "$st" >"$CACHE/vm/$name.status"
		) &
		job_desc[$!]="single|$name|$tests|$limit"
		job_slots[$!]=$cpus
	else
		IFS='|' read -r name emu_a tests_a kargs_a emu_b tests_b kargs_b mem qemu_b qemu_a <<<"$s"
		# 1 GiB written and checked takes about 150 s; two_hosts writes
		# 2 GiB and 64 MiB.
		limit=$((VM_TIMEOUT * 2))
		[ "$name" = two_hosts ] && limit=$((VM_TIMEOUT * 4))
		tests_a=$(with_leak_scan "$tests_a")
		tests_b=$(with_leak_scan "$tests_b")
		mgmt_a=$(ports "$(nic mgmt @M0@ @M1@ 02:00:00:99:00:01)")
		mgmt_b=$(ports "$(nic mgmt @M1@ @M0@ 02:00:00:99:00:02)")
		rm -f "$CACHE/vm/${name}_a.status" "$CACHE/vm/${name}_b.status" "$CACHE/vm/$name.times" \
			"$CACHE/vm/${name}_a/console.log" "$CACHE/vm/${name}_b/console.log"
		(
			sa=0 sb=0
			vm_start "${name}_a" "$(ports "$emu_a")" "$tests_a" "$mgmt_a $(ports "$qemu_a")" "$(ports "$kargs_a")" "$mem" "$limit"
			pa=$vm_pid
			vm_start "${name}_b" "$(ports "$emu_b")" "$tests_b" "$mgmt_b $(ports "$qemu_b")" "$(ports "$kargs_b")" "$mem" "$limit"
			wait "$pa" || sa=$?
			wait "$vm_pid" || sb=$?
			times >"$CACHE/vm/$name.times"
			echo "$sa" >"$CACHE/vm/${name}_a.status"
			echo "$sb" >"$CACHE/vm/${name}_b.status"
		) &
		job_desc[$!]="pair|$name|$tests_a|$tests_b|$limit"
		job_slots[$!]=$SLOTS
	fi
	job_t0[$!]=$SECONDS
	free=$((free - job_slots[$!]))
}

# The guests of job PID: its session's name, or the pair's two.
job_vms() { # PID
	local kind name
	IFS='|' read -r kind name _ <<<"${job_desc[$1]}"
	if [ "$kind" = single ]; then echo "$name"; else echo "${name}_a ${name}_b"; fi
}

# Whether job PID has ended.
job_done() { # PID
	local running
	running=$(jobs -rp)
	[[ $'\n'$running$'\n' != *$'\n'$1$'\n'* ]]
}

# Whether every guest of job PID has begun kmemleak_clean, its last test.
job_in_tail() { # PID
	local v
	for v in $(job_vms "$1"); do
		grep -qE $'^== test kmemleak_clean\r?$' "$CACHE/vm/$v/console.log" 2>/dev/null || return 1
	done
}

finish_job() { # PID
	local pid=$1 kind name ta tb limit st cpu
	IFS='|' read -r kind name ta tb limit <<<"${job_desc[$pid]}"
	[ -n "${job_tail[$pid]:-}" ] || free=$((free + job_slots[$pid]))
	if [ "$kind" = single ]; then
		limit=$tb
		st=$(cat "$CACHE/vm/$name.status" 2>/dev/null || echo 1)
		cpu=$(cpu_seconds "$CACHE/vm/$name.times")
		echo "# session $name (accelerator ${ACCEL:-tcg}): $((SECONDS - job_t0[$pid])) s," \
			"CPU $cpu s, exit status $st"
		vm_report "$name" "$ta" "$st" "$limit"
	else
		cpu=$(cpu_seconds "$CACHE/vm/$name.times")
		echo "# session $name (two VMs): $((SECONDS - job_t0[$pid])) s," \
			"CPU $cpu s, exit status" \
			"$(cat "$CACHE/vm/${name}_a.status" 2>/dev/null || echo 1)/$(cat "$CACHE/vm/${name}_b.status" 2>/dev/null || echo 1)"
		vm_report "${name}_a" "$ta" "$(cat "$CACHE/vm/${name}_a.status" 2>/dev/null || echo 1)" "$limit"
		vm_report "${name}_b" "$tb" "$(cat "$CACHE/vm/${name}_b.status" 2>/dev/null || echo 1)" "$limit"
	fi
	[ "$cpu" = '?' ] || cpu_total=$((cpu_total + cpu))
	unset "job_desc[$pid]" "job_t0[$pid]" "job_slots[$pid]" "job_tail[$pid]"
}

t_vms=$SECONDS
cpu_total=0
mkdir -p "$CACHE/vm"
next=0
while [ "$next" -lt "${#queue[@]}" ] || [ "${#job_desc[@]}" -gt 0 ]; do
	if [ "$next" -lt "${#queue[@]}" ]; then
		need=1
		[ "${queue[$next]%%|*}" = pair ] && need=$SLOTS
		if [ "${queue[$next]%%|*}" = single ]; then
			IFS='|' read -r _ _ _ _ _ _ _ need <<<"${queue[$next]}"
			need=${need:-1}
			[ "$need" -gt "$SLOTS" ] && need=$SLOTS
		fi
		if [ "$free" -ge "$need" ]; then
			start_job "$next" "${queue[$next]}"
			next=$((next + 1))
			continue
		fi
	fi
	for pid in "${!job_desc[@]}"; do
		if job_done "$pid"; then
			wait "$pid" || true
			finish_job "$pid"
		elif [ "${BENCH:-0}" != 1 ] && [ -z "${job_tail[$pid]:-}" ] &&
			[ "$next" -lt "${#queue[@]}" ] && job_in_tail "$pid"; then
			job_tail[$pid]=1
			free=$((free + job_slots[$pid]))
		fi
	done
	sleep 0.5
done
echo "# VM sessions: $((SECONDS - t_vms)) s ($SLOTS at a time), CPU $cpu_total s"

if [ "${BENCH:-0}" = 1 ]; then
	echo "# benchmark figures:"
	cat "$CACHE"/vm/bench_*/console.log 2>/dev/null | tr -d '\r' | grep '^bench:.*min/median/max' | sed 's/^/# /'
fi
finish
