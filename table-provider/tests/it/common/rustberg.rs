//! A real Iceberg REST catalog for tests: `rustberg` (crates.io; an Iceberg REST server on the
//! same `iceberg` crate), installed per machine by `scripts/install-rustberg.sh`.
//!
//! [`Rustberg::start`] runs it on a free port of 127.0.0.1 in a temp directory (its redb
//! catalog and a `file://` warehouse), with one API key (sent as a bearer token) and rate
//! limiting off (a test of wrong credentials must not lock the other tests out); the process
//! is killed when the value drops. Without the binary, tests skip with the reason printed,
//! unless `PETREL_REQUIRE_REST` is set (scripts/test.sh sets it), when they fail.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::moto::Moto;

/// The API key every test server accepts.
pub const API_KEY: &str = "rb_petrel-tests-0123456789abcdef";

/// Waits for `/v1/config` to answer (false: the process died first, e.g. port taken).
fn wait_ready(child: &mut Child, uri: &str, log: &Path) -> bool {
    let started = Instant::now();
    let url = format!("{uri}/v1/config");
    while started.elapsed() < Duration::from_secs(60) {
        if let Ok(Some(status)) = child.try_wait() {
            let mut text = String::new();
            let _ = std::fs::File::open(log).and_then(|mut f| f.read_to_string(&mut text));
            eprintln!("rustberg exited with {status}:\n{text}");
            return false;
        }
        let ok = Command::new("curl")
            .args(["-sf", "-o", "/dev/null", "-H"])
            .arg(format!("Authorization: Bearer {API_KEY}"))
            .arg(&url)
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("rustberg at {uri} did not answer within 60 s");
}

/// A running rustberg.
pub struct Rustberg {
    child: Child,
    dir: tempfile::TempDir,
    /// `http://127.0.0.1:PORT`.
    pub uri: String,
}

/// Where the binary is: `PETREL_RUSTBERG`, else the install script's cache.
fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("PETREL_RUSTBERG") {
        return PathBuf::from(path);
    }
    let home = std::env::var_os("HOME").unwrap_or_default();
    let tools = std::env::var_os("PETREL_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(&home).join(".cache/petrel/tools"));
    tools.join("rustberg/bin/rustberg")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind a free port")
        .local_addr()
        .expect("local addr")
        .port()
}

impl Rustberg {
    /// Starts a server, or `None` (reason printed) when the binary is missing and
    /// `PETREL_REQUIRE_REST` is unset.
    pub fn start() -> Option<Self> {
        Self::start_with(None, "", "", &[], None)
    }

    /// Starts a server whose warehouse is `warehouse` (default: a `file://` directory of its
    /// own), with `storage_toml` added to its `[storage]` table, `extra_toml` appended to its
    /// config and `env` set; `None` (reason printed)
    /// as [`Rustberg::start`], and also when the binary lacks the cargo `feature` named
    /// (`scripts/install-rustberg.sh` stamps the features it built with).
    pub fn start_with(
        warehouse: Option<&str>,
        storage_toml: &str,
        extra_toml: &str,
        env: &[(&str, &str)],
        feature: Option<&str>,
    ) -> Option<Self> {
        let bin = binary();
        let stamp = bin
            .parent()
            .and_then(Path::parent)
            .map(|p| p.join("features"));
        let built_with = stamp
            .and_then(|s| std::fs::read_to_string(s).ok())
            .unwrap_or_default();
        let missing_feature = feature.filter(|f| !built_with.split(',').any(|b| b.trim() == *f));
        if !bin.exists() || missing_feature.is_some() {
            let reason = match missing_feature {
                Some(f) if bin.exists() => format!(
                    "rustberg at {} was built without the `{f}` feature (run \
                     scripts/install-rustberg.sh)",
                    bin.display()
                ),
                _ => format!(
                    "rustberg is not installed at {} (run scripts/install-rustberg.sh)",
                    bin.display()
                ),
            };
            if std::env::var_os("PETREL_REQUIRE_REST").is_some() {
                panic!("PETREL_REQUIRE_REST is set but {reason}");
            }
            eprintln!("SKIPPED: {reason}");
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let warehouse_dir = dir.path().join("warehouse");
        let catalog = dir.path().join("catalog");
        std::fs::create_dir_all(&warehouse_dir).expect("mkdir warehouse");
        let warehouse = warehouse
            .map(str::to_string)
            .unwrap_or_else(|| format!("file://{}", warehouse_dir.display()));
        std::fs::create_dir_all(&catalog).expect("mkdir catalog");
        // The server takes the port it is given; a port taken in between (rare) is retried.
        for _ in 0..3 {
            let port = free_port();
            let config = dir.path().join("rustberg.toml");
            std::fs::write(
                &config,
                format!(
                    r#"[server]
host = "127.0.0.1"
port = {port}

[server.auth]
api_key_enabled = true

[[server.auth.api_keys]]
name = "petrel-tests"
tenant = "default"
roles = ["admin"]
key_env = "PETREL_TEST_RUSTBERG_KEY"

[storage]
catalog_url = "file://{catalog}"
warehouse_location = "{warehouse}"
{storage_toml}

[rate_limit]
enabled = false

{extra_toml}
"#,
                    catalog = catalog.display(),
                ),
            )
            .expect("write rustberg.toml");
            let log = dir.path().join(format!("rustberg-{port}.log"));
            let log_file = std::fs::File::create(&log).expect("log file");
            let mut child = Command::new(&bin)
                .arg("--config")
                .arg(&config)
                .args(["--dev", "--insecure-http"])
                .env("PETREL_TEST_RUSTBERG_KEY", API_KEY)
                .env("RUST_LOG", "warn")
                .envs(env.iter().copied())
                .current_dir(dir.path())
                .stdin(Stdio::null())
                .stdout(log_file.try_clone().expect("log"))
                .stderr(log_file)
                .spawn()
                .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
            let uri = format!("http://127.0.0.1:{port}");
            if wait_ready(&mut child, &uri, &log) {
                return Some(Rustberg { child, dir, uri });
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("rustberg did not start (see the logs above)");
    }

    /// A server whose warehouse `warehouse` (`s3://bucket/prefix`) is on `moto` (started
    /// [`Moto::start_with_auth`]), vending credentials for it: STS AssumeRole (moto's) of a
    /// role allowed all of S3, with rustberg's own S3 and STS requests signed by moto's IAM
    /// user; the keys it vends last 900 s (STS's shortest session). `None` as
    /// [`Rustberg::start_with`] (also without the `aws-credentials` feature).
    pub fn start_vending(moto: &Moto, warehouse: &str) -> Option<Self> {
        Self::start_vending_for(moto, warehouse, 900)
    }

    /// [`Rustberg::start_vending`] with keys that last `duration_seconds` (rustberg passes
    /// any value to STS, and moto's STS accepts any; AWS's would refuse less than 900).
    pub fn start_vending_for(moto: &Moto, warehouse: &str, duration_seconds: u32) -> Option<Self> {
        let role_arn = moto.python(
            r#"
import json, sys, boto3
iam = boto3.client("iam", endpoint_url=sys.argv[1], region_name="us-east-1")
trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
         "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]}
arn = iam.create_role(RoleName="petrel-vended",
                      AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
iam.put_role_policy(RoleName="petrel-vended", PolicyName="s3", PolicyDocument=json.dumps(
    {"Version": "2012-10-17",
     "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
print(arn)
"#,
            &[],
        );
        let extra = format!(
            r#"{storage}
[credentials]
provider = "aws"

[credentials.aws]
region = "us-east-1"
role_arn = "{role}"
duration_seconds = {duration_seconds}
"#,
            storage = moto_storage(moto),
            role = role_arn.trim(),
        );
        Self::start_with(
            Some(warehouse),
            "",
            &extra,
            &moto_env(moto),
            Some("aws-credentials"),
        )
    }

    /// A server whose warehouse `warehouse` (`s3://bucket/prefix`) is on `moto` (reached with
    /// moto's key pair, no credential vending), with `storage_toml` added to its `[storage]`
    /// table. `None` as [`Rustberg::start_with`].
    pub fn start_on_moto(moto: &Moto, warehouse: &str, storage_toml: &str) -> Option<Self> {
        Self::start_with(
            Some(warehouse),
            storage_toml,
            &moto_storage(moto),
            &moto_env(moto),
            None,
        )
    }

    /// The server's `file://` warehouse directory.
    pub fn warehouse(&self) -> PathBuf {
        self.dir.path().join("warehouse")
    }

    /// A temp directory of this server's (removed with it).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Petrel's configuration for this server, authenticated with the API key.
    pub fn config(&self, name: &str) -> petrel_table_provider::RestCatalogConfig {
        let mut config = petrel_table_provider::RestCatalogConfig::new(name, &self.uri);
        config.token = Some(API_KEY.to_string());
        config
    }

    /// A connected Petrel catalog.
    pub async fn catalog(&self, name: &str) -> petrel_table_provider::RestCatalog {
        petrel_table_provider::RestCatalog::connect(
            self.config(name),
            petrel_table_provider::io::StoreRegistry::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("connecting to rustberg at {}: {e}", self.uri))
    }
}

/// Rustberg's `[storage.properties]` for `moto`: its endpoint, path-style, and the key pair
/// from the environment [`moto_env`] sets.
fn moto_storage(moto: &Moto) -> String {
    format!(
        r#"[storage.properties]
"s3.endpoint" = "{endpoint}"
"s3.path-style-access" = "true"
"s3.region" = "us-east-1"
"s3.access-key-id" = "env:RUSTBERG_S3_KEY"
"s3.secret-access-key" = "env:RUSTBERG_S3_SECRET"
"#,
        endpoint = moto.endpoint,
    )
}

/// The environment rustberg reaches `moto` with: the key pair of [`moto_storage`], and the
/// `AWS_*` variables of its STS client (moto's STS).
fn moto_env(moto: &Moto) -> [(&'static str, &str); 6] {
    [
        ("RUSTBERG_S3_KEY", moto.access_key.as_str()),
        ("RUSTBERG_S3_SECRET", moto.secret_key.as_str()),
        ("AWS_ENDPOINT_URL", moto.endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", moto.access_key.as_str()),
        ("AWS_SECRET_ACCESS_KEY", moto.secret_key.as_str()),
        ("AWS_REGION", "us-east-1"),
    ]
}

impl Drop for Rustberg {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
