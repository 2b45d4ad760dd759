// SPDX-License-Identifier: GPL-2.0
//! RoCEv2 on the wire: Ethernet / IPv4 or IPv6 / UDP 4791 / BTH [/ RETH]
//! [/ ImmDt] [/ AETH] / payload / ICRC, as the InfiniBand Architecture
//! Specification (Annex A17) and the kernel's rxe define them.

pub const ROCE_PORT: u16 = 4791;
pub const ETH_HLEN: usize = 14;
pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
const IP_HLEN: usize = 20;
const IP6_HLEN: usize = 40;
const UDP_HLEN: usize = 8;
const BTH_LEN: usize = 12;
const RETH_LEN: usize = 16;
const IMM_LEN: usize = 4;
const AETH_LEN: usize = 4;
const ICRC_LEN: usize = 4;
/// Offset of the BTH in a frame over IPv4.
pub const BTH_OFF: usize = ETH_HLEN + IP_HLEN + UDP_HLEN;
/// Offset of the BTH in a frame over IPv6.
pub const BTH_OFF6: usize = ETH_HLEN + IP6_HLEN + UDP_HLEN;
/// Hop limit (TTL) sent when the QP context says 0.
pub const DEFAULT_HOP_LIMIT: u8 = 64;

/// RC opcodes the device uses.
pub mod op {
    pub const WRITE_FIRST: u8 = 0x06;
    pub const WRITE_MIDDLE: u8 = 0x07;
    pub const WRITE_LAST: u8 = 0x08;
    pub const WRITE_LAST_IMM: u8 = 0x09;
    pub const WRITE_ONLY: u8 = 0x0a;
    pub const WRITE_ONLY_IMM: u8 = 0x0b;
    pub const ACK: u8 = 0x11;
}

/// AETH syndromes: bits 7:5 the kind (ACK, RNR NAK, NAK), 4:0 its value.
pub mod aeth {
    /// ACK with "unlimited" credits (no receive queues on this device).
    pub const ACK: u8 = 0x1f;
    /// RNR NAK: the low 5 bits are the timer the requester waits.
    pub const RNR_NAK: u8 = 0x20;
    pub const NAK_PSN_SEQ: u8 = 0x60;
    pub const NAK_INVALID_REQ: u8 = 0x61;
    pub const NAK_REMOTE_ACCESS: u8 = 0x62;
    /// The kind bits of a syndrome.
    pub const KIND_MASK: u8 = 0xe0;
    pub const KIND_NAK: u8 = 0x60;

    /// Whether the syndrome is a NAK of any kind (RNR included): it names
    /// the PSN that failed, so it acknowledges only the PSNs before it.
    pub fn is_nak(syndrome: u8) -> bool {
        matches!(syndrome & KIND_MASK, KIND_NAK | RNR_NAK)
    }
}

pub const PSN_MASK: u32 = 0xff_ffff;

/// A RoCEv2 GID: an IPv6 address, or an IPv4 address as the IPv4-mapped
/// IPv6 address `::ffff:a.b.c.d`, which travels as IPv4.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The GID of IPv4 address `a`.
    pub const fn v4(a: [u8; 4]) -> Self {
        Self([
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a[0], a[1], a[2], a[3],
        ])
    }

    /// The IPv4 address, if this is an IPv4-mapped GID.
    pub fn to_v4(&self) -> Option<[u8; 4]> {
        (self.0[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff])
            .then(|| self.0[12..].try_into().unwrap())
    }
}

/// `0.0.0.0`, as the GID of an unset IPv4 address.
impl Default for Gid {
    fn default() -> Self {
        Self::v4([0; 4])
    }
}

impl From<[u8; 4]> for Gid {
    fn from(a: [u8; 4]) -> Self {
        Self::v4(a)
    }
}

/// One end of a RoCEv2 conversation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Endpoint {
    pub mac: [u8; 6],
    pub ip: Gid,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Reth {
    pub va: u64,
    pub rkey: u32,
    pub len: u32,
}

/// A packet, decoded or to be encoded.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Packet<'a> {
    /// Source and destination: IPv4 when the destination is an IPv4 GID
    /// (the source then should be one too), IPv6 otherwise.
    pub src: Endpoint,
    pub dst: Endpoint,
    /// Traffic class (IPv4: DSCP and ECN), flow label (IPv6, 20 bits) and
    /// hop limit (IPv4: TTL; 0 sends [`DEFAULT_HOP_LIMIT`]).
    pub tclass: u8,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub sport: u16,
    pub opcode: u8,
    pub solicited: bool,
    pub dqpn: u32,
    pub ackreq: bool,
    pub psn: u32,
    pub reth: Option<Reth>,
    pub imm: Option<u32>,
    /// (syndrome, MSN)
    pub aeth: Option<(u8, u32)>,
    pub payload: &'a [u8],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Not IPv4 or IPv6 (no extension headers) / UDP to port 4791: not
    /// for this device.
    NotRoce,
    /// Truncated or inconsistent headers.
    Malformed,
    /// Wrong invariant CRC.
    Icrc,
    /// An opcode the device does not implement.
    Opcode(u8),
}

/// Header layout of an opcode: (has RETH, has ImmDt, has AETH).
fn layout(opcode: u8) -> Option<(bool, bool, bool)> {
    Some(match opcode {
        op::WRITE_FIRST | op::WRITE_ONLY => (true, false, false),
        op::WRITE_MIDDLE | op::WRITE_LAST => (false, false, false),
        op::WRITE_LAST_IMM => (false, true, false),
        op::WRITE_ONLY_IMM => (true, true, false),
        op::ACK => (false, false, true),
        _ => return None,
    })
}

/// CRC-32 (IEEE 802.3, reflected polynomial 0xedb88320) tables for
/// slicing by 8: `CRC_TABLES[0]` is the byte-at-a-time table, and
/// `CRC_TABLES[k][b]` is the CRC of byte `b` followed by `k` zero bytes.
/// The ICRC covers every byte of every frame twice (sent and received):
/// eight bytes a step make it a small part of the emulator's time.
static CRC_TABLES: [[u32; 256]; 8] = {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
};

/// The CRC-32 state `crc` after `data` (no pre- or post-inversion).
fn crc32_update(mut crc: u32, data: &[u8]) -> u32 {
    let t = &CRC_TABLES;
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let lo = crc ^ u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        let hi = u32::from_le_bytes([w[4], w[5], w[6], w[7]]);
        crc = t[7][(lo & 0xff) as usize]
            ^ t[6][((lo >> 8) & 0xff) as usize]
            ^ t[5][((lo >> 16) & 0xff) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][(hi & 0xff) as usize]
            ^ t[2][((hi >> 8) & 0xff) as usize]
            ^ t[1][((hi >> 16) & 0xff) as usize]
            ^ t[0][(hi >> 24) as usize];
    }
    for &b in words.remainder() {
        crc = t[0][((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// The invariant CRC of a frame (without its ICRC field) whose BTH is at
/// `bth` (IPv4 or IPv6 by its ethertype).
fn icrc(frame_wo_icrc: &[u8], bth: usize) -> u32 {
    // Masked copy of IP + UDP + BTH.
    let mut ps = [0u8; IP6_HLEN + UDP_HLEN + BTH_LEN];
    let ps = &mut ps[..bth + BTH_LEN - ETH_HLEN];
    ps.copy_from_slice(&frame_wo_icrc[ETH_HLEN..bth + BTH_LEN]);
    let udp = bth - ETH_HLEN - UDP_HLEN;
    if bth == BTH_OFF6 {
        ps[0] |= 0x0f; // traffic class, flow label
        ps[1..4].fill(0xff);
        ps[7] = 0xff; // hop limit
    } else {
        ps[1] = 0xff; // TOS (DSCP, ECN)
        ps[8] = 0xff; // TTL
        ps[10] = 0xff; // header checksum
        ps[11] = 0xff;
    }
    ps[udp + 6] = 0xff; // UDP checksum
    ps[udp + 7] = 0xff;
    ps[udp + UDP_HLEN + 4] = 0xff; // BTH resv8a
                                   // 0xdebb20e3: CRC state after eight 0xff bytes (the masked LRH).
    let crc = crc32_update(0xdebb_20e3, ps);
    !crc32_update(crc, &frame_wo_icrc[bth + BTH_LEN..])
}

/// Where the BTH of a frame with ethertype `f[12..14]` is.
fn bth_offset(f: &[u8]) -> usize {
    if f.len() >= ETH_HLEN && f[12..14] == ETHERTYPE_IPV6.to_be_bytes() {
        BTH_OFF6
    } else {
        BTH_OFF
    }
}

fn ip_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl Packet<'_> {
    /// Encode as an Ethernet frame with a valid ICRC.
    pub fn encode(&self, ip_id: u16) -> Vec<u8> {
        let (has_reth, has_imm, has_aeth) = layout(self.opcode).expect("encodable opcode");
        let pad = (4 - self.payload.len() % 4) % 4;
        let bth_and_rest = BTH_LEN
            + if has_reth { RETH_LEN } else { 0 }
            + if has_imm { IMM_LEN } else { 0 }
            + if has_aeth { AETH_LEN } else { 0 }
            + self.payload.len()
            + pad
            + ICRC_LEN;
        let udp_len = UDP_HLEN + bth_and_rest;
        let hop_limit = if self.hop_limit == 0 {
            DEFAULT_HOP_LIMIT
        } else {
            self.hop_limit
        };
        let v4 = self
            .dst
            .ip
            .to_v4()
            .map(|d| (self.src.ip.to_v4().unwrap_or([0; 4]), d));
        let ip_hlen = if v4.is_some() { IP_HLEN } else { IP6_HLEN };
        let mut f = Vec::with_capacity(ETH_HLEN + ip_hlen + udp_len);
        f.extend_from_slice(&self.dst.mac);
        f.extend_from_slice(&self.src.mac);
        let ip_start = f.len() + 2;
        if let Some((src, dst)) = v4 {
            let ip_len = IP_HLEN + udp_len;
            f.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
            f.extend_from_slice(&[0x45, self.tclass]);
            f.extend_from_slice(&(ip_len as u16).to_be_bytes());
            f.extend_from_slice(&ip_id.to_be_bytes());
            f.extend_from_slice(&0x4000u16.to_be_bytes()); // DF
            f.extend_from_slice(&[hop_limit, 17, 0, 0]);
            f.extend_from_slice(&src);
            f.extend_from_slice(&dst);
            let csum = ip_checksum(&f[ip_start..ip_start + IP_HLEN]);
            f[ip_start + 10..ip_start + 12].copy_from_slice(&csum.to_be_bytes());
        } else {
            f.extend_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
            let first = (6 << 28) | (u32::from(self.tclass) << 20) | (self.flow_label & 0xf_ffff);
            f.extend_from_slice(&first.to_be_bytes());
            f.extend_from_slice(&(udp_len as u16).to_be_bytes());
            f.extend_from_slice(&[17, hop_limit]);
            f.extend_from_slice(&self.src.ip.0);
            f.extend_from_slice(&self.dst.ip.0);
        }
        f.extend_from_slice(&self.sport.to_be_bytes());
        f.extend_from_slice(&ROCE_PORT.to_be_bytes());
        f.extend_from_slice(&(udp_len as u16).to_be_bytes());
        // UDP checksum 0: RoCEv2 leaves it to the ICRC, over IPv6 too (as rxe).
        f.extend_from_slice(&[0, 0]);
        // BTH
        f.push(self.opcode);
        f.push(u8::from(self.solicited) << 7 | (pad as u8) << 4); // tver 0
        f.extend_from_slice(&0xffffu16.to_be_bytes()); // default P_Key
        f.extend_from_slice(&(self.dqpn & 0xff_ffff).to_be_bytes());
        f.extend_from_slice(
            &((u32::from(self.ackreq) << 31) | (self.psn & PSN_MASK)).to_be_bytes(),
        );
        if has_reth {
            let r = self.reth.unwrap_or_default();
            f.extend_from_slice(&r.va.to_be_bytes());
            f.extend_from_slice(&r.rkey.to_be_bytes());
            f.extend_from_slice(&r.len.to_be_bytes());
        }
        if has_imm {
            f.extend_from_slice(&self.imm.unwrap_or(0).to_be_bytes());
        }
        if has_aeth {
            let (syn, msn) = self.aeth.unwrap_or((aeth::ACK, 0));
            f.extend_from_slice(&((u32::from(syn) << 24) | (msn & 0xff_ffff)).to_be_bytes());
        }
        f.extend_from_slice(self.payload);
        f.resize(f.len() + pad, 0);
        let c = icrc(&f, ETH_HLEN + ip_hlen + UDP_HLEN);
        f.extend_from_slice(&c.to_le_bytes());
        f
    }

    /// Decode and verify a frame. The UDP checksum is not checked (the
    /// ICRC covers what it would).
    pub fn decode(f: &[u8]) -> Result<Packet<'_>, ParseError> {
        if f.len() < ETH_HLEN {
            return Err(ParseError::NotRoce);
        }
        let ethertype = u16::from_be_bytes([f[12], f[13]]);
        let ip = &f[ETH_HLEN..];
        // (IP header length, IP packet length, source, destination, traffic
        // class, flow label, hop limit)
        let (ip_hlen, ip_len, src, dst, tclass, flow_label, hop_limit) = match ethertype {
            ETHERTYPE_IPV4 => {
                if ip.len() < IP_HLEN + UDP_HLEN || ip[0] != 0x45 || ip[9] != 17 {
                    return Err(ParseError::NotRoce);
                }
                (
                    IP_HLEN,
                    usize::from(u16::from_be_bytes([ip[2], ip[3]])),
                    Gid::v4(ip[12..16].try_into().unwrap()),
                    Gid::v4(ip[16..20].try_into().unwrap()),
                    ip[1],
                    0,
                    ip[8],
                )
            }
            ETHERTYPE_IPV6 => {
                if ip.len() < IP6_HLEN + UDP_HLEN || ip[0] >> 4 != 6 || ip[6] != 17 {
                    return Err(ParseError::NotRoce);
                }
                let first = u32::from_be_bytes(ip[0..4].try_into().unwrap());
                (
                    IP6_HLEN,
                    IP6_HLEN + usize::from(u16::from_be_bytes([ip[4], ip[5]])),
                    Gid(ip[8..24].try_into().unwrap()),
                    Gid(ip[24..40].try_into().unwrap()),
                    (first >> 20) as u8,
                    first & 0xf_ffff,
                    ip[7],
                )
            }
            _ => return Err(ParseError::NotRoce),
        };
        let udp = &ip[ip_hlen..];
        if u16::from_be_bytes([udp[2], udp[3]]) != ROCE_PORT {
            return Err(ParseError::NotRoce);
        }
        let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
        if ip_len > f.len() - ETH_HLEN
            || ip_len < ip_hlen
            || udp_len != ip_len - ip_hlen
            || udp_len < UDP_HLEN + BTH_LEN + ICRC_LEN
        {
            return Err(ParseError::Malformed);
        }
        // Ethernet may pad short frames: the IP length is authoritative.
        let f = &f[..ETH_HLEN + ip_len];
        let bth = ETH_HLEN + ip_hlen + UDP_HLEN;
        let end = f.len() - ICRC_LEN;
        let want = u32::from_le_bytes(f[end..].try_into().unwrap());
        if icrc(&f[..end], bth) != want {
            return Err(ParseError::Icrc);
        }
        let b = &f[bth..];
        let opcode = b[0];
        let (has_reth, has_imm, has_aeth) = layout(opcode).ok_or(ParseError::Opcode(opcode))?;
        let pad = usize::from((b[1] >> 4) & 3);
        let mut p = Packet {
            src: Endpoint {
                mac: f[6..12].try_into().unwrap(),
                ip: src,
            },
            dst: Endpoint {
                mac: f[0..6].try_into().unwrap(),
                ip: dst,
            },
            tclass,
            flow_label,
            hop_limit,
            sport: u16::from_be_bytes([udp[0], udp[1]]),
            opcode,
            solicited: b[1] & 0x80 != 0,
            dqpn: u32::from_be_bytes(b[4..8].try_into().unwrap()) & 0xff_ffff,
            ackreq: b[8] & 0x80 != 0,
            psn: u32::from_be_bytes(b[8..12].try_into().unwrap()) & PSN_MASK,
            ..Default::default()
        };
        let mut off = bth + BTH_LEN;
        let need = |n: usize, off: usize| {
            if off + n > end {
                Err(ParseError::Malformed)
            } else {
                Ok(())
            }
        };
        if has_reth {
            need(RETH_LEN, off)?;
            p.reth = Some(Reth {
                va: u64::from_be_bytes(f[off..off + 8].try_into().unwrap()),
                rkey: u32::from_be_bytes(f[off + 8..off + 12].try_into().unwrap()),
                len: u32::from_be_bytes(f[off + 12..off + 16].try_into().unwrap()),
            });
            off += RETH_LEN;
        }
        if has_imm {
            need(IMM_LEN, off)?;
            p.imm = Some(u32::from_be_bytes(f[off..off + 4].try_into().unwrap()));
            off += IMM_LEN;
        }
        if has_aeth {
            need(AETH_LEN, off)?;
            let v = u32::from_be_bytes(f[off..off + 4].try_into().unwrap());
            p.aeth = Some(((v >> 24) as u8, v & 0xff_ffff));
            off += AETH_LEN;
        }
        if off + pad > end {
            return Err(ParseError::Malformed);
        }
        p.payload = &f[off..end - pad];
        Ok(p)
    }
}

/// The destination address of `f` if it is IPv4 or IPv6 (without
/// extension headers) to UDP port 4791: a RoCEv2 frame for whoever has
/// that address (the rest is checked when it is decoded).
pub fn roce_destination(f: &[u8]) -> Option<Gid> {
    let ip = f.get(ETH_HLEN..)?;
    let (dst, udp) = match u16::from_be_bytes([*f.get(12)?, *f.get(13)?]) {
        ETHERTYPE_IPV4 if ip.first() == Some(&0x45) && ip.get(9) == Some(&17) => (
            Gid::v4(ip.get(16..20)?.try_into().unwrap()),
            ip.get(IP_HLEN..)?,
        ),
        ETHERTYPE_IPV6 if ip.first()? >> 4 == 6 && ip.get(6) == Some(&17) => (
            Gid(ip.get(24..40)?.try_into().unwrap()),
            ip.get(IP6_HLEN..)?,
        ),
        _ => return None,
    };
    (udp.get(2..4)? == ROCE_PORT.to_be_bytes()).then_some(dst)
}

/// Compute the ICRC of frame `f` again, in its last 4 bytes (a test's
/// frame whose headers it changed). Frames too short to have one are left.
pub fn reseal(f: &mut [u8]) {
    let bth = bth_offset(f);
    if f.len() < bth + BTH_LEN + ICRC_LEN {
        return;
    }
    let end = f.len() - ICRC_LEN;
    let c = icrc(&f[..end], bth);
    f[end..].copy_from_slice(&c.to_le_bytes());
}

/// If `f` is an ARP request for `me.ip` (an IPv4 GID), the reply to send.
pub fn arp_reply(f: &[u8], me: &Endpoint) -> Option<Vec<u8>> {
    let ip = me.ip.to_v4()?;
    // Ethernet + ARP for IPv4 over Ethernet: htype 1, ptype 0x0800, hlen 6,
    // plen 4, oper 1 (request).
    if f.len() < ETH_HLEN + 28
        || f[12..14] != [0x08, 0x06]
        || f[14..22] != [0, 1, 0x08, 0x00, 6, 4, 0, 1]
        || f[38..42] != ip
    {
        return None;
    }
    let (sha, spa) = (&f[22..28], &f[28..32]);
    let mut r = Vec::with_capacity(60);
    r.extend_from_slice(sha);
    r.extend_from_slice(&me.mac);
    r.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 2]);
    r.extend_from_slice(&me.mac);
    r.extend_from_slice(&ip);
    r.extend_from_slice(sha);
    r.extend_from_slice(spa);
    r.resize(60, 0);
    Some(r)
}

/// PSN arithmetic modulo 2^24: is `a` before `b` (within half the space)?
pub fn psn_lt(a: u32, b: u32) -> bool {
    let d = b.wrapping_sub(a) & PSN_MASK;
    d != 0 && d < (1 << 23)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(n: u8) -> Endpoint {
        Endpoint {
            mac: [0x02, 0, 0, 0, 0, n],
            ip: Gid::v4([10, 0, 0, n]),
        }
    }

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(!crc32_update(!0, b"123456789"), 0xcbf4_3926);
        // The ICRC seed is the state after eight 0xff bytes.
        assert_eq!(crc32_update(!0, &[0xff; 8]), 0xdebb_20e3);
    }

    /// Slicing by 8 gives what a byte at a time (the definition) gives, at
    /// every length and alignment of the 8-byte steps.
    #[test]
    fn crc32_by_eight_bytes_is_crc32_by_one() {
        let bytewise = |mut crc: u32, data: &[u8]| {
            for &b in data {
                for k in 0..8 {
                    let bit = (crc ^ (u32::from(b) >> k)) & 1;
                    crc = (crc >> 1) ^ if bit != 0 { 0xedb8_8320 } else { 0 };
                }
            }
            crc
        };
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let data: Vec<u8> = (0..4200)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for len in (0..64).chain([4095, 4096, 4097, 4200]) {
            for start in 0..3 {
                let d = &data[start..start + len.min(data.len() - start)];
                assert_eq!(
                    crc32_update(0x1234_5678, d),
                    bytewise(0x1234_5678, d),
                    "len {len}"
                );
            }
        }
    }

    #[test]
    fn write_only_imm_round_trips() {
        let payload = b"hello, rdma";
        let p = Packet {
            src: ep(1),
            dst: ep(2),
            sport: 0xc123,
            opcode: op::WRITE_ONLY_IMM,
            dqpn: 0x12_3456,
            ackreq: true,
            psn: 0xab_cdef,
            reth: Some(Reth {
                va: 0x1122_3344_5566_7788,
                rkey: 0xdead_beef,
                len: payload.len() as u32,
            }),
            imm: Some(0x0102_0304),
            payload,
            hop_limit: 64,
            ..Default::default()
        };
        let f = p.encode(7);
        assert_eq!(
            f.len() % 4,
            2,
            "14-byte Ethernet header plus 4-byte aligned rest"
        );
        assert_eq!(Packet::decode(&f), Ok(p));
    }

    fn ep6(n: u8) -> Endpoint {
        let mut gid = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, n];
        gid[1] = 0x9a;
        Endpoint {
            mac: [0x02, 0, 0, 0, 0, n],
            ip: Gid(gid),
        }
    }

    #[test]
    fn ipv6_write_round_trips_with_its_grh_fields() {
        let payload = [0x5au8; 37];
        let p = Packet {
            src: ep6(1),
            dst: ep6(2),
            tclass: 0xb8,
            flow_label: 0xa_bcde,
            hop_limit: 3,
            sport: 0xc777,
            opcode: op::WRITE_ONLY,
            dqpn: 17,
            ackreq: true,
            psn: 5,
            reth: Some(Reth {
                va: 0x1000,
                rkey: 9,
                len: payload.len() as u32,
            }),
            payload: &payload,
            ..Default::default()
        };
        let f = p.encode(1);
        assert_eq!(&f[12..14], &[0x86, 0xdd]);
        assert_eq!(f[ETH_HLEN] >> 4, 6, "IPv6");
        assert_eq!(f[ETH_HLEN + 6], 17, "next header UDP");
        assert_eq!(
            usize::from(u16::from_be_bytes([f[ETH_HLEN + 4], f[ETH_HLEN + 5]])),
            f.len() - ETH_HLEN - IP6_HLEN,
            "payload length"
        );
        assert_eq!(&f[BTH_OFF6 - 6..BTH_OFF6 - 4], &ROCE_PORT.to_be_bytes());
        assert_eq!(Packet::decode(&f), Ok(p));
        // An IPv4 GID at one end only: the destination decides.
        let q = Packet {
            src: ep6(1),
            dst: ep(2),
            opcode: op::ACK,
            aeth: Some((aeth::ACK, 1)),
            ..Default::default()
        };
        assert_eq!(&q.encode(1)[12..14], &[0x08, 0x00]);
    }

    #[test]
    fn ipv6_icrc_masks_class_flow_label_hop_limit_and_udp_checksum() {
        let p = Packet {
            src: ep6(1),
            dst: ep6(2),
            opcode: op::WRITE_ONLY,
            reth: Some(Reth::default()),
            payload: &[1, 2, 3, 4, 5],
            ..Default::default()
        };
        let f = p.encode(1);
        let ip = ETH_HLEN;
        // Traffic class, flow label, hop limit and the UDP checksum may
        // change in flight.
        for i in [
            ip,
            ip + 1,
            ip + 2,
            ip + 3,
            ip + 7,
            BTH_OFF6 - 2,
            BTH_OFF6 - 1,
        ] {
            let mut g = f.clone();
            g[i] ^= if i == ip { 0x0f } else { 0xa5 };
            assert!(Packet::decode(&g).is_ok(), "byte {i}");
        }
        // The addresses, the UDP source port and everything from the BTH on
        // but resv8a are covered (what decoding checks first, the lengths,
        // next header and destination port, fail before the ICRC).
        for i in (ip + 8..ip + IP6_HLEN + 2).chain(BTH_OFF6..f.len()) {
            if i == BTH_OFF6 + 4 {
                continue;
            }
            let mut g = f.clone();
            g[i] ^= 0x10;
            assert_eq!(Packet::decode(&g), Err(ParseError::Icrc), "byte {i}");
        }
        let mut g = f.clone();
        g[ip] = 0x4f; // version 4 in an IPv6 frame
        assert_eq!(Packet::decode(&g), Err(ParseError::NotRoce));
        let mut g = f.clone();
        g[ip + 6] = 0; // hop-by-hop options: not for this device
        assert_eq!(Packet::decode(&g), Err(ParseError::NotRoce));
        let mut g = f.clone();
        reseal(&mut g);
        assert_eq!(g, f, "reseal finds the IPv6 BTH");
    }

    #[test]
    fn ipv4_gids_are_the_mapped_addresses() {
        let g = Gid::v4([192, 0, 2, 7]);
        assert_eq!(g.0[10..], [0xff, 0xff, 192, 0, 2, 7]);
        assert_eq!(g.to_v4(), Some([192, 0, 2, 7]));
        assert_eq!(ep6(1).ip.to_v4(), None);
        assert_eq!(Gid::default(), Gid::v4([0; 4]));
    }

    #[test]
    fn corrupted_frames_fail_the_icrc() {
        let p = Packet {
            src: ep(1),
            dst: ep(2),
            opcode: op::WRITE_ONLY,
            reth: Some(Reth::default()),
            payload: &[1, 2, 3, 4, 5],
            ..Default::default()
        };
        let f = p.encode(1);
        for i in BTH_OFF..f.len() {
            if i == BTH_OFF + 4 {
                continue; // resv8a is excluded from the ICRC
            }
            let mut g = f.clone();
            g[i] ^= 0x10;
            assert_eq!(Packet::decode(&g), Err(ParseError::Icrc), "byte {i}");
        }
        // Fields outside the invariant part may change in flight.
        let mut g = f.clone();
        g[ETH_HLEN + 8] = 3; // TTL
        g[ETH_HLEN + 1] = 0x03; // ECN
        assert!(Packet::decode(&g).is_ok());
    }

    #[test]
    fn truncated_and_foreign_frames_are_refused() {
        let p = Packet {
            opcode: op::ACK,
            aeth: Some((aeth::NAK_PSN_SEQ, 5)),
            ..Default::default()
        };
        let f = p.encode(1);
        assert_eq!(
            Packet::decode(&f).unwrap().aeth,
            Some((aeth::NAK_PSN_SEQ, 5))
        );
        for n in 0..f.len() {
            assert!(Packet::decode(&f[..n]).is_err(), "length {n}");
        }
        let mut g = f.clone();
        g[12] = 0x86; // IPv6 ethertype
        assert_eq!(Packet::decode(&g), Err(ParseError::NotRoce));
    }

    #[test]
    fn any_bytes_decode_without_panic() {
        let p = Packet {
            src: ep(1),
            dst: ep(2),
            opcode: op::WRITE_ONLY_IMM,
            reth: Some(Reth::default()),
            imm: Some(1),
            payload: &[7; 33],
            ..Default::default()
        };
        let f = p.encode(1);
        // IP total lengths shorter than the IP header itself.
        for ip_len in 0..20u16 {
            let mut g = f.clone();
            g[ETH_HLEN + 2..ETH_HLEN + 4].copy_from_slice(&ip_len.to_be_bytes());
            assert_eq!(Packet::decode(&g), Err(ParseError::Malformed));
        }
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let mut g = f.clone();
            for _ in 0..1 + next() % 4 {
                let i = (next() % g.len() as u64) as usize;
                g[i] = next() as u8;
            }
            if next() % 2 == 0 {
                reseal(&mut g);
            }
            g.truncate((next() % (g.len() as u64 + 1)) as usize);
            let _ = Packet::decode(&g);
            let _ = arp_reply(&g, &ep(2));
        }
        // A frame whose headers changed is valid again once resealed.
        let mut g = f.clone();
        g[BTH_OFF + 8] ^= 1;
        assert_eq!(Packet::decode(&g), Err(ParseError::Icrc));
        reseal(&mut g);
        assert!(Packet::decode(&g).is_ok());
    }

    #[test]
    fn answers_arp_for_its_address_only() {
        let me = ep(2);
        let mut req = vec![0xff; 6];
        req.extend_from_slice(&ep(1).mac);
        req.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 1]);
        req.extend_from_slice(&ep(1).mac);
        req.extend_from_slice(&[10, 0, 0, 1]);
        req.extend_from_slice(&[0; 6]);
        req.extend_from_slice(&[10, 0, 0, 2]);
        let r = arp_reply(&req, &me).unwrap();
        assert_eq!(&r[0..6], &ep(1).mac);
        assert_eq!(&r[20..22], &[0, 2], "reply");
        assert_eq!(&r[22..28], &me.mac);
        assert_eq!(&r[28..32], &[10, 0, 0, 2]);
        assert_eq!(&r[38..42], &[10, 0, 0, 1]);
        assert!(arp_reply(&req, &ep(3)).is_none());
        assert!(arp_reply(&req[..40], &me).is_none());
    }

    #[test]
    fn nak_kinds() {
        assert!(aeth::is_nak(aeth::NAK_REMOTE_ACCESS) && aeth::is_nak(aeth::RNR_NAK));
        assert!(!aeth::is_nak(aeth::ACK));
    }

    #[test]
    fn psn_comparison_wraps() {
        assert!(psn_lt(PSN_MASK, 0));
        assert!(psn_lt(5, 6));
        assert!(!psn_lt(6, 5));
        assert!(!psn_lt(5, 5));
    }
}
