//! Model names and aliases: `[a-z0-9][a-z0-9._-]*`, so they are safe as path parts and in shells.

use crate::{RegistryError, Result};

pub fn validate_name(kind: &str, name: &str) -> Result<()> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || ".-_".contains(c));
    if first_ok && rest_ok && name.len() <= 128 {
        Ok(())
    } else {
        Err(RegistryError::Invalid(format!(
            "{kind} `{}`: must match [a-z0-9][a-z0-9._-]* (at most 128 characters)",
            runfn_core::error::shown(name)
        )))
    }
}

/// `NAME@ALIAS` or `NAME@VERSION`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelRef {
    Alias { name: String, alias: String },
    Version { name: String, version: i64 },
}

impl ModelRef {
    pub fn parse(text: &str) -> Result<ModelRef> {
        let Some((name, tail)) = text.split_once('@') else {
            return Err(RegistryError::Invalid(format!(
                "`{}`: expected NAME@ALIAS or NAME@VERSION (for example churn@prod)",
                runfn_core::error::shown(text)
            )));
        };
        validate_name("name", name)?;
        if let Ok(version) = tail.parse::<i64>() {
            if version < 1 {
                return Err(RegistryError::Invalid(format!(
                    "`{}`: versions start at 1",
                    runfn_core::error::shown(text)
                )));
            }
            return Ok(ModelRef::Version {
                name: name.into(),
                version,
            });
        }
        validate_name("alias", tail)?;
        Ok(ModelRef::Alias {
            name: name.into(),
            alias: tail.into(),
        })
    }

    /// True when `text` looks like a reference rather than a file path.
    pub fn looks_like(text: &str) -> bool {
        !text.contains('/') && ModelRef::parse(text).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(validate_name("name", "churn").is_ok());
        assert!(validate_name("name", "churn-v2.1_x").is_ok());
        for bad in ["", "Churn", "-x", "a/b", "..", "a b", "é"] {
            assert!(validate_name("name", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn references_parse() {
        assert_eq!(
            ModelRef::parse("churn@prod").unwrap(),
            ModelRef::Alias {
                name: "churn".into(),
                alias: "prod".into()
            }
        );
        assert_eq!(
            ModelRef::parse("churn@7").unwrap(),
            ModelRef::Version {
                name: "churn".into(),
                version: 7
            }
        );
        assert!(ModelRef::parse("churn").is_err());
        assert!(ModelRef::parse("churn@0").is_err());
        assert!(!ModelRef::looks_like("runs/a@b/model.safetensors"));
    }
}
