//! A place in an object store: `scheme://bucket/key`, with the client that reaches it. Clients
//! are built once per bucket from the environment (and, for S3, the AWS profile files).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};

use crate::credentials;
use crate::error::{StorageError, note_secret};

const SCHEMES: &[&str] = &["s3", "gs", "az", "abfs", "abfss"];

/// Whether `text` names an object store (`s3://`, `gs://`, `az://`, `abfs[s]://`) rather than a
/// local path.
pub fn is_remote(text: &str) -> bool {
    text.split_once("://")
        .is_some_and(|(scheme, _)| SCHEMES.contains(&scheme))
}

#[derive(Clone)]
pub struct Remote {
    scheme: String,
    bucket: String,
    /// The key (or prefix) inside the bucket, without leading or trailing `/`.
    key: String,
    /// Where requests go, for messages: the endpoint override or the store's default.
    endpoint: String,
    pub(crate) store: Arc<dyn ObjectStore>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Remote({})", self.url())
    }
}

type Clients = HashMap<(String, String), (Arc<dyn ObjectStore>, String)>;
static CLIENTS: Mutex<Option<Clients>> = Mutex::new(None);

impl Remote {
    /// Parses `scheme://bucket[/key]` and finds (or builds) the bucket's client. Building reads
    /// credentials but sends nothing; a refusal shows at the first request.
    pub fn parse(text: &str) -> Result<Remote, StorageError> {
        let (scheme, rest) = text
            .split_once("://")
            .filter(|(scheme, _)| SCHEMES.contains(scheme))
            .ok_or_else(|| {
                StorageError::new(text, "is not an object-store URL (s3://, gs://, az://)")
            })?;
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(StorageError::new(text, "names no bucket"));
        }
        let key = key.trim_matches('/');
        if key.split('/').any(|part| part == "." || part == "..") {
            return Err(StorageError::new(text, "has a `.` or `..` in its key"));
        }
        // The key is the object's name as written, `%`, spaces and non-ASCII included (as
        // boto3 and the aws CLI take it); only control characters and empty segments are not keys.
        object_store::path::Path::parse(key).map_err(|err| {
            StorageError::new(text, format!("is not an object key: {}", key_problem(&err)))
        })?;
        let (store, endpoint) = client(scheme, bucket).map_err(|m| StorageError::new(text, m))?;
        Ok(Remote {
            scheme: scheme.to_string(),
            bucket: bucket.to_string(),
            key: key.to_string(),
            endpoint,
            store,
        })
    }

    pub fn url(&self) -> String {
        if self.key.is_empty() {
            format!("{}://{}", self.scheme, self.bucket)
        } else {
            format!("{}://{}/{}", self.scheme, self.bucket, self.key)
        }
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// The place `relative` (a `/`-separated path) below this one.
    pub fn join(&self, relative: &str) -> Remote {
        let relative = relative.trim_matches('/');
        let key = match (self.key.is_empty(), relative.is_empty()) {
            (_, true) => self.key.clone(),
            (true, false) => relative.to_string(),
            (false, false) => format!("{}/{relative}", self.key),
        };
        Remote {
            key,
            ..self.clone()
        }
    }

    /// The last segment of the key (a file name), or the bucket's name.
    pub fn name(&self) -> &str {
        self.key
            .rsplit('/')
            .next()
            .filter(|n| !n.is_empty())
            .unwrap_or(&self.bucket)
    }

    /// The key as object_store names it. `Path::from` would percent-encode `%` and every
    /// non-ASCII byte (`a%b` became the key `a%25b`, `é` became `%C3%A9`): another object than
    /// the one the URL names. `parse` keeps the key as it is; the HTTP client encodes it for the
    /// request, once. Keys come from a parsed URL or from the store's own listing, so parse only
    /// fails on a key the store itself returned with a control character; that one is encoded.
    pub(crate) fn path(&self) -> object_store::path::Path {
        object_store::path::Path::parse(&self.key)
            .unwrap_or_else(|_| object_store::path::Path::from(self.key.as_str()))
    }

    pub(crate) fn error(&self, error: object_store::Error) -> StorageError {
        StorageError::from_store(&self.url(), &self.bucket, &self.endpoint, error)
    }
}

/// What is wrong with a key, in words (object_store's message names its own types).
fn key_problem(err: &object_store::path::Error) -> String {
    match err {
        object_store::path::Error::EmptySegment { .. } => "it has an empty segment (`//`)".into(),
        object_store::path::Error::BadSegment { .. } => {
            "it holds a control character (a tab, a newline, ...)".into()
        }
        other => other.to_string(),
    }
}

fn client(scheme: &str, bucket: &str) -> Result<(Arc<dyn ObjectStore>, String), String> {
    let mut clients = CLIENTS.lock().unwrap_or_else(|e| e.into_inner());
    let clients = clients.get_or_insert_with(HashMap::new);
    let slot = (scheme.to_string(), bucket.to_string());
    if let Some(found) = clients.get(&slot) {
        return Ok(found.clone());
    }
    let built = build(scheme, bucket)?;
    clients.insert(slot, built.clone());
    Ok(built)
}

/// Timeouts and retries: a request that stalls for `RUNFN_STORE_TIMEOUT_S` (60) fails, and
/// retries stop after `RUNFN_STORE_RETRY_S` (30) seconds, so a server that went away ends the
/// run with a message instead of hanging it.
fn client_options() -> (ClientOptions, RetryConfig) {
    let seconds = |var: &str, default: f64| {
        std::env::var(var)
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| *v > 0.0)
            .map_or(Duration::from_secs_f64(default), Duration::from_secs_f64)
    };
    let timeout = seconds("RUNFN_STORE_TIMEOUT_S", 60.0);
    let options = ClientOptions::new()
        .with_timeout(timeout)
        .with_connect_timeout(Duration::from_secs(5).min(timeout));
    let retry = RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            base: 2.0,
        },
        // The time budget ends the retries, not a count: a refused connection fails in a
        // millisecond, and five quick refusals gave up in about a second of a 30 s budget while
        // a restarted server was coming back.
        max_retries: usize::MAX,
        retry_timeout: seconds("RUNFN_STORE_RETRY_S", 30.0),
    };
    (options, retry)
}

fn build(scheme: &str, bucket: &str) -> Result<(Arc<dyn ObjectStore>, String), String> {
    let (options, retry) = client_options();
    let env = |var: &str| std::env::var(var).ok().filter(|v| !v.is_empty());
    match scheme {
        "s3" => {
            let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
            let profile = credentials::profile()?;
            if env("AWS_ACCESS_KEY_ID").is_none()
                && let (Some(id), Some(secret)) =
                    (&profile.access_key_id, &profile.secret_access_key)
            {
                builder = builder
                    .with_access_key_id(id)
                    .with_secret_access_key(secret);
                note_secret(secret);
                if let Some(token) = &profile.session_token {
                    builder = builder.with_token(token);
                    note_secret(token);
                }
            }
            if env("AWS_REGION").is_none() && env("AWS_DEFAULT_REGION").is_none() {
                builder = builder.with_region(profile.region.as_deref().unwrap_or("us-east-1"));
            }
            let endpoint = env("AWS_ENDPOINT_URL")
                .or_else(|| env("AWS_ENDPOINT_URL_S3"))
                .or_else(|| env("AWS_ENDPOINT"))
                .or(profile.endpoint_url);
            if let Some(endpoint) = &endpoint {
                builder = builder.with_endpoint(endpoint);
            }
            // A plain-http endpoint is a local or private server (MinIO, moto, Ceph): allowed.
            let http = endpoint
                .as_deref()
                .is_some_and(|e| e.starts_with("http://"));
            for var in ["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"] {
                if let Some(secret) = env(var) {
                    note_secret(&secret);
                }
            }
            let store = builder
                .with_client_options(options.with_allow_http(http))
                .with_retry(retry)
                .build()
                .map_err(|e| format!("S3 client: {e}"))?;
            let endpoint = endpoint.unwrap_or_else(|| "the S3 endpoint".to_string());
            Ok((Arc::new(store), endpoint))
        }
        "gs" => {
            let store = GoogleCloudStorageBuilder::from_env()
                .with_bucket_name(bucket)
                .with_client_options(options)
                .with_retry(retry)
                .build()
                .map_err(|e| format!("GCS client: {e}"))?;
            Ok((Arc::new(store), "Google Cloud Storage".to_string()))
        }
        _ => {
            if let Some(key) =
                env("AZURE_STORAGE_ACCOUNT_KEY").or_else(|| env("AZURE_STORAGE_ACCESS_KEY"))
            {
                note_secret(&key);
            }
            let store = MicrosoftAzureBuilder::from_env()
                .with_container_name(bucket)
                .with_client_options(options)
                .with_retry(retry)
                .build()
                .map_err(|e| format!("Azure client: {e}"))?;
            Ok((Arc::new(store), "Azure Blob Storage".to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_urls_from_paths() {
        assert!(is_remote("s3://bucket/data"));
        assert!(is_remote("gs://b"));
        assert!(!is_remote("runs/demo/shards"));
        assert!(!is_remote("file:///tmp/x"));
        assert!(!is_remote("./s3://odd"));
    }

    #[test]
    fn parses_and_joins_keys() {
        let r = Remote::parse("s3://bucket/runs/demo/").unwrap();
        assert_eq!(r.url(), "s3://bucket/runs/demo");
        assert_eq!(
            r.join("shards/index.json").url(),
            "s3://bucket/runs/demo/shards/index.json"
        );
        assert_eq!(r.join("x").name(), "x");
        let top = Remote::parse("s3://bucket").unwrap();
        assert_eq!(top.join("a").url(), "s3://bucket/a");
        assert!(Remote::parse("s3:///key").is_err());
        assert!(Remote::parse("s3://b/a/../c").is_err());
    }
}
