//! "Did you mean" for misspelt names.

/// The closest of `known` to `name`, when it is close enough to be a likely typo: at most one edit
/// (a swap of neighbours counts as one) per three characters.
pub fn closest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    let allowed = (name.chars().count() / 3).max(1);
    known
        .iter()
        .map(|candidate| (strsim::damerau_levenshtein(name, candidate), *candidate))
        .filter(|(distance, _)| *distance <= allowed)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// `" (did you mean `x`?)"` or nothing.
pub fn hint(name: &str, known: &[&str]) -> String {
    closest(name, known)
        .map(|c| format!(" (did you mean `{c}`?)"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_near_names_only() {
        let known = ["seed", "config", "eval", "data"];
        assert_eq!(closest("sead", &known), Some("seed"));
        assert_eq!(closest("confg", &known), Some("config"));
        assert_eq!(closest("banana", &known), None);
    }
}
