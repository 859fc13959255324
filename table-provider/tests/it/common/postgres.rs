//! A real PostgreSQL 15 server for the SQL catalog's tests, started by
//! `scripts/start-postgres.sh`.
//!
//! `scripts/test.sh` starts one server per run and passes its URI in `PETREL_TEST_POSTGRES_URI`;
//! without it, each test process starts its own (in a temp dir, on a free port; about half a
//! second once the machine's template cluster exists) and stops it when the handle drops.
//! Tests sharing a server keep apart by catalog name ([`unique_catalog_name`]): every row of
//! the SQL catalog's tables is scoped by `catalog_name`.

use std::path::PathBuf;
use std::process::Command;

use tempfile::TempDir;

/// A running server (owned: stopped on drop; shared: left running).
pub struct Postgres {
    /// `postgresql://petrel:petrel@127.0.0.1:PORT/petrel`.
    pub uri: String,
    owned: Option<TempDir>,
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/start-postgres.sh")
}

/// A free TCP port on 127.0.0.1 (bound, then released).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}

impl Postgres {
    /// The run's shared server, else a server of this process's own.
    pub fn start() -> Self {
        if let Ok(uri) = std::env::var("PETREL_TEST_POSTGRES_URI")
            && !uri.is_empty()
        {
            return Self { uri, owned: None };
        }
        let dir = tempfile::Builder::new()
            .prefix("petrel-pg")
            .tempdir_in("/tmp")
            .expect("tempdir");
        // A port taken between the probe and the server's bind: try another.
        for _ in 0..3 {
            let port = free_port();
            let output = Command::new("bash")
                .arg(script())
                .arg(dir.path())
                .arg(port.to_string())
                .output()
                .expect("run scripts/start-postgres.sh");
            if output.status.success() {
                let uri = String::from_utf8(output.stdout).expect("utf8");
                let uri = uri.lines().last().expect("a URI").trim().to_string();
                return Self {
                    uri,
                    owned: Some(dir),
                };
            }
            eprintln!(
                "scripts/start-postgres.sh on port {port} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            let _ = std::fs::remove_dir_all(dir.path().join("data"));
        }
        panic!("could not start PostgreSQL with scripts/start-postgres.sh");
    }

    /// The server's address, `host:port`.
    pub fn host_port(&self) -> String {
        let after = self.uri.rsplit_once('@').expect("user@host").1;
        after.split('/').next().expect("host:port").to_string()
    }

    /// The URI with another password (for authentication failures).
    pub fn uri_with_password(&self, password: &str) -> String {
        format!("postgresql://petrel:{password}@{}/petrel", self.host_port())
    }

    /// The URI as SQLAlchemy takes it (PyIceberg's `SqlCatalog`, driver psycopg2).
    pub fn sqlalchemy_uri(&self) -> String {
        self.uri
            .replacen("postgresql://", "postgresql+psycopg2://", 1)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(dir) = &self.owned {
            let _ = Command::new("bash")
                .arg(script())
                .arg("--stop")
                .arg(dir.path())
                .output();
        }
    }
}

/// A catalog name no other test uses (tests sharing a server keep apart by catalog name).
pub fn unique_catalog_name(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}
