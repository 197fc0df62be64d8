//! CRuby's map from an instruction's position to its line-table entry:
//! a succinct bit-vector (iseq.c, `VM_INSN_INFO_TABLE_IMPL == 2`) with a
//! bit set at each position where an entry starts; the entry of position
//! `x` is the rank of `x` (the bits set up to it), less one.
//!
//! Its first `IMMEDIATE` positions keep their ranks outright, 9 ranks of 7
//! bits per word; past them, blocks of 512 bits each carry the rank before
//! the block, the ranks before each of its 64-bit words (7 of 9 bits; the
//! first is 0), and the words.

use std::io;

use crate::interp::memory::{Memory, u32_at, u64_at};

/// Positions whose ranks are kept outright.
pub const IMMEDIATE: u32 = 54;
/// Ranks per word of the immediate part, and their width in bits.
const IMM_PER_WORD: u32 = 9;
const IMM_BITS: u32 = 7;
/// Bits per block, and the bytes of one: `rank` (u32, padded),
/// `small_block_ranks` (u64), `bits[8]`.
const BLOCK_BITS: u32 = 512;
pub const BLOCK_BYTES: u64 = 80;
const BLOCK_RANKS: usize = 8;
const BLOCK_WORDS: usize = 16;
const SMALL_RANK_BITS: u32 = 9;
/// Bytes of the immediate part.
pub const IMM_BYTES: u64 = (IMMEDIATE / IMM_PER_WORD) as u64 * 8;

/// The rank of position `x` in the table at `table`: the line-table
/// entries that start at or before it.
pub fn rank(mem: &dyn Memory, table: u64, x: u32) -> io::Result<u32> {
    if x < IMMEDIATE {
        let word = mem.read_u64(table + u64::from(x / IMM_PER_WORD) * 8)?;
        return Ok(imm_rank(word, x % IMM_PER_WORD));
    }
    let block = (x - IMMEDIATE) / BLOCK_BITS;
    let bytes = mem.read_vec(
        table + IMM_BYTES + u64::from(block) * BLOCK_BYTES,
        BLOCK_BYTES as usize,
    )?;
    block_rank(&bytes, (x - IMMEDIATE) % BLOCK_BITS)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "short succ_index block"))
}

/// The `i`-th rank of an immediate word.
fn imm_rank(word: u64, i: u32) -> u32 {
    ((word >> (i * IMM_BITS)) & ((1 << IMM_BITS) - 1)) as u32
}

/// The rank of bit `bit` of a block (its bytes as read).
fn block_rank(b: &[u8], bit: u32) -> Option<u32> {
    let rank = u32_at(b, 0)?;
    let small = u64_at(b, BLOCK_RANKS)?;
    let word = (bit / 64) as usize;
    let before = match word {
        0 => 0,
        w => ((small >> ((w as u32 - 1) * SMALL_RANK_BITS)) & ((1 << SMALL_RANK_BITS) - 1)) as u32,
    };
    let bits = u64_at(b, BLOCK_WORDS + word * 8)?;
    let upto = (bits << (63 - bit % 64)).count_ones();
    Some(rank + before + upto)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::memory::FakeMemory;

    /// A table as CRuby lays it out, built from the positions where
    /// entries start (sorted), by the definition: each rank counts the
    /// positions at or before it.
    fn table(starts: &[u32], max_pos: u32) -> Vec<u8> {
        let count = |x: u32| starts.iter().filter(|&&p| p <= x).count() as u64;
        let imm_words = if max_pos < IMMEDIATE {
            max_pos + 8
        } else {
            IMMEDIATE
        } / IMM_PER_WORD;
        let blocks = if max_pos < IMMEDIATE {
            0
        } else {
            max_pos - IMMEDIATE + 511
        } / BLOCK_BITS;
        let mut out = Vec::new();
        for w in 0..imm_words {
            let mut word = 0u64;
            for i in 0..IMM_PER_WORD {
                word |= count(w * IMM_PER_WORD + i) << (i * IMM_BITS);
            }
            out.extend(word.to_le_bytes());
        }
        out.resize(IMM_BYTES as usize, 0);
        for k in 0..blocks {
            let first = IMMEDIATE + k * BLOCK_BITS;
            let rank = starts.iter().filter(|&&p| p < first).count() as u32;
            let mut words = [0u64; 8];
            for &p in starts
                .iter()
                .filter(|&&p| p >= first && p < first + BLOCK_BITS)
            {
                let b = p - first;
                words[(b / 64) as usize] |= 1 << (b % 64);
            }
            let mut small = 0u64;
            let mut acc = 0u64;
            for (j, w) in words.iter().enumerate() {
                if j > 0 {
                    small |= acc << ((j as u32 - 1) * SMALL_RANK_BITS);
                }
                acc += u64::from(w.count_ones());
            }
            out.extend(rank.to_le_bytes());
            out.extend([0u8; 4]);
            out.extend(small.to_le_bytes());
            for w in words {
                out.extend(w.to_le_bytes());
            }
        }
        out
    }

    #[test]
    fn each_positions_rank_counts_the_entries_started_at_or_before_it() {
        // Entries every few positions, across the immediate part, a word
        // boundary and two blocks.
        let starts: Vec<u32> = (0..1200).filter(|p| p % 7 == 0 || p % 61 == 3).collect();
        let max_pos = 1199;
        let mem = FakeMemory {
            blocks: vec![(0x1000, table(&starts, max_pos))],
        };
        for x in 0..=max_pos {
            let want = starts.iter().filter(|&&p| p <= x).count() as u32;
            assert_eq!(rank(&mem, 0x1000, x).unwrap(), want, "position {x}");
        }
        // Past the table: an error, not a guess.
        assert!(rank(&mem, 0x1000, max_pos + 2000).is_err());
    }

    #[test]
    fn a_short_table_is_all_immediate() {
        let starts = [0, 2, 8];
        let mem = FakeMemory {
            blocks: vec![(0x1000, table(&starts, 8))],
        };
        let ranks: Vec<u32> = (0..9).map(|x| rank(&mem, 0x1000, x).unwrap()).collect();
        assert_eq!(ranks, [1, 1, 2, 2, 2, 2, 2, 2, 3]);
    }
}
