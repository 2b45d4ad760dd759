// SPDX-License-Identifier: GPL-2.0
/*
 * The target of write_to_rxe: an RDMA WRITE target on a soft-RoCE (rxe)
 * device, written against libibverbs only, that a Gaudi2 host writes into.
 *
 * It registers a region for remote writes, creates an RC QP and hands its
 * address, rkey, QP number, MAC and IPv4 address to the source host over TCP
 * (the exchange of gaudi-verbs-test write-source: one line each way, then
 * "ready"); then, for each "check OFF LEN SEED" line, it compares the LEN
 * bytes at OFF with the source's pattern of SEED, answers "ok" (and clears
 * them) or "bad N", until "done".
 *
 * With --source PEER, it is the other end instead, for the benchmark: it
 * connects to a target host PEER (an rxe-peer target), writes MIB MiB of
 * the pattern in one RDMA WRITE, prints the bandwidth, and has the target
 * check the bytes.
 *
 * usage: rxe-peer [--source PEER] IBDEV NETDEV MIB
 */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define EXCHANGE_PORT 18515
#define PSN 0x100

static void die(const char *what)
{
	printf("FAIL: %s\n", what);
	exit(1);
}

/*
 * Word i (bytes 8 * i on, little-endian) of the source's pattern of seed,
 * as gaudi-verbs-test's pattern_word(): a counter times an odd constant plus
 * the seed's start, mixed by an invertible xorshift.
 */
static uint64_t pattern_word(uint64_t seed, uint64_t i)
{
	uint64_t w = seed * 0x9e3779b97f4a7c15ULL + i * 0xd1b54a32d192ed03ULL;

	return w ^ (w >> 29);
}

/* The first offset where buf differs from the source's pattern of seed. */
static long mismatch(const uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t v;
	size_t i, j;

	for (i = 0; i < len; i += 8) {
		v = pattern_word(seed, i / 8);
		for (j = 0; j < 8 && i + j < len; j++)
			if (buf[i + j] != (uint8_t)(v >> (8 * j)))
				return (long)(i + j);
	}
	return -1;
}

static void read_sys(const char *path, char *out, size_t n)
{
	FILE *f = fopen(path, "r");

	if (!f || !fgets(out, (int)n, f))
		die(path);
	out[strcspn(out, "\n")] = 0;
	fclose(f);
}

/* The index of the port's RoCE v2 GID that maps an IPv4 address. */
static int ipv4_gid(struct ibv_context *ctx, union ibv_gid *gid, char *ip)
{
	struct ibv_gid_entry e;
	int i;

	for (i = 0; i < 16; i++) {
		if (ibv_query_gid_ex(ctx, 1, i, &e, 0))
			continue;
		if (e.gid_type != IBV_GID_TYPE_ROCE_V2)
			continue;
		if (memcmp(e.gid.raw, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12))
			continue;
		*gid = e.gid;
		inet_ntop(AF_INET, e.gid.raw + 12, ip, INET_ADDRSTRLEN);
		return i;
	}
	die("no IPv4 RoCE v2 GID on port 1");
	return -1;
}

static int getline_fd(FILE *f, char *buf, size_t n)
{
	if (!fgets(buf, (int)n, f))
		return -1;
	buf[strcspn(buf, "\r\n")] = 0;
	return 0;
}

static const char *kv(const char *line, const char *key)
{
	char pat[32];
	const char *p;

	snprintf(pat, sizeof(pat), "%s=", key);
	p = strstr(line, pat);
	if (!p)
		die(key);
	return p + strlen(pat);
}

/*
 * The test this run belongs to (the guest's init names it in GAUDI_TEST;
 * a target's name ends in "_target"), sent with the first line of the
 * exchange: a source and a target of different tests refuse each other.
 */
static void test_name(char *buf, size_t n)
{
	const char *t = getenv("GAUDI_TEST");
	size_t l;

	snprintf(buf, n, "%s", t ? t : "none");
	l = strlen(buf);
	if (l > 7 && !strcmp(buf + l - 7, "_target"))
		buf[l - 7] = 0;
}

static void check_test(const char *line)
{
	char mine[64], theirs[64];

	test_name(mine, sizeof(mine));
	snprintf(theirs, sizeof(theirs), "%s", kv(line, "test"));
	theirs[strcspn(theirs, " ")] = 0;
	if (strcmp(mine, theirs)) {
		printf("FAIL: paired with the peer of test %s, this is %s\n", theirs, mine);
		exit(1);
	}
}

static void fill(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t v;
	size_t i, j;

	for (i = 0; i < len; i += 8) {
		v = pattern_word(seed, i / 8);
		for (j = 0; j < 8 && i + j < len; j++)
			buf[i + j] = (uint8_t)(v >> (8 * j));
	}
}

static void parse_ip(const char *s, uint8_t *raw)
{
	unsigned int a[4];
	int i;

	if (sscanf(s, "%u.%u.%u.%u", &a[0], &a[1], &a[2], &a[3]) != 4)
		die("IPv4 address");
	for (i = 0; i < 4; i++)
		raw[i] = (uint8_t)a[i];
}

/* Bring qp to RTR towards dest_qpn at IPv4 address ip (and RTS if rts). */
static void connect_qp(struct ibv_qp *qp, int gidx, const char *ip,
		       unsigned int dest_qpn, int rts)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("QP to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = PSN;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.sgid_index = (uint8_t)gidx;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.dgid.raw[10] = 0xff;
	a.ah_attr.grh.dgid.raw[11] = 0xff;
	parse_ip(ip, a.ah_attr.grh.dgid.raw + 12);
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		die("QP to RTR");
	if (!rts)
		return;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = PSN;
	a.timeout = 18;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_MAX_QP_RD_ATOMIC))
		die("QP to RTS");
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* The source side: one WRITE of the whole region to the target at peer. */
static int source(const char *peer, struct ibv_qp *qp, struct ibv_cq *cq,
		  struct ibv_mr *mr, uint8_t *buf, size_t len, int gidx,
		  const char *mac, const char *ip)
{
	struct sockaddr_in sa = { 0 };
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	char line[256], tip[INET_ADDRSTRLEN], name[64];
	unsigned long long raddr;
	unsigned int rkey, tqpn;
	double t0, t;
	int s, i, n;
	FILE *in, *out;

	fill(buf, len, 0x5eed);
	sa.sin_family = AF_INET;
	sa.sin_port = htons(EXCHANGE_PORT);
	if (inet_pton(AF_INET, peer, &sa.sin_addr) != 1)
		die("peer address");
	for (i = 0;; i++) {
		s = socket(AF_INET, SOCK_STREAM, 0);
		if (!connect(s, (struct sockaddr *)&sa, sizeof(sa)))
			break;
		close(s);
		if (i == 600)
			die("connect to the target");
		usleep(200000);
	}
	in = fdopen(s, "r");
	out = fdopen(dup(s), "w");
	if (getline_fd(in, line, sizeof(line)))
		die("no target line");
	printf("target: %s\n", line);
	check_test(line);
	tqpn = (unsigned int)strtoul(kv(line, "qpn"), NULL, 10);
	rkey = (unsigned int)strtoul(kv(line, "rkey"), NULL, 10);
	raddr = strtoull(kv(line, "addr"), NULL, 10);
	if (strtoull(kv(line, "len"), NULL, 10) < len)
		die("target region too small");
	snprintf(tip, sizeof(tip), "%s", kv(line, "ip"));
	tip[strcspn(tip, " ")] = 0;
	test_name(name, sizeof(name));
	fprintf(out, "source test=%s qpn=%u mac=%s ip=%s\n", name, qp->qp_num, mac, ip);
	fflush(out);
	connect_qp(qp, gidx, tip, tqpn, 1);
	if (getline_fd(in, line, sizeof(line)) || strcmp(line, "ready"))
		die("target not ready");

	sge.addr = (uintptr_t)buf;
	sge.length = (uint32_t)len;
	sge.lkey = mr->lkey;
	wr.wr_id = 1;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	t0 = now();
	if (ibv_post_send(qp, &wr, &bad))
		die("post_send");
	do {
		n = ibv_poll_cq(cq, 1, &wc);
		if (now() - t0 > 600)
			die("no completion in 600 s");
	} while (n == 0);
	t = now() - t0;
	if (n < 0 || wc.status != IBV_WC_SUCCESS) {
		printf("FAIL: completion status %d\n", n < 0 ? -1 : wc.status);
		return 1;
	}
	printf("bench: rxe to the target host: one WRITE of %zu MiB in %.3f s: %.1f MB/s\n",
	       len >> 20, t, len / t / 1e6);
	fprintf(out, "check 0 %zu %u\n", len, 0x5eed);
	fflush(out);
	if (getline_fd(in, line, sizeof(line)) || strcmp(line, "ok"))
		die("the target found the bytes wrong");
	printf("ok: the target checked every byte\n");
	fprintf(out, "done\n");
	fflush(out);
	return 0;
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_init_attr init = { 0 };
	union ibv_gid gid;
	char path[128], mac[32], ip[INET_ADDRSTRLEN], line[256];
	struct sockaddr_in sa = { 0 };
	const char *peer = NULL;
	unsigned int peer_qpn;
	size_t len;
	uint8_t *buf;
	int i, n, gidx, ls, s, one = 1, checks = 0;
	FILE *in, *out;

	if (argc == 6 && !strcmp(argv[1], "--source")) {
		peer = argv[2];
		argv += 2;
		argc -= 2;
	}
	if (argc != 4)
		die("usage: rxe-peer [--source PEER] IBDEV NETDEV MIB");
	len = (size_t)atoi(argv[3]) << 20;

	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		die("open the rxe device");
	pd = ibv_alloc_pd(ctx);
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!pd || buf == MAP_FAILED)
		die("PD or memory");
	mr = ibv_reg_mr(pd, buf, len,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!mr || !cq)
		die("MR or CQ");
	init.send_cq = cq;
	init.recv_cq = cq;
	init.qp_type = IBV_QPT_RC;
	init.cap.max_send_wr = 4;
	init.cap.max_recv_wr = 1;
	init.cap.max_send_sge = 1;
	init.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd, &init);
	if (!qp)
		die("create QP");
	gidx = ipv4_gid(ctx, &gid, ip);
	snprintf(path, sizeof(path), "/sys/class/net/%s/address", argv[2]);
	read_sys(path, mac, sizeof(mac));
	if (peer)
		return source(peer, qp, cq, mr, buf, len, gidx, mac, ip);

	ls = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sa.sin_family = AF_INET;
	sa.sin_port = htons(EXCHANGE_PORT);
	if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) || listen(ls, 1))
		die("listen");
	printf("listening: QP %u, GID index %d (%s), MAC %s\n", qp->qp_num,
	       gidx, ip, mac);
	fflush(stdout);
	s = accept(ls, NULL, NULL);
	if (s < 0)
		die("accept");
	in = fdopen(s, "r");
	out = fdopen(dup(s), "w");
	/*
	 * Ethernet's 1500 bytes carry a 1024-byte path MTU; rxe in a small
	 * VM acknowledges slowly: ask for a 1 s ACK timeout (4.096 us * 2^18).
	 */
	test_name(path, sizeof(path));
	fprintf(out, "target test=%s qpn=%u mac=%s ip=%s rkey=%u addr=%llu len=%zu mtu=1024 timeout=18\n",
		path, qp->qp_num, mac, ip, mr->rkey,
		(unsigned long long)(uintptr_t)buf, len);
	fflush(out);
	if (getline_fd(in, line, sizeof(line)))
		die("no source line");
	printf("source: %s\n", line);
	check_test(line);
	peer_qpn = (unsigned int)strtoul(kv(line, "qpn"), NULL, 10);
	snprintf(path, sizeof(path), "%s", kv(line, "ip"));
	path[strcspn(path, " ")] = 0;
	connect_qp(qp, gidx, path, peer_qpn, 0);
	fprintf(out, "ready\n");
	fflush(out);

	for (;;) {
		unsigned long long off, l, seed;
		long at;

		/* The source ends with "done": end of file is a failure. */
		if (getline_fd(in, line, sizeof(line)))
			die("the source closed the exchange without \"done\"");
		if (!strcmp(line, "done"))
			break;
		if (sscanf(line, "check %llu %llu %llu", &off, &l, &seed) != 3 ||
		    off + l > len)
			die(line);
		at = mismatch(buf + off, l, seed);
		if (at >= 0) {
			fprintf(out, "bad %ld\n", at);
			fflush(out);
			printf("FAIL: %llu bytes at offset %llu differ at byte %ld\n",
			       l, off, at);
			return 1;
		}
		/* Nothing landed next to the WRITE (the buffer is zero there). */
		if ((off > 0 && buf[off - 1]) || (off + l < len && buf[off + l])) {
			fprintf(out, "bad neighbour\n");
			fflush(out);
			printf("FAIL: a byte next to the %llu bytes at offset %llu was written\n",
			       l, off);
			return 1;
		}
		memset(buf + off, 0, l);
		printf("ok: %llu bytes at offset %llu landed byte-exact\n", l, off);
		fprintf(out, "ok\n");
		fflush(out);
		checks++;
	}
	if (!checks)
		die("no WRITE checked");
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("PASS: %d WRITEs checked\n", checks);
	return 0;
}
