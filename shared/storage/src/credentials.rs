//! AWS profiles: `AWS_PROFILE` (else `default`) from the shared credentials file
//! (`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`) and the config file
//! (`AWS_CONFIG_FILE`, else `~/.aws/config`, where sections read `[profile NAME]`).
//! object_store reads the environment variables only; a profile fills what they leave out.

use std::path::PathBuf;

use ini::Ini;

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Profile {
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    pub region: Option<String>,
    pub endpoint_url: Option<String>,
}

/// The profile in use, merged from both files (the credentials file wins); an unreadable file
/// is an error naming it, a missing one is not.
pub fn profile() -> Result<Profile, String> {
    let name = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".to_string());
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let file = |var: &str, default: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(default)))
    };
    let mut profile = Profile::default();
    if let Some(path) = file("AWS_CONFIG_FILE", "config") {
        let section = if name == "default" {
            "default".to_string()
        } else {
            format!("profile {name}")
        };
        merge(&mut profile, &path, &section)?;
    }
    if let Some(path) = file("AWS_SHARED_CREDENTIALS_FILE", "credentials") {
        merge(&mut profile, &path, &name)?;
    }
    Ok(profile)
}

fn merge(profile: &mut Profile, path: &std::path::Path, section: &str) -> Result<(), String> {
    if !path.exists() {
        return Ok(());
    }
    let ini = Ini::load_from_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let Some(properties) = ini.section(Some(section)) else {
        return Ok(());
    };
    let set = |slot: &mut Option<String>, key: &str| {
        if let Some(value) = properties.get(key) {
            *slot = Some(value.trim().to_string());
        }
    };
    set(&mut profile.access_key_id, "aws_access_key_id");
    set(&mut profile.secret_access_key, "aws_secret_access_key");
    set(&mut profile.session_token, "aws_session_token");
    set(&mut profile.region, "region");
    set(&mut profile.endpoint_url, "endpoint_url");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_named_profile_from_both_files() {
        let dir = tempfile::tempdir().unwrap();
        let credentials = dir.path().join("credentials");
        let config = dir.path().join("config");
        std::fs::write(
            &credentials,
            "[default]\naws_access_key_id = AKDEFAULT\n\n[ci]\naws_access_key_id = AKCI\naws_secret_access_key = s3cr3t\n",
        )
        .unwrap();
        std::fs::write(
            &config,
            "[profile ci]\nregion = eu-west-1\nendpoint_url = http://127.0.0.1:9000\n",
        )
        .unwrap();
        let mut p = Profile::default();
        merge(&mut p, &config, "profile ci").unwrap();
        merge(&mut p, &credentials, "ci").unwrap();
        assert_eq!(p.access_key_id.as_deref(), Some("AKCI"));
        assert_eq!(p.secret_access_key.as_deref(), Some("s3cr3t"));
        assert_eq!(p.region.as_deref(), Some("eu-west-1"));
        assert_eq!(p.endpoint_url.as_deref(), Some("http://127.0.0.1:9000"));
        let mut missing = Profile::default();
        merge(&mut missing, &credentials, "nobody").unwrap();
        assert_eq!(missing, Profile::default());
    }
}
