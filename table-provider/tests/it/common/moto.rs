//! A real S3 server for tests: moto's server (`moto[server]` from PyPI, installed into the
//! project's `.venv` by `scripts/setup-python.sh`) on a free port of 127.0.0.1, stopped when
//! the handle drops. Requests must be signed; any key pair is accepted unless the server was
//! started [`Moto::start_with_auth`], when only the key pair it made is (and the session keys of
//! roles assumed through its STS).
//!
//! moto (5.2.5) accepts an assumed role's session keys forever: it records their expiry but
//! never checks it. [`Moto::start_with_auth_and_expiry`] runs moto's own server with
//! [`REFUSE_EXPIRED_SESSIONS`] applied first, which refuses them after their expiry as AWS does
//! (`400 ExpiredToken`); nothing else about the server changes.

use std::collections::HashMap;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use object_store::path::{Path as ObjectPath, PathPart};
use object_store::{ObjectStore, ObjectStoreExt};

/// The key pair tests sign with (moto without authentication accepts any).
pub const ACCESS_KEY: &str = "petrel-test-key";
/// Its secret.
pub const SECRET_KEY: &str = "petrel-test-secret";

/// A running moto server.
pub struct Moto {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// The key pair requests are signed with.
    pub access_key: String,
    /// Its secret.
    pub secret_key: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

/// The project's virtualenv (`PETREL_VENV` or `<repo>/.venv`).
pub fn venv() -> PathBuf {
    std::env::var_os("PETREL_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv"))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind a free port")
        .local_addr()
        .expect("local addr")
        .port()
}

/// The patch [`Moto::start_with_auth_and_expiry`] applies to moto before its server starts: an
/// assumed role's session keys presented after their `Expiration` are refused with S3's
/// `ExpiredToken` (moto would accept them), then `moto.server.main` runs with the arguments.
const REFUSE_EXPIRED_SESSIONS: &str = r#"
import sys
from moto.core.utils import utcnow
from moto.iam import access_control
from moto.s3.exceptions import S3ClientError
from moto.sts.models import sts_backends

accept = access_control.AssumedRoleAccessKey.__init__
refuse_s3 = access_control.S3IAMRequest._raise_invalid_access_key

def refuse_expired(self, account_id, partition, access_key_id, headers):
    accept(self, account_id, partition, access_key_id, headers)
    for role in sts_backends[account_id][partition].assumed_roles:
        if role.access_key_id == access_key_id and role.expiration <= utcnow():
            raise access_control.CreateAccessKeyFailure(reason="ExpiredToken")

def refuse_s3_expired(self, reason):
    if reason == "ExpiredToken":
        raise S3ClientError("ExpiredToken", "The provided token has expired.")
    refuse_s3(self, reason)

access_control.AssumedRoleAccessKey.__init__ = refuse_expired
access_control.S3IAMRequest._raise_invalid_access_key = refuse_s3_expired

from moto.server import main
sys.exit(main(sys.argv[1:]))
"#;

impl Moto {
    /// A server accepting any signed request.
    pub fn start() -> Self {
        Self::spawn(None, false)
    }

    /// A server that checks credentials: IAM authentication is on after the first four
    /// requests, which make an IAM user with an access key allowed everything; requests must
    /// be signed with that key (wrong keys are refused with 403).
    pub fn start_with_auth(bucket: &str) -> Self {
        Self::authenticated(bucket, false)
    }

    /// [`Moto::start_with_auth`], and the session keys of an assumed role (STS AssumeRole) are
    /// refused once they expire ([`REFUSE_EXPIRED_SESSIONS`]).
    pub fn start_with_auth_and_expiry(bucket: &str) -> Self {
        Self::authenticated(bucket, true)
    }

    fn authenticated(bucket: &str, refuse_expired: bool) -> Self {
        let mut moto = Self::spawn(Some(4), refuse_expired);
        let script = r#"
import json, sys, boto3
endpoint, bucket = sys.argv[1], sys.argv[2]
kw = dict(endpoint_url=endpoint, region_name="us-east-1",
          aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
iam = boto3.client("iam", **kw)
iam.create_user(UserName="petrel")
key = iam.create_access_key(UserName="petrel")["AccessKey"]
iam.put_user_policy(UserName="petrel", PolicyName="all", PolicyDocument=json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
boto3.client("s3", **kw).create_bucket(Bucket=bucket)
print(key["AccessKeyId"], key["SecretAccessKey"])
"#;
        let out = moto.python(script, &[bucket]);
        let mut words = out.split_whitespace();
        moto.access_key = words.next().expect("access key id").to_string();
        moto.secret_key = words.next().expect("secret key").to_string();
        moto
    }

    fn spawn(no_auth_requests: Option<u32>, refuse_expired: bool) -> Self {
        let server = venv().join("bin/moto_server");
        assert!(
            server.exists(),
            "{} is missing: run scripts/setup-python.sh",
            server.display()
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("moto.log");
        let port = free_port();
        let mut cmd = if refuse_expired {
            let mut cmd = Command::new(venv().join("bin/python"));
            cmd.args(["-c", REFUSE_EXPIRED_SESSIONS]);
            cmd
        } else {
            Command::new(&server)
        };
        cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("log"))
            .stderr(std::fs::File::create(dir.path().join("moto.err")).expect("log"));
        if let Some(n) = no_auth_requests {
            cmd.env("INITIAL_NO_AUTH_ACTION_COUNT", n.to_string());
        }
        let mut child = cmd.spawn().expect("spawn moto_server");
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = child.try_wait().expect("try_wait") {
                panic!(
                    "moto_server exited with {status}: {}",
                    std::fs::read_to_string(dir.path().join("moto.err")).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "moto_server did not listen in 60 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Self {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            access_key: ACCESS_KEY.into(),
            secret_key: SECRET_KEY.into(),
            log,
            _dir: dir,
        }
    }

    /// Runs a Python script in the project's virtualenv with the endpoint as its first
    /// argument; returns its stdout.
    pub fn python(&self, script: &str, args: &[&str]) -> String {
        let out = Command::new(venv().join("bin/python"))
            .arg("-c")
            .arg(script)
            .arg(&self.endpoint)
            .args(args)
            .env("AWS_ACCESS_KEY_ID", &self.access_key)
            .env("AWS_SECRET_ACCESS_KEY", &self.secret_key)
            .env("AWS_REGION", "us-east-1")
            .output()
            .expect("run python");
        assert!(
            out.status.success(),
            "python failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf8")
    }

    /// Creates a bucket.
    pub fn create_bucket(&self, bucket: &str) {
        self.python(
            "import sys, boto3\n\
             boto3.client('s3', endpoint_url=sys.argv[1], region_name='us-east-1')\
             .create_bucket(Bucket=sys.argv[2])",
            &[bucket],
        );
    }

    /// Iceberg FileIO properties reaching this server with its key pair.
    pub fn properties(&self) -> HashMap<String, String> {
        [
            ("s3.endpoint", self.endpoint.as_str()),
            ("s3.access-key-id", self.access_key.as_str()),
            ("s3.secret-access-key", self.secret_key.as_str()),
            ("s3.path-style-access", "true"),
            ("client.region", "us-east-1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// The `AWS_*` environment reaching this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ACCESS_KEY_ID", self.access_key.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.secret_key.clone()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ALLOW_HTTP", "true".into()),
        ]
    }

    /// Requests the server logged so far (one line each).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Copies every file under the local directory `from` to `store` under `to`, keeping relative
/// paths as written (no character decoded); returns how many files were copied.
pub async fn upload_dir(from: &Path, store: &Arc<dyn ObjectStore>, to: &ObjectPath) -> usize {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(from, &mut files);
    let count = files.len();
    futures::stream::iter(files)
        .map(|file| {
            let relative = file.strip_prefix(from).expect("under from").to_owned();
            let mut key = to.clone();
            for part in relative.iter() {
                // The name as it is on disk (PathPart::from would escape `%`).
                let name = part.to_str().expect("utf8 name");
                key = key.join(PathPart::parse(name).expect("addressable name"));
            }
            let store = Arc::clone(store);
            async move {
                let bytes = tokio::fs::read(&file).await.expect("read file");
                store
                    .put(&key, bytes.into())
                    .await
                    .unwrap_or_else(|e| panic!("upload {}: {e}", file.display()));
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    count
}

/// `scripts/delay-proxy.py` in front of a moto server (or another HTTP server on 127.0.0.1):
/// every request waits `delay_ms` first.
pub struct DelayProxy {
    child: Child,
    /// `http://127.0.0.1:PORT` of the proxy.
    pub endpoint: String,
}

impl DelayProxy {
    /// Starts the proxy for `moto`.
    pub fn start(moto: &Moto, delay_ms: u64) -> Self {
        Self::start_at(&moto.endpoint, delay_ms)
    }

    /// Starts the proxy for any HTTP server on 127.0.0.1 (`http://127.0.0.1:PORT`).
    pub fn start_at(endpoint: &str, delay_ms: u64) -> Self {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/delay-proxy.py");
        let target = endpoint.rsplit(':').next().expect("port").to_string();
        let port = free_port();
        let mut child = Command::new(venv().join("bin/python"))
            .arg(script)
            .args([port.to_string(), target, delay_ms.to_string()])
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn delay proxy");
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = child.try_wait().expect("try_wait") {
                panic!("delay proxy exited with {status}");
            }
            assert!(Instant::now() < deadline, "delay proxy did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
