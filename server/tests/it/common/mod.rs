//! Test support: start the real `petrel` binary on 127.0.0.1 with a random port, connect
//! arrow-rs's Flight SQL client to it, and read results.

#![allow(dead_code, unreachable_pub)]

/// The PostgreSQL test server helper, shared with the table-provider tests.
#[path = "../../../../table-provider/tests/it/common/postgres.rs"]
pub mod postgres;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use arrow_flight::FlightInfo;
use arrow_flight::sql::client::FlightSqlServiceClient;
use futures::TryStreamExt;
use tempfile::TempDir;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// moto's S3 server, shared with the table provider's tests.
#[path = "../../../../table-provider/tests/it/common/moto.rs"]
pub mod moto;

/// The `rustberg` REST catalog server, shared with the table provider's tests.
#[path = "../../../../table-provider/tests/it/common/rustberg.rs"]
pub mod rustberg;

/// The fixture corpus's filesystem warehouse (the `corpus` dataset of `scripts/test-data.sh`:
/// `PETREL_CORPUS`, the shared corpus beside the clone, or one generated with Spark).
pub fn corpus_warehouse() -> PathBuf {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/test-data.sh");
    let output = Command::new("bash")
        .arg(&script)
        .arg("corpus")
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/test-data.sh");
    assert!(
        output.status.success(),
        "scripts/test-data.sh corpus failed"
    );
    let stdout = String::from_utf8(output.stdout).expect("utf8 path");
    PathBuf::from(stdout.lines().last().expect("a path").trim()).join("warehouse")
}

/// A running `petrel` process; killed on drop.
pub struct Petrel {
    child: Option<Child>,
    pub addr: String,
    pub dir: TempDir,
    pub tls: bool,
}

impl Petrel {
    /// Starts `petrel serve` with `args` (plus `--bind 127.0.0.1:0 --port-file`), in a fresh
    /// working directory.
    pub fn start(args: &[&str]) -> Self {
        Self::start_in(TempDir::new().expect("tempdir"), args)
    }

    /// As [`Petrel::start`], in `dir`.
    pub fn start_in(dir: TempDir, args: &[&str]) -> Self {
        Self::start_with_env(dir, args, &[])
    }

    /// As [`Petrel::start_in`], with `env` set for the process (`AWS_*` for an S3 warehouse).
    pub fn start_with_env(dir: TempDir, args: &[&str], env: &[(&str, String)]) -> Self {
        let port_file = dir.path().join("petrel.addr");
        let log = std::fs::File::create(dir.path().join("petrel.log")).expect("log file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_petrel"));
        cmd.arg("serve")
            .args(["--bind", "127.0.0.1:0", "--port-file"])
            .arg(&port_file)
            .args(args)
            .current_dir(dir.path())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        for (k, _) in std::env::vars() {
            if k.starts_with("PETREL_") {
                cmd.env_remove(k);
            }
        }
        cmd.envs(env.iter().map(|(k, v)| (*k, v)));
        let mut child = cmd.spawn().expect("spawn petrel");
        let deadline = Instant::now() + Duration::from_secs(60);
        let addr = loop {
            if let Ok(a) = std::fs::read_to_string(&port_file)
                && !a.is_empty()
            {
                break a;
            }
            if let Some(status) = child.try_wait().expect("try_wait") {
                panic!(
                    "petrel exited with {status} before listening:\n{}",
                    std::fs::read_to_string(dir.path().join("petrel.log")).unwrap_or_default()
                );
            }
            assert!(Instant::now() < deadline, "petrel did not start in time");
            std::thread::sleep(Duration::from_millis(50));
        };
        let tls = args.contains(&"--tls-cert");
        Self {
            child: Some(child),
            addr,
            dir,
            tls,
        }
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("petrel.log")).unwrap_or_default()
    }

    /// A plain-text channel.
    pub async fn channel(&self) -> Channel {
        Endpoint::from_shared(format!("http://{}", self.addr))
            .expect("endpoint")
            .connect()
            .await
            .expect("connect")
    }

    /// A Flight SQL client without credentials.
    pub async fn client(&self) -> FlightSqlServiceClient<Channel> {
        FlightSqlServiceClient::new(self.channel().await)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Sends SIGTERM and waits for the process to exit.
    pub fn terminate(mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(s) = child.try_wait().expect("wait") {
                return s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("petrel did not stop after SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Petrel {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs `sql` and collects the result.
pub async fn query(
    client: &mut FlightSqlServiceClient<Channel>,
    sql: &str,
) -> Result<Vec<RecordBatch>, tonic::Status> {
    let info = client
        .execute(sql.to_string(), None)
        .await
        .map_err(to_status)?;
    fetch(client, &info).await
}

/// Reads every endpoint of `info`.
pub async fn fetch(
    client: &mut FlightSqlServiceClient<Channel>,
    info: &FlightInfo,
) -> Result<Vec<RecordBatch>, tonic::Status> {
    let mut out = Vec::new();
    for ep in &info.endpoint {
        assert!(ep.location.is_empty(), "endpoints carry no location");
        let ticket = ep.ticket.clone().expect("ticket");
        let stream = client.do_get(ticket).await.map_err(to_status)?;
        let batches: Vec<RecordBatch> = stream.try_collect().await.map_err(to_status)?;
        out.extend(batches);
    }
    Ok(out)
}

/// Total rows.
pub fn rows(batches: &[RecordBatch]) -> usize {
    batches.iter().map(|b| b.num_rows()).sum()
}

/// A FlightError as the server's status.
pub fn to_status(e: arrow_flight::error::FlightError) -> tonic::Status {
    match e {
        arrow_flight::error::FlightError::Tonic(s) => *s,
        other => tonic::Status::unknown(other.to_string()),
    }
}

/// PEM files for TLS tests: a CA, a server certificate for `localhost`/127.0.0.1 and a
/// client certificate, all signed by the CA.
pub struct TlsFiles {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

/// Writes [`TlsFiles`] into `dir`.
pub fn tls_files(dir: &Path) -> TlsFiles {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).expect("ca");
    let issuer = Issuer::new(ca_params, ca_key);
    let server_key = KeyPair::generate().expect("key");
    let server_cert =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .expect("params")
            .signed_by(&server_key, &issuer)
            .expect("server cert");
    let client_key = KeyPair::generate().expect("key");
    let client_cert = CertificateParams::new(vec!["petrel-client".to_string()])
        .expect("params")
        .signed_by(&client_key, &issuer)
        .expect("client cert");
    let files = TlsFiles {
        ca: dir.join("ca.pem"),
        server_cert: dir.join("server.pem"),
        server_key: dir.join("server.key"),
        client_cert: dir.join("client.pem"),
        client_key: dir.join("client.key"),
    };
    std::fs::write(&files.ca, ca_cert.pem()).unwrap();
    std::fs::write(&files.server_cert, server_cert.pem()).unwrap();
    std::fs::write(&files.server_key, server_key.serialize_pem()).unwrap();
    std::fs::write(&files.client_cert, client_cert.pem()).unwrap();
    std::fs::write(&files.client_key, client_key.serialize_pem()).unwrap();
    files
}

/// A TLS channel trusting `files.ca`, optionally presenting the client certificate.
pub async fn tls_channel(
    addr: &str,
    files: &TlsFiles,
    client_cert: bool,
) -> Result<Channel, tonic::transport::Error> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(std::fs::read(&files.ca).unwrap()))
        .domain_name("localhost");
    if client_cert {
        tls = tls.identity(Identity::from_pem(
            std::fs::read(&files.client_cert).unwrap(),
            std::fs::read(&files.client_key).unwrap(),
        ));
    }
    let port = addr.rsplit(':').next().unwrap();
    Endpoint::from_shared(format!("https://127.0.0.1:{port}"))
        .unwrap()
        .tls_config(tls)?
        .connect()
        .await
}

/// The metrics address the server announced on stderr.
pub fn metrics_addr(server: &Petrel) -> String {
    let log = server.log();
    let line = log
        .lines()
        .find_map(|l| l.strip_prefix("petrel metrics on http://"))
        .unwrap_or_else(|| panic!("no metrics address in the log:\n{log}"));
    line.trim_end_matches("/metrics").to_string()
}

/// GET /metrics over plain HTTP/1.1; the body.
pub fn scrape(addr: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to the metrics port");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let (head, body) = response.split_once("\r\n\r\n").expect("a response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    body.to_string()
}

/// The value of the sample `series` (name with its labels, as exposed).
pub fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {series} in:\n{text}"))
        .parse()
        .unwrap()
}

/// Opens a Flight session on `server` with the string session option `name` = `value`
/// (SetSessionOptions); the session cookie to send on later calls.
pub async fn session_cookie(server: &Petrel, name: &str, value: &str) -> String {
    use arrow_flight::Action;
    use petrel_server::proto::flight_session::{
        SessionOptionValue, SetSessionOptionsRequest, session_option_value::OptionValue,
    };
    use prost::Message;
    let mut raw =
        arrow_flight::flight_service_client::FlightServiceClient::new(server.channel().await);
    let set = SetSessionOptionsRequest {
        session_options: [(
            name.to_string(),
            SessionOptionValue {
                option_value: Some(OptionValue::StringValue(value.into())),
            },
        )]
        .into(),
    };
    let resp = raw
        .do_action(Action {
            r#type: "SetSessionOptions".into(),
            body: set.encode_to_vec().into(),
        })
        .await
        .expect("SetSessionOptions");
    let cookie = resp
        .metadata()
        .get("set-cookie")
        .expect("session cookie")
        .to_str()
        .expect("ascii cookie")
        .to_string();
    let _: Vec<_> = resp
        .into_inner()
        .try_collect()
        .await
        .expect("SetSessionOptions result");
    cookie
}
