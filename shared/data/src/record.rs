//! A record of fixed size, as the sorters spill it and parts leave it in their runs.

/// A record written as fixed-size little-endian bytes.
pub trait Record: Ord + Send + Sized + 'static {
    const BYTES: usize;
    fn write_to(&self, out: &mut Vec<u8>);
    fn read_from(bytes: &[u8]) -> Self;
}

/// Little-endian field readers for `Record::read_from`.
pub fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

pub fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

pub fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(bytes[at..at + 2].try_into().expect("2 bytes"))
}
