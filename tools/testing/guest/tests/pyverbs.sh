# SPDX-License-Identifier: GPL-2.0
# rdma-core's own test suite (pyverbs): the tests of the rdma-core source the
# provider is built from, with Debian's pyverbs of the same version, on
# gaudi_0 port 1 over its IPv4 RoCE v2 GID: both players of each test on the
# one port (the device loops frames to its own MAC back). The environment
# comes over 9p (read-only, with a tmpfs overlay), with the provider added
# as on any host. No test may fail or err; every test that skips must be in
# the expected list (pyverbs-skips.txt: test, then the device's reason), and
# every test in the list must skip, so that a change of the device's
# capabilities updates the list with it.
. /lib/gaudi/guest-lib.sh
load_driver
ifc=$(data_if_up 10.10.0.1 fd00:10::1) || exit 1

# The IPv4 RoCE v2 GID of port 1 (the core derives it from the address).
sys=/sys/class/infiniband/gaudi_0/ports/1
gid=
i=0
while [ -z "$gid" ] && [ $i -lt 50 ]; do
	for g in $sys/gids/*; do
		n=${g##*/}
		[ "$(cat "$g")" = "0000:0000:0000:0000:0000:ffff:0a0a:0001" ] || continue
		[ "$(cat "$sys/gid_attrs/types/$n" 2>/dev/null)" = "RoCE v2" ] && gid=$n
	done
	[ -n "$gid" ] || sleep 0.1
	i=$((i + 1))
done
[ -n "$gid" ] || fail "no RoCE v2 GID of 10.10.0.1 on port 1 ($ifc)"
echo "port 1 ($ifc): 10.10.0.1 is GID $gid"

mkdir -p /env.ro /env.rw /env
# The environment does not change while the guest runs: the guest caches
# what it reads (without a cache every read() is a 9p request: 1 MB/s
# under TCG, 40 s of the suite's imports).
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=loose,ro env /env.ro ||
	fail "no build environment over 9p"
mount -t tmpfs tmpfs /env.rw
mkdir -p /env.rw/upper /env.rw/work
mount -t overlay overlay -o lowerdir=/env.ro,upperdir=/env.rw/upper,workdir=/env.rw/work /env ||
	fail "cannot overlay the build environment"
for d in proc sys dev; do
	mount -o bind /$d /env/$d
done
mount -t tmpfs tmpfs /env/tmp
mkdir -p /env/dev/shm
mount -t tmpfs tmpfs /env/dev/shm
# The provider, installed as a distribution installs it.
lib=/usr/lib/x86_64-linux-gnu
cp $lib/libgaudi.so.1 /env$lib/libgaudi.so.1
ln -sf ../libgaudi.so.1 /env$lib/libibverbs/libgaudi-rdmav34.so
echo "driver gaudi" >/env/etc/libibverbs.d/gaudi.driver
# pyverbs' modules the project patches, from the same source: the buffers of
# the dma-buf MR tests come from udmabuf (no GPU here), and DmaBufMR works.
for m in /lib/gaudi/pyverbs/*.so; do
	cp "$m" /env/usr/lib/python3/dist-packages/pyverbs/ || fail "cannot install $m"
done
# The suite from the source the provider is built from, with the project's
# patches to it (tools/rdma-core/patches).
t=/tmp/rdma-core-tests
# (Compiled when the image was made: keep the sources' times.)
cp -a /lib/gaudi/rdma-core-tests /env$t
cp /lib/gaudi/pyverbs-run.py /env/tmp/
# Other vendors' tests (test_mlx5_*, test_efa*) can only skip here ("not an
# mlx5/EFA device"), each after a full set-up: they are not loaded, and each
# module counts as a skip for the list's entry of those vendors.
: >/tmp/excluded
for f in /env$t/test_mlx5_*.py /env$t/test_efa*.py; do
	[ -e "$f" ] || continue
	m=${f##*/}
	printf 'excluded\ttests.%s\tanother vendor'"'"'s tests, not loaded\n' "${m%.py}" >>/tmp/excluded
	rm -f "$f"
done

t0=$(uptime_cs)
chroot /env env PYTHONDONTWRITEBYTECODE=1 python3 /tmp/pyverbs-run.py \
	/tmp/results $t --dev gaudi_0 --port 1 --gid "$gid" || true
t1=$(uptime_cs)
cp /env/tmp/results /tmp/results 2>/dev/null || : >/tmp/results
total=$(wc -l </tmp/results)
[ "$total" -gt 0 ] || {
	fail "the suite ran no test"
}
cat /tmp/excluded >>/tmp/results
for s in pass fail error skip unsupported excluded; do
	echo "$s: $(awk -F '\t' -v s=$s '$1 == s' /tmp/results | wc -l)"
done
echo "$total tests in $(((t1 - t0) / 100)) s"

bad=0
# Failures and errors.
awk -F '\t' '$1 == "fail" || $1 == "error" { print "  " $1 ": " $2 ": " $3 }' /tmp/results >/tmp/bad
if [ -s /tmp/bad ]; then
	echo "failed or erred:"
	cat /tmp/bad
	bad=1
fi
# Skips against the list: its entries are test ids, or patterns with "*"
# (the tests of another vendor's devices).
awk -F '\t' '
function glob(p) { gsub(/\./, "\\.", p); gsub(/\*/, ".*", p); return "^" p "$" }
NR == FNR { if ($1 != "" && $1 !~ /^#/) { n++; ent[n] = $1; re[n] = glob($1) } next }
{
	hit = 0
	for (i = 1; i <= n && !hit; i++) if ($2 ~ re[i]) hit = i
	skipped = $1 == "skip" || $1 == "unsupported" || $1 == "excluded"
	if (skipped && !hit) print "  skipped, not in the list: " $2 " (" $3 ")"
	if (hit && !skipped) print "  in the list, did not skip: " $2 " (" $1 ")"
	if (hit) used[hit] = 1
}
END { for (i = 1; i <= n; i++) if (!used[i]) print "  in the list, not run: " ent[i] }
' /lib/gaudi/pyverbs-skips.txt /tmp/results >/tmp/drift
if [ -s /tmp/drift ]; then
	echo "the skips differ from pyverbs-skips.txt:"
	cat /tmp/drift
	bad=1
fi
# What must pass, not skip (the issue's bar): device, PD, MR, CQ, QP and
# the RDMA WRITE traffic. The NIC has no WRITE with immediate and no WRITE
# of no data: test_qp_ex_rc_rdma_write_imm and _zero_length are on the skip
# list, with those reasons.
for must in tests.test_device.DeviceTest.test_query_device \
	tests.test_device.DeviceTest.test_query_port \
	tests.test_device.DeviceTest.test_query_gid \
	tests.test_pd.PDTest.test_alloc_pd \
	tests.test_mr.MRTest.test_reg_mr_bad_flags \
	tests.test_mr.DmaBufMRTest.test_dmabuf_reg_mr \
	tests.test_mr.DmaBufMRTest.test_dmabuf_write \
	tests.test_mr.DmaBufTestCase.test_dmabuf_rdma_traffic \
	tests.test_cq.CQAPITest.test_create_cq \
	tests.test_cq.CQAPITest.test_create_cq_with_comp_channel \
	tests.test_qp.QPTest.test_create_rc_qp_with_attr \
	tests.test_qp.QPTest.test_create_rc_qp_ex_with_attr \
	tests.test_qp.QPTest.test_query_rc_qp \
	tests.test_qpex.QpExTestCase.test_qp_ex_rc_rdma_write; do
	grep -q -F "pass	$must	" /tmp/results || {
		echo "must pass: $must: $(grep -F "	$must	" /tmp/results | cut -f 1,3)"
		bad=1
	}
done
[ $bad = 0 ] || fail "rdma-core's tests: see above"
