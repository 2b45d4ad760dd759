// SPDX-License-Identifier: GPL-2.0
//! Test hooks that make the device misbehave toward the driver (the
//! control interface's `fuzz-nic`): entries no NIC produces, written on a
//! port's queues as the NIC writes entries. None of it is device behaviour
//! of the model; it lets a guest test check that the driver drops what no
//! device may produce, and survives it.
//!
//! Everything is drawn from a seeded generator, so a seed names one
//! injection.

use super::*;

/// xorshift64*, seeded through splitmix64 (so that 0 and small seeds give
/// unrelated sequences).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Self((z ^ (z >> 31)) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// A number below `n` (0 if `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    pub fn coin(&mut self) -> bool {
        self.next_u64() >> 63 != 0
    }

    pub fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }

    pub fn fill(&mut self, b: &mut [u8]) {
        b.iter_mut().for_each(|x| *x = self.next_u64() as u8);
    }
}

/// Counts per kind of what was injected, in a fixed order.
#[derive(Clone, Debug)]
pub struct Tally {
    names: &'static [&'static str],
    counts: Vec<u32>,
}

impl Tally {
    pub(crate) fn new(names: &'static [&'static str]) -> Self {
        Self {
            names,
            counts: vec![0; names.len()],
        }
    }

    pub(crate) fn add(&mut self, kind: usize) {
        self.counts[kind] += 1;
    }

    pub fn get(&self, name: &str) -> u32 {
        self.names
            .iter()
            .position(|n| *n == name)
            .map_or(0, |i| self.counts[i])
    }

    pub fn total(&self) -> u32 {
        self.counts.iter().sum()
    }
}

impl std::fmt::Display for Tally {
    /// "kind count kind count ...", every kind, zeros included.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut sep = "";
        for (n, c) in self.names.iter().zip(&self.counts) {
            write!(f, "{sep}{n} {c}")?;
            sep = " ";
        }
        Ok(())
    }
}

/// What `fuzz-nic` injects on a port's queues, each something no NIC
/// produces for a driver that set the port up as the model says: an EQE
/// of a type the model lacks; RAW_TX_COMP of a WQE index beyond any send
/// WQ (bit 31 set); COMP of a CQ number no port has (16 and up); QP_ERR of
/// a QPN beyond hbl_cn's (8192 and up); DB_FIFO_OVERRUN of a FIFO no port
/// has (32 and up); a CQE on CQ 0 (the raw receive ring) naming an element
/// other than its producer index's, a length outside 14 to 9018 bytes, or
/// a QP other than 0; a CQE on CQ 1 (the RDMA requesters' CQ, injected only
/// where the driver set it up) of a QP beyond hbl_cn's, a responder's (the
/// driver's QPs complete no receives), or of a QP below 8192 with a random
/// tag (no request outstanding while the caller fuzzes).
pub const NIC_KINDS: [&str; 7] = [
    "eqe_unknown",
    "eqe_tx_comp",
    "eqe_comp",
    "eqe_qp_err",
    "eqe_fifo",
    "cqe_bad",
    "cqe_rc_bad",
];

impl Device {
    /// `fuzz-nic PORT N SEED`: inject `n` entries of [`NIC_KINDS`] on
    /// the NIC's queues of `port`, as the NIC writes entries (producer
    /// indexes, write-backs, interrupts). Reply: "fuzz-nic port P injected
    /// I not_injected S" and the count of each kind; an entry the queue
    /// had no room for is not injected.
    pub fn fuzz_nic(&mut self, port: usize, n: u32, seed: u64) -> Result<String, String> {
        use crate::nic::formats::*;
        use crate::nic::Event;
        if port >= self.ports.len() {
            return Err(format!("no port {port}"));
        }
        let mut rng = Rng::new(seed);
        let mut t = Tally::new(&NIC_KINDS);
        let mut skipped = 0;
        for _ in 0..n {
            let kind = rng.below(NIC_KINDS.len() as u64) as usize;
            let (nic, mut bus) = self.nic_bus();
            let ev = |ty, data1, data2| Event { ty, data1, data2 };
            let took = match kind {
                0 => nic.inject_event(
                    port,
                    ev(8 + rng.below(8), rng.next_u32(), rng.next_u32()),
                    &mut bus,
                ),
                1 => nic.inject_event(
                    port,
                    ev(EQE_RAW_TX_COMP, 0, rng.next_u32() | 1 << 31),
                    &mut bus,
                ),
                2 => nic.inject_event(
                    port,
                    ev(EQE_COMP, 16 + rng.below(0xfff0) as u32, rng.next_u32()),
                    &mut bus,
                ),
                3 => nic.inject_event(
                    port,
                    ev(
                        EQE_QP_ERR,
                        8192 + rng.below((1 << 24) - 8192) as u32,
                        u32::from(rng.next_u32() as u8),
                    ),
                    &mut bus,
                ),
                4 => nic.inject_event(
                    port,
                    ev(EQE_DB_FIFO_OVERRUN, 32 + rng.below(0xffe0) as u32, 0),
                    &mut bus,
                ),
                6 => {
                    let (qpn, requester) = match rng.below(3) {
                        0 => (8192 + rng.below((1 << 24) - 8192) as u32, true),
                        1 => (1 + rng.below(8191) as u32, false),
                        _ => (1 + rng.below(8191) as u32, true),
                    };
                    let w = crate::nic::queues::cqe(
                        qpn,
                        requester,
                        rng.next_u32() & 0xff,
                        rng.next_u32(),
                    );
                    nic.inject_cqe(port, 1, w, &mut bus)
                }
                _ => {
                    let (pi, elems) = nic.raw_ring(port);
                    let mut elem = pi % elems;
                    let mut len = 64 + rng.below(1400) as u32;
                    let mut qpn = 0;
                    match rng.below(3) {
                        0 if elems > 1 => {
                            elem = (pi + 1 + rng.below(u64::from(elems - 1)) as u32) % elems
                        }
                        1 => {
                            len = if rng.coin() {
                                rng.below(14) as u32
                            } else {
                                9019 + rng.below(1 << 20) as u32
                            }
                        }
                        _ => qpn = 1 + rng.below((1 << 24) - 1) as u32,
                    }
                    let mut w = crate::nic::queues::cqe(qpn, false, elem, 0);
                    <Cqe as crate::nic::layout::Layout>::field("RAW_PKT_SIZE")
                        .set(&mut w, len.into());
                    nic.inject_cqe(port, 0, w, &mut bus)
                }
            };
            if took {
                t.add(kind);
            } else {
                skipped += 1;
            }
        }
        self.nic_irqs();
        Ok(format!(
            "fuzz-nic port {port} injected {} not_injected {skipped} {t}",
            t.total()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_is_deterministic_and_seeds_differ() {
        let a: Vec<u64> = (0..4).map(|_| Rng::new(1).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        let mut x = Rng::new(0);
        let mut y = Rng::new(1);
        assert_ne!(x.next_u64(), y.next_u64());
        assert!((0..1000).all(|_| x.below(7) < 7));
        assert_eq!(x.below(0), 0);
    }
}
