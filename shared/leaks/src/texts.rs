//! A text column's values for the near-duplicate check, one after another in one buffer:
//! a `String` a row cost its text plus 40 bytes and an allocation.

/// One file's texts of one column.
#[derive(Debug, Default)]
pub struct Texts {
    text: String,
    /// (split, id, end of the text in `text`).
    entries: Vec<(u16, u64, u64)>,
}

impl Texts {
    pub fn add(&mut self, split: u16, id: u64, value: &str) {
        self.text.push_str(value);
        self.entries.push((split, id, self.text.len() as u64));
    }

    /// Every (split, id, text), in the order added.
    pub fn iter(&self) -> impl Iterator<Item = (u16, u64, &str)> {
        let mut start = 0;
        self.entries.iter().map(move |&(split, id, end)| {
            let text = &self.text[start as usize..end as usize];
            start = end;
            (split, id, text)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_come_back_as_added() {
        let mut texts = Texts::default();
        texts.add(1, 7, "late parcel");
        texts.add(0, 9, "");
        texts.add(1, 10, "é");
        let all: Vec<(u16, u64, &str)> = texts.iter().collect();
        assert_eq!(all, [(1, 7, "late parcel"), (0, 9, ""), (1, 10, "é")]);
    }
}
