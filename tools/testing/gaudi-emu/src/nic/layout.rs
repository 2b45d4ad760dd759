// SPDX-License-Identifier: GPL-2.0
//! Bit-packed hardware structures: QP contexts, WQEs, CQEs and EQEs are
//! arrays of little-endian 64-bit words whose fields are given as a lowest
//! bit and a width over the whole structure, as the public Gaudi2 headers
//! give them (bit 0 is bit 0 of word 0, bit 64 is bit 0 of word 1).

/// One field: `width` bits from bit `lsb` of the structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bits {
    pub name: &'static str,
    pub lsb: u32,
    pub width: u32,
}

impl Bits {
    pub const fn new(name: &'static str, lsb: u32, width: u32) -> Self {
        assert!(width >= 1 && width <= 64);
        Self { name, lsb, width }
    }

    /// The field's bits, in its own position (not shifted into place).
    pub const fn max(self) -> u64 {
        u64::MAX >> (64 - self.width)
    }

    /// Highest bit of the field.
    pub const fn msb(self) -> u32 {
        self.lsb + self.width - 1
    }

    /// The field's value in `words`. Bits beyond `words` read as 0.
    pub fn get(self, words: &[u64]) -> u64 {
        let (w, s) = ((self.lsb / 64) as usize, self.lsb % 64);
        let lo = words.get(w).copied().unwrap_or(0) as u128;
        let hi = words.get(w + 1).copied().unwrap_or(0) as u128;
        ((((hi << 64) | lo) >> s) as u64) & self.max()
    }

    /// Store `v` in the field; bits of `v` that do not fit are dropped,
    /// and so are bits beyond `words`.
    pub fn set(self, words: &mut [u64], v: u64) {
        let (w, s) = ((self.lsb / 64) as usize, self.lsb % 64);
        let mask = (self.max() as u128) << s;
        let val = ((v & self.max()) as u128) << s;
        for (i, part) in [(w, 0u32), (w + 1, 64)] {
            if let Some(word) = words.get_mut(i) {
                let m = (mask >> part) as u64;
                *word = (*word & !m) | ((val >> part) as u64 & m);
            }
        }
    }
}

/// A structure of `N` 64-bit words and the table of its fields.
pub trait Layout {
    /// Every field the model names, in bit order.
    const FIELDS: &'static [Bits];
    /// Size in bytes.
    const SIZE: usize;

    /// The field called `name`, which must be one of [`Self::FIELDS`].
    fn field(name: &str) -> Bits
    where
        Self: Sized,
    {
        field::<Self>(name).unwrap_or_else(|| panic!("no field {name}"))
    }
}

/// The field of `L` called `name`.
pub fn field<L: Layout>(name: &str) -> Option<Bits> {
    L::FIELDS.iter().copied().find(|f| f.name == name)
}

/// Structure bytes as little-endian words (`bytes.len()` a multiple of 8).
pub fn words(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Words as little-endian bytes.
pub fn bytes(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Fields of one table that overlap, or run past `size` bytes: the
/// table is wrong.
pub fn overlaps(fields: &[Bits], size: usize) -> Vec<String> {
    let mut out = Vec::new();
    for (i, a) in fields.iter().enumerate() {
        if a.msb() as usize >= size * 8 {
            out.push(format!("{} runs past {size} bytes", a.name));
        }
        for b in &fields[i + 1..] {
            if a.lsb <= b.msb() && b.lsb <= a.msb() {
                out.push(format!("{} and {} overlap", a.name, b.name));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_within_and_across_words() {
        let mut w = [0u64; 3];
        let a = Bits::new("a", 60, 8); // straddles words 0 and 1
        a.set(&mut w, 0xab);
        assert_eq!(w, [0xb << 60, 0xa, 0]);
        assert_eq!(a.get(&w), 0xab);
        let b = Bits::new("b", 64, 64);
        b.set(&mut w, u64::MAX);
        assert_eq!(a.get(&w), 0xfb);
        assert_eq!(w[1], u64::MAX);
        b.set(&mut w, 0);
        assert_eq!(w, [0xb << 60, 0, 0]);
        // A value wider than the field is cut to it, its neighbours kept.
        let c = Bits::new("c", 130, 3);
        w[2] = u64::MAX;
        c.set(&mut w, 0x1f0);
        assert_eq!(w[2], !(0x7 << (130 - 128)));
        assert_eq!(c.get(&w), 0);
    }

    #[test]
    fn overlapping_tables_are_found() {
        let t = [
            Bits::new("x", 0, 8),
            Bits::new("y", 7, 2),
            Bits::new("z", 60, 8),
        ];
        let p = overlaps(&t, 8);
        assert_eq!(p, ["x and y overlap", "z runs past 8 bytes"]);
    }
}
