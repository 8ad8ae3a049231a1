//! Lowercase hex for sketch registers: a dense byte array stays one short JSON string
//! instead of thousands of numbers, without adding an encoding crate.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HexError {
    #[error("hex text has odd length {0}")]
    OddLength(usize),
    #[error("byte {index} of the hex text is not a hex digit")]
    NotHex { index: usize },
}

const DIGITS: &[u8; 16] = b"0123456789abcdef";

pub(crate) fn encode(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    text
}

pub(crate) fn decode(text: &str) -> Result<Vec<u8>, HexError> {
    let raw = text.as_bytes();
    if !raw.len().is_multiple_of(2) {
        return Err(HexError::OddLength(raw.len()));
    }
    let nibble = |index: usize| -> Result<u8, HexError> {
        match raw[index] {
            c @ b'0'..=b'9' => Ok(c - b'0'),
            c @ b'a'..=b'f' => Ok(c - b'a' + 10),
            c @ b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(HexError::NotHex { index }),
        }
    };
    (0..raw.len() / 2)
        .map(|i| Ok(nibble(2 * i)? << 4 | nibble(2 * i + 1)?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn encodes_lowercase_pairs() {
        assert_eq!(encode(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(decode("000FA5ff"), Ok(vec![0x00, 0x0f, 0xa5, 0xff]));
    }

    #[test]
    fn rejects_odd_length_and_non_hex() {
        assert_eq!(decode("abc"), Err(HexError::OddLength(3)));
        assert_eq!(decode("0g"), Err(HexError::NotHex { index: 1 }));
    }

    proptest! {
        #[test]
        fn round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            prop_assert_eq!(decode(&encode(&bytes)), Ok(bytes));
        }
    }
}
