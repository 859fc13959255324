//! Configuration: clap flags, each with a `PETREL_*` environment variable, over an optional
//! TOML file (`--config FILE`). A flag or variable wins over the file; the file wins over the
//! built-in defaults. [`ServeArgs::resolve`] produces the [`ServerConfig`] the rest of the
//! server reads.
//!
//! With no flags at all `petrel` serves the embedded default (see [`crate::demo`]): a SQLite
//! SQL catalog in `./petrel-warehouse`, created with a demo table if missing.
//!
//! Every key, with its default and variable, is in [`DEFAULT_TOML`] (`petrel config
//! --print-default`) and `docs/configuration.md`. In short:
//!
//! ```toml
//! bind = "127.0.0.1:50051"
//! default_catalog = "iceberg"
//! default_schema = "db"
//! memory_limit = "8GiB"        # all queries together (default: 60% of the machine's)
//! query_memory_limit = "2GiB"  # one query (default: a quarter of memory_limit)
//! column_cache = "1GiB"        # decoded columns kept across queries (default: memory_limit / 8)
//! spill_limit = "20GiB"        # temporary files of all queries (default: half the free space)
//! max_concurrent_queries = 16
//! target_partitions = 4
//! read_only = false            # true: queries only, every write refused
//! metrics_addr = "127.0.0.1:9464"  # Prometheus metrics at /metrics (default: off)
//! log_format = "json"          # or "text" (the default)
//! slow_query_ms = 5000         # queries this slow are logged with their Iceberg scans
//! table_cache_ms = 0           # > 0: tables loaded this recently are not asked for again
//!
//! [[catalog]]
//! name = "iceberg"
//! type = "filesystem"          # Hadoop layout
//! warehouse = "/data/warehouse"
//!
//! [[catalog]]
//! name = "lake"
//! type = "sql"                 # PyIceberg SqlCatalog / Iceberg JdbcCatalog on SQLite
//! path = "/data/lake/catalog.db"
//! catalog_name = "default"     # the catalog_name column in the database
//!
//! [[catalog]]
//! name = "pg"
//! type = "sql"                 # the same SQL catalog on PostgreSQL
//! uri = "postgresql://petrel:secret@db.example.com:5432/iceberg"
//! catalog_name = "default"
//! warehouse = "/data/pg-lake"
//!
//! [[catalog]]
//! name = "rest"
//! type = "rest"                # an Iceberg REST catalog
//! uri = "http://catalog:8181"
//! warehouse = "analytics"
//! credential = "client-id:client-secret"   # or token = "..."
//!
//! [[user]]
//! name = "alice"
//! password_hash = "$argon2id$v=19$..."   # `petrel hash-password`
//!
//! [tls]
//! cert = "server.pem"
//! key = "server.key"
//! client_ca = "ca.pem"         # optional: require client certificates (mTLS)
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};
use serde::Deserialize;

pub use crate::telemetry::LogFormat;

/// Text after `--help` of `petrel` and `petrel serve`.
const SERVE_AFTER_HELP: &str = "\
Settings come from flags, then PETREL_* environment variables, then the TOML file given by
--config, then built-in defaults (the first that sets a value wins). `petrel config
--print-default` prints every TOML key with its default; docs/configuration.md describes them.

Logging goes to stderr as text or JSON lines (--log-format); RUST_LOG filters it (default:
warn,petrel=info,petrel_server=info,petrel_distributed=info). Each query logs one line:
`query` when it finished, `query failed` with its gRPC code otherwise, plus `slow query` when
it took --slow-query-ms or more. --metrics-addr serves Prometheus metrics at http://ADDR/metrics; the Flight port also
answers the gRPC health service (grpc.health.v1.Health).

With no catalog configured, petrel serves the embedded demo warehouse ./petrel-warehouse
(--data-dir) as catalog `petrel`, with the table petrel.demo.seabirds.";

/// `petrel`: an Arrow Flight SQL server for Apache Iceberg tables.
#[derive(Debug, Parser)]
#[command(
    name = "petrel",
    version,
    about,
    long_about = None,
    args_conflicts_with_subcommands = true,
    after_help = SERVE_AFTER_HELP
)]
pub struct Cli {
    /// What to do; `serve` when omitted.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// `petrel [FLAGS]` is `petrel serve [FLAGS]`.
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// Sub-commands of `petrel`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve Flight SQL (the default).
    #[command(after_help = SERVE_AFTER_HELP)]
    Serve(Box<ServeArgs>),
    /// Print an Argon2id hash of a password (read from stdin, or `--password`) for `[[user]]`.
    HashPassword {
        /// The password; read from the first line of stdin when omitted.
        #[arg(long, env = "PETREL_PASSWORD", hide_env_values = true)]
        password: Option<String>,
    },
    /// Run a Ballista scheduler with Petrel's codecs: the cluster `petrel serve --engine
    /// ballista://HOST:PORT` sends big reads to.
    Scheduler(crate::cluster_commands::SchedulerArgs),
    /// Run a Ballista executor with Petrel's codecs and stores; it registers with a scheduler.
    Executor(crate::cluster_commands::ExecutorArgs),
    /// Configuration helpers.
    Config {
        /// Print a commented TOML file with every key at its default (for `--config`).
        #[arg(long)]
        print_default: bool,
    },
}

/// Flags of `petrel serve`.
#[derive(Debug, Clone, Default, Args)]
pub struct ServeArgs {
    /// TOML configuration file (flags and environment variables override it).
    #[arg(long, env = "PETREL_CONFIG")]
    pub config: Option<PathBuf>,

    /// Address to listen on [default: 127.0.0.1:50051].
    #[arg(long, env = "PETREL_BIND")]
    pub bind: Option<SocketAddr>,

    /// A filesystem (Hadoop layout) warehouse: a directory or an object store URL such as
    /// `s3://bucket/prefix` (configured by the AWS_* environment), served as catalog
    /// `iceberg` (added to, or replacing an `iceberg` in, the file's catalogs) [default: none].
    #[arg(long, env = "PETREL_WAREHOUSE")]
    pub warehouse: Option<PathBuf>,

    /// Directory of the embedded default, used when no catalog is configured [default:
    /// petrel-warehouse].
    #[arg(long, env = "PETREL_DATA_DIR")]
    pub data_dir: Option<PathBuf>,

    /// Catalog used for unqualified table names [default: the first catalog].
    #[arg(long, env = "PETREL_DEFAULT_CATALOG")]
    pub default_catalog: Option<String>,

    /// Schema (Iceberg namespace) used for unqualified table names [default: `demo` for the
    /// embedded default, else `default` if the catalog has it, else its first namespace].
    #[arg(long, env = "PETREL_DEFAULT_SCHEMA")]
    pub default_schema: Option<String>,

    /// A user as `NAME:ARGON2_PHC_HASH` (repeatable; space-separated in the variable). No
    /// users: authentication is off [default: none].
    #[arg(long = "user", env = "PETREL_USERS", value_delimiter = ' ')]
    pub users: Vec<String>,

    /// Secret for signing bearer tokens (random per process when unset, so tokens do not
    /// survive a restart and are not shared between replicas).
    #[arg(long, env = "PETREL_TOKEN_SECRET", hide_env_values = true)]
    pub token_secret: Option<Secret>,

    /// Lifetime of a bearer token in seconds [default: 43200].
    #[arg(long, env = "PETREL_TOKEN_TTL_SECS")]
    pub token_ttl_secs: Option<u64>,

    /// Secret (hex or base64, at least 16 bytes) that signs tickets and prepared-statement
    /// handles; give every server behind one load balancer the same. Random per process when
    /// unset: tickets then work only on the server that issued them.
    #[arg(long, env = "PETREL_TICKET_SECRET", hide_env_values = true)]
    pub ticket_secret: Option<Secret>,

    /// Flight sessions (SetSessionOptions) kept at most; one more forgets the least recently
    /// used [default: 10000].
    #[arg(long, env = "PETREL_MAX_SESSIONS")]
    pub max_sessions: Option<usize>,

    /// Allow serving without authentication on a non-loopback address [default: false].
    #[arg(long, env = "PETREL_ALLOW_UNAUTHENTICATED_REMOTE")]
    pub allow_unauthenticated_remote: bool,

    /// TLS certificate chain (PEM).
    #[arg(long, env = "PETREL_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// TLS private key (PEM).
    #[arg(long, env = "PETREL_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// CA certificate (PEM) that client certificates must chain to (enables mTLS).
    #[arg(long, env = "PETREL_TLS_CLIENT_CA")]
    pub tls_client_ca: Option<PathBuf>,

    /// Memory all queries together may use, e.g. `8GiB` [default: 60% of the machine's (or
    /// the cgroup's) memory].
    #[arg(long, env = "PETREL_MEMORY_LIMIT")]
    pub memory_limit: Option<String>,

    /// Memory one query may use, within `--memory-limit`, e.g. `512MiB`, `2GiB` (0: the whole
    /// server pool) [default: a quarter of the server pool].
    #[arg(long, env = "PETREL_QUERY_MEMORY_LIMIT")]
    pub query_memory_limit: Option<String>,

    /// Decoded columns of data files kept across queries, e.g. `1GiB` (0: none), on top of
    /// `--memory-limit` [default: an eighth of the server pool].
    #[arg(long, env = "PETREL_COLUMN_CACHE")]
    pub column_cache: Option<String>,

    /// Disk space all queries together may spill to, e.g. `20GiB` (0: no spilling) [default:
    /// half the free space of the temporary directory at start, at most 100 GiB].
    #[arg(long, env = "PETREL_SPILL_LIMIT")]
    pub spill_limit: Option<String>,

    /// Parameter rows one execution may bind (a larger batch is refused with
    /// RESOURCE_EXHAUSTED) [default: 10000].
    #[arg(long, env = "PETREL_MAX_PARAMETER_ROWS")]
    pub max_parameter_rows: Option<usize>,

    /// Queries executing at once; more wait up to `--queue-timeout-secs`, then fail with
    /// RESOURCE_EXHAUSTED [default: 16].
    #[arg(long, env = "PETREL_MAX_CONCURRENT_QUERIES")]
    pub max_concurrent_queries: Option<usize>,

    /// Seconds a query waits for a free execution slot [default: 30].
    #[arg(long, env = "PETREL_QUEUE_TIMEOUT_SECS")]
    pub queue_timeout_secs: Option<u64>,

    /// DataFusion target partitions (parallelism of one query) [default: number of cores].
    #[arg(long, env = "PETREL_TARGET_PARTITIONS")]
    pub target_partitions: Option<usize>,

    /// Refuse every write (DDL, INSERT, DELETE, UPDATE, MERGE, CALL, bulk ingest): serve queries
    /// only [default: false].
    #[arg(long, env = "PETREL_READ_ONLY")]
    pub read_only: bool,

    /// Write the bound address to this file once listening (for scripts and tests).
    #[arg(long, env = "PETREL_PORT_FILE")]
    pub port_file: Option<PathBuf>,

    /// Serve Prometheus metrics over HTTP at this address, path /metrics (unauthenticated:
    /// keep it private), e.g. 127.0.0.1:9464 [default: off].
    #[arg(long, env = "PETREL_METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,

    /// Log lines as `text` or `json` (one object per line) [default: text].
    #[arg(long, value_enum, env = "PETREL_LOG_FORMAT")]
    pub log_format: Option<LogFormat>,

    /// Log queries taking this many milliseconds or more as `slow query`, with their SQL and
    /// Iceberg scans (0: every query) [default: 5000].
    #[arg(long, env = "PETREL_SLOW_QUERY_MS")]
    pub slow_query_ms: Option<u64>,

    /// Serve a table loaded less than this many milliseconds ago from memory instead of asking
    /// its catalog again: queries may miss other writers' commits for that long (never this
    /// server's own) (0: every query loads the current metadata) [default: 0].
    #[arg(long, env = "PETREL_TABLE_CACHE_MS")]
    pub table_cache_ms: Option<u64>,

    /// Send big reads of Iceberg tables to a Ballista cluster: `ballista://HOST:PORT`, its
    /// scheduler (`petrel scheduler`) [default: none: every query runs here].
    #[arg(long, env = "PETREL_ENGINE")]
    pub engine: Option<String>,

    /// With --engine: queries whose Iceberg scans select fewer bytes of data files run here,
    /// e.g. `64MiB` (0: every read of Iceberg tables goes to the cluster) [default: 256MiB].
    #[arg(long, env = "PETREL_CLUSTER_MIN_BYTES")]
    pub cluster_min_bytes: Option<String>,
}

/// The TOML file's shape.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Address to listen on.
    pub bind: Option<SocketAddr>,
    /// Catalog for unqualified names.
    pub default_catalog: Option<String>,
    /// Schema for unqualified names.
    pub default_schema: Option<String>,
    /// Embedded default directory.
    pub data_dir: Option<PathBuf>,
    /// Server-wide memory limit (`8GiB`).
    pub memory_limit: Option<String>,
    /// Per-query memory limit (`2GiB`).
    pub query_memory_limit: Option<String>,
    /// Decoded-column cache (`1GiB`, `0`: none).
    pub column_cache: Option<String>,
    /// Disk space queries may spill to (`20GiB`, `0`: none).
    pub spill_limit: Option<String>,
    /// Parameter rows per execution.
    pub max_parameter_rows: Option<usize>,
    /// Concurrent query limit.
    pub max_concurrent_queries: Option<usize>,
    /// Queue timeout in seconds.
    pub queue_timeout_secs: Option<u64>,
    /// DataFusion target partitions.
    pub target_partitions: Option<usize>,
    /// Serve without auth on a non-loopback address.
    pub allow_unauthenticated_remote: Option<bool>,
    /// Refuse every write.
    pub read_only: Option<bool>,
    /// Ticket and handle signing secret (hex or base64).
    pub ticket_secret: Option<Secret>,
    /// Sessions kept at most.
    pub max_sessions: Option<usize>,
    /// Prometheus metrics address.
    pub metrics_addr: Option<SocketAddr>,
    /// `text` or `json`.
    pub log_format: Option<LogFormat>,
    /// Slow-query threshold in milliseconds.
    pub slow_query_ms: Option<u64>,
    /// How long a loaded table is served from memory, in milliseconds.
    pub table_cache_ms: Option<u64>,
    /// A Ballista cluster for big reads (`ballista://HOST:PORT`).
    pub engine: Option<String>,
    /// Reads selecting fewer bytes stay local (`256MiB`).
    pub cluster_min_bytes: Option<String>,
    /// Catalogs.
    #[serde(default, rename = "catalog")]
    pub catalogs: Vec<CatalogConfig>,
    /// Users.
    #[serde(default, rename = "user")]
    pub users: Vec<UserConfig>,
    /// Token settings.
    #[serde(default)]
    pub auth: AuthFileConfig,
    /// TLS.
    pub tls: Option<TlsConfig>,
}

/// `[auth]` in the TOML file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthFileConfig {
    /// Token signing secret.
    pub token_secret: Option<Secret>,
    /// Token lifetime.
    pub token_ttl_secs: Option<u64>,
}

/// One `[[catalog]]`. Its `Debug` shows no secret: a PostgreSQL URI's password, storage and
/// client properties' values (keys only) and REST credentials are left out.
#[derive(Clone, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum CatalogConfig {
    /// A warehouse directory in Iceberg's Hadoop layout.
    Filesystem {
        /// Name in SQL (`<name>.<namespace>.<table>`).
        name: String,
        /// The warehouse: a local directory, or an object store URL (`s3://bucket/prefix`,
        /// `gs://…`, `abfss://…`).
        warehouse: PathBuf,
        /// Object store settings (`[catalog.storage]`, Iceberg FileIO names such as
        /// `s3.endpoint`), over the `AWS_*` environment.
        #[serde(default)]
        storage: BTreeMap<String, String>,
    },
    /// A SQL catalog (PyIceberg `SqlCatalog`, Iceberg `JdbcCatalog`) in a SQLite file or a
    /// PostgreSQL database: exactly one of `path` and `uri`.
    Sql {
        /// Name in SQL.
        name: String,
        /// The SQLite database file.
        #[serde(default)]
        path: Option<PathBuf>,
        /// The PostgreSQL database: `postgresql://user:password@host:port/db` (parameters
        /// such as `?connect_timeout=5` as libpq takes them; no TLS).
        #[serde(default)]
        uri: Option<String>,
        /// The `catalog_name` column value in the database (default: `name`).
        catalog_name: Option<String>,
        /// Where `CREATE TABLE` puts new tables of namespaces without a `location` property:
        /// `<warehouse>/<namespace>/<table>` (PyIceberg's rule). None: such a CREATE TABLE
        /// needs `LOCATION`.
        warehouse: Option<String>,
        /// Object store settings of the catalog's tables (as for a filesystem catalog).
        #[serde(default)]
        storage: BTreeMap<String, String>,
    },
    /// An Iceberg REST catalog (Polaris, Lakekeeper, Nessie, Gravitino, rustberg, ...).
    Rest {
        /// Name in SQL.
        name: String,
        /// Base URI (`http://host:8181`; `/v1/...` is appended).
        uri: String,
        /// The warehouse asked for at `GET /v1/config?warehouse=`.
        warehouse: Option<String>,
        /// OAuth2 client credentials `client_id:client_secret`, exchanged at the token
        /// endpoint for bearer tokens (refreshed before they expire).
        credential: Option<Secret>,
        /// A static bearer token.
        token: Option<Secret>,
        /// OAuth2 scope (default `catalog`).
        scope: Option<String>,
        /// URL prefix, when the server's `/v1/config` gives none.
        prefix: Option<String>,
        /// Token endpoint (default `<uri>/v1/oauth/tokens`).
        oauth2_server_uri: Option<String>,
        /// Ask for vended storage credentials on table loads (default true).
        vended_credentials: Option<bool>,
        /// Longest wait for one request to the catalog, in seconds (default 60).
        request_timeout_secs: Option<u64>,
        /// Further Iceberg client properties (`header.X-Name`, `s3.endpoint`, ...).
        #[serde(default)]
        properties: std::collections::BTreeMap<String, String>,
    },
}

/// A secret from the configuration: used as given, shown as `<redacted>`.
#[derive(Clone, Deserialize, PartialEq)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_string()))
    }
}

impl Secret {
    /// The secret itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// `uri` with any password between `user:` and `@` replaced by `<redacted>`.
fn redact_uri_password(uri: &str) -> String {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return uri.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rsplit_once('@') {
        Some((user_info, host)) if user_info.contains(':') => {
            let user = user_info.split(':').next().unwrap_or_default();
            format!(
                "{scheme}://{user}:<redacted>@{host}{}",
                &rest[authority_end..]
            )
        }
        _ => uri.to_string(),
    }
}

/// Property keys only: values may be credentials (`s3.secret-access-key`, `header.Authorization`).
struct KeysOnly<'a>(&'a BTreeMap<String, String>);

impl std::fmt::Debug for KeysOnly<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl std::fmt::Debug for CatalogConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CatalogConfig::Filesystem {
                name,
                warehouse,
                storage,
            } => f
                .debug_struct("Filesystem")
                .field("name", name)
                .field("warehouse", warehouse)
                .field("storage", &KeysOnly(storage))
                .finish(),
            CatalogConfig::Sql {
                name,
                path,
                uri,
                catalog_name,
                warehouse,
                storage,
            } => f
                .debug_struct("Sql")
                .field("name", name)
                .field("path", path)
                .field("uri", &uri.as_deref().map(redact_uri_password))
                .field("catalog_name", catalog_name)
                .field("warehouse", warehouse)
                .field("storage", &KeysOnly(storage))
                .finish(),
            CatalogConfig::Rest {
                name,
                uri,
                warehouse,
                credential,
                token,
                scope,
                prefix,
                oauth2_server_uri,
                vended_credentials,
                request_timeout_secs,
                properties,
            } => f
                .debug_struct("Rest")
                .field("name", name)
                .field("uri", &redact_uri_password(uri))
                .field("warehouse", warehouse)
                .field("credential", credential)
                .field("token", token)
                .field("scope", scope)
                .field("prefix", prefix)
                .field("oauth2_server_uri", oauth2_server_uri)
                .field("vended_credentials", vended_credentials)
                .field("request_timeout_secs", request_timeout_secs)
                .field("properties", &KeysOnly(properties))
                .finish(),
        }
    }
}

impl CatalogConfig {
    /// The catalog's SQL name.
    pub fn name(&self) -> &str {
        match self {
            CatalogConfig::Filesystem { name, .. }
            | CatalogConfig::Sql { name, .. }
            | CatalogConfig::Rest { name, .. } => name,
        }
    }
}

/// One `[[user]]`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    /// User name.
    pub name: String,
    /// Argon2 PHC string (`petrel hash-password`).
    pub password_hash: String,
}

/// `[tls]`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// Certificate chain (PEM).
    pub cert: PathBuf,
    /// Private key (PEM).
    pub key: PathBuf,
    /// Client CA (PEM), enables mTLS.
    pub client_ca: Option<PathBuf>,
}

/// Everything the server needs, resolved from flags, environment, file and defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Listen address.
    pub bind: SocketAddr,
    /// Catalogs to serve; empty means "the embedded default".
    pub catalogs: Vec<CatalogConfig>,
    /// Directory of the embedded default.
    pub data_dir: PathBuf,
    /// Catalog for unqualified names (None: the first catalog).
    pub default_catalog: Option<String>,
    /// Schema for unqualified names.
    pub default_schema: Option<String>,
    /// Users; empty means no authentication.
    pub users: Vec<UserConfig>,
    /// Token signing secret.
    pub token_secret: Option<Secret>,
    /// Token lifetime.
    pub token_ttl_secs: u64,
    /// Ticket and handle signing secret as configured (hex or base64; None: random).
    pub ticket_secret: Option<Secret>,
    /// Sessions kept at most.
    pub max_sessions: usize,
    /// Serve without auth on a non-loopback address.
    pub allow_unauthenticated_remote: bool,
    /// TLS settings.
    pub tls: Option<TlsConfig>,
    /// Server-wide memory limit in bytes (None: derived from the machine).
    pub memory_limit: Option<usize>,
    /// Per-query memory limit in bytes (None: a quarter of the server pool; capped at it).
    pub query_memory_limit: Option<usize>,
    /// Decoded-column cache in bytes (None: an eighth of the server pool; 0: none).
    pub column_cache: Option<usize>,
    /// Disk space queries may spill to, in bytes (None: half the free space of the temporary
    /// directory, at most 100 GiB; 0: no spilling).
    pub spill_limit: Option<u64>,
    /// Parameter rows one execution may bind.
    pub max_parameter_rows: usize,
    /// Concurrent queries.
    pub max_concurrent_queries: usize,
    /// Queue timeout in seconds.
    pub queue_timeout_secs: u64,
    /// DataFusion target partitions.
    pub target_partitions: Option<usize>,
    /// Refuse every write (queries only).
    pub read_only: bool,
    /// Where to write the bound address.
    pub port_file: Option<PathBuf>,
    /// Where to serve Prometheus metrics (None: nowhere).
    pub metrics_addr: Option<SocketAddr>,
    /// Log line format.
    pub log_format: LogFormat,
    /// Queries this slow (milliseconds) are logged as `slow query`.
    pub slow_query_ms: u64,
    /// Tables loaded less than this many milliseconds ago are served from memory (0: never).
    pub table_cache_ms: u64,
    /// The Ballista cluster big reads go to (None: every query runs here).
    pub engine: Option<petrel_distributed::ClusterEngine>,
}

/// Default listen address.
pub const DEFAULT_BIND: &str = "127.0.0.1:50051";
/// Default embedded-warehouse directory (relative to the working directory).
pub const DEFAULT_DATA_DIR: &str = "petrel-warehouse";
/// Default limit of queries executing at once.
pub const DEFAULT_MAX_CONCURRENT_QUERIES: usize = 16;
/// Default seconds a query waits for an execution slot.
pub const DEFAULT_QUEUE_TIMEOUT_SECS: u64 = 30;
/// Default bearer-token lifetime in seconds (12 hours).
pub const DEFAULT_TOKEN_TTL_SECS: u64 = 12 * 3600;

/// `petrel config --print-default`: every key of the TOML file, set to its default or (for
/// keys without a fixed default, and the tables) commented out with an example. Loading it
/// gives the same configuration as no file at all (a test checks that).
pub const DEFAULT_TOML: &str = r#"# Petrel configuration (`petrel --config FILE`). Every key is optional; the values below are
# the defaults. A flag or PETREL_* environment variable overrides the file.
# docs/configuration.md describes each key.

# Address to listen on (PETREL_BIND). A non-loopback address needs [[user]] entries, or
# allow_unauthenticated_remote set to true.
bind = "127.0.0.1:50051"

# Serve a non-loopback address without authentication (PETREL_ALLOW_UNAUTHENTICATED_REMOTE).
allow_unauthenticated_remote = false

# Refuse every write (DDL, INSERT, DELETE, UPDATE, MERGE, CALL, bulk ingest) with
# PERMISSION_DENIED: only queries run
# (PETREL_READ_ONLY, --read-only).
read_only = false

# Catalog and schema (Iceberg namespace) of unqualified table names
# (PETREL_DEFAULT_CATALOG, PETREL_DEFAULT_SCHEMA). Defaults: the first [[catalog]]; `demo`
# for the embedded default, else `default` if the catalog has it, else its first namespace.
# default_catalog = "iceberg"
# default_schema = "db"

# Directory of the embedded demo warehouse, served when no [[catalog]] is configured
# (PETREL_DATA_DIR). Relative paths are relative to the working directory.
data_dir = "petrel-warehouse"

# Memory all queries together may use, one pool shared by every query and by bound
# parameters (PETREL_MEMORY_LIMIT): 512MiB, 8GiB, 1.5GB, ... Default: 60% of the memory the
# process may use (the cgroup limit, else physical memory).
# memory_limit = "8GiB"

# Memory one query may use, within memory_limit (PETREL_QUERY_MEMORY_LIMIT). "0": no limit of
# its own. Default: a quarter of memory_limit. A query over it fails with RESOURCE_EXHAUSTED
# (spilling operators spill first); the server keeps serving.
# query_memory_limit = "2GiB"

# Decoded columns of data files kept across queries (PETREL_COLUMN_CACHE), on top of
# memory_limit: a scan that reads every row of its files, or a filtered scan of a table
# without deletes, takes their columns from here instead of decompressing and decoding them
# again (a file is kept from its second read on; by filtered scans only into free space).
# "0": none. Default: an eighth of memory_limit.
# column_cache = "1GiB"

# Disk space all queries together may spill to (PETREL_SPILL_LIMIT): sorts, aggregates and
# joins over their memory write temporary files in the OS temporary directory ($TMPDIR); over
# this a query fails with RESOURCE_EXHAUSTED. "0": no spilling. Default: half the free space
# of that directory when the server starts, at most 100GiB.
# spill_limit = "20GiB"

# Parameter rows one execution may bind (PETREL_MAX_PARAMETER_ROWS); a larger batch is
# refused with RESOURCE_EXHAUSTED.
max_parameter_rows = 10000

# Queries executing at once (PETREL_MAX_CONCURRENT_QUERIES); more wait up to
# queue_timeout_secs (PETREL_QUEUE_TIMEOUT_SECS), then fail with RESOURCE_EXHAUSTED.
max_concurrent_queries = 16
queue_timeout_secs = 30

# DataFusion target partitions, the parallelism of one query (PETREL_TARGET_PARTITIONS).
# Default: the number of cores.
# target_partitions = 4

# Secret that signs tickets and prepared-statement handles (PETREL_TICKET_SECRET): hex or
# base64, at least 16 bytes (`openssl rand -hex 32`). Give every server behind one load
# balancer the same one. Default: random per process, so a ticket works only on the server
# that issued it, until it restarts.
# ticket_secret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

# Flight sessions (SetSessionOptions: current catalog and schema) kept at most
# (PETREL_MAX_SESSIONS); one more forgets the least recently used.
max_sessions = 10000

# Prometheus metrics over HTTP at http://<metrics_addr>/metrics (PETREL_METRICS_ADDR). No
# authentication: bind it where only the scraper reaches it. Default: off.
# metrics_addr = "127.0.0.1:9464"

# Log lines as "text" or "json" (one object per line) (PETREL_LOG_FORMAT, --log-format).
# RUST_LOG filters them.
log_format = "text"

# Queries taking this many milliseconds or more are logged once more as `slow query`, with
# their SQL (cut to 2000 characters), duration, rows, bytes and Iceberg scans (snapshot,
# manifests and files pruned, delete files applied) (PETREL_SLOW_QUERY_MS). 0: every query.
slow_query_ms = 5000

# Tables loaded less than this many milliseconds ago are served from memory, without asking
# their catalog whether they changed (PETREL_TABLE_CACHE_MS, --table-cache-ms): on object
# storage or behind a REST catalog this saves a round trip or two per query, and queries may
# then miss commits by other writers (Spark, another server) for that long. Commits through
# this server are seen at once. Iceberg Java's `cache.expiration-interval-ms`, except that an
# entry expires this long after it was loaded however often it is read. 0: every query loads
# the table's current metadata.
table_cache_ms = 0

# A Ballista cluster (its scheduler, `petrel scheduler`) that big reads of Iceberg tables go to
# (PETREL_ENGINE, --engine): a query that only reads Iceberg tables and whose scans select at
# least cluster_min_bytes of data files (PETREL_CLUSTER_MIN_BYTES) runs there; everything else
# (small queries, writes, DDL, metadata tables, change feeds) runs here. Default: none.
# engine = "ballista://127.0.0.1:50050"
cluster_min_bytes = "256MiB"

# Catalogs, in order (none: the embedded default). `--warehouse DIR` (PETREL_WAREHOUSE) adds a
# filesystem catalog named `iceberg`.
#
# [[catalog]]
# name = "iceberg"             # the name in SQL: iceberg.<namespace>.<table>
# type = "filesystem"          # a warehouse directory in Iceberg's Hadoop layout
# warehouse = "/data/warehouse"  # or s3://bucket/prefix (gs://, abfss:// likewise)
#
# Object store settings of a catalog (Iceberg FileIO names; unset ones come from the AWS_*
# environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION,
# AWS_ENDPOINT_URL, AWS_ALLOW_HTTP, web identity, instance metadata):
# [catalog.storage]
# "s3.endpoint" = "http://127.0.0.1:9000"
# "s3.access-key-id" = "..."
# "s3.secret-access-key" = "..."
# "s3.session-token" = "..."
# "s3.path-style-access" = "true"
# "client.region" = "us-east-1"
#
# [[catalog]]
# name = "lake"
# type = "sql"                 # PyIceberg SqlCatalog / Iceberg JdbcCatalog in a SQLite file
# path = "/data/lake/catalog.db"
# catalog_name = "default"     # its catalog_name column (default: name)
# warehouse = "/data/lake"     # where CREATE TABLE puts new tables (default: none; use LOCATION)
#
# [[catalog]]
# name = "pg"
# type = "sql"                 # the same SQL catalog on PostgreSQL: `uri` instead of `path`
# uri = "postgresql://petrel:secret@db.example.com:5432/iceberg"  # ?connect_timeout=10 (s)
# catalog_name = "default"
# warehouse = "/data/pg-lake"
#
# [[catalog]]
# name = "rest"
# type = "rest"                # an Iceberg REST catalog
# uri = "http://catalog:8181"  # base URI (/v1/... is appended)
# warehouse = "analytics"      # sent to GET /v1/config?warehouse=
# credential = "id:secret"     # OAuth2 client credentials (token endpoint: uri/v1/oauth/tokens)
# token = "..."                # or a static bearer token
# scope = "catalog"            # OAuth2 scope
# prefix = "..."               # URL prefix when the server's config gives none
# oauth2_server_uri = "https://idp/token"  # another token endpoint
# vended_credentials = true    # X-Iceberg-Access-Delegation: vended-credentials
# request_timeout_secs = 60    # longest wait for one catalog request
# properties = { "header.X-Tenant" = "a" }  # further Iceberg client properties

# Users (none: authentication is off). `petrel hash-password` prints a hash. `--user
# NAME:HASH` (PETREL_USERS, space-separated) adds or replaces one.
#
# [[user]]
# name = "alice"
# password_hash = "$argon2id$v=19$m=19456,t=2,p=1$..."

[auth]
# Secret that signs bearer tokens (PETREL_TOKEN_SECRET). Default: random per process, so
# tokens do not survive a restart and replicas do not accept each other's.
# token_secret = "a long random string"
# Token lifetime in seconds (PETREL_TOKEN_TTL_SECS).
token_ttl_secs = 43200

# TLS (PETREL_TLS_CERT, PETREL_TLS_KEY, PETREL_TLS_CLIENT_CA). Default: plain text.
#
# [tls]
# cert = "/etc/petrel/server.pem"   # certificate chain (PEM)
# key = "/etc/petrel/server.key"    # private key (PEM)
# client_ca = "/etc/petrel/ca.pem"  # optional: require client certificates (mTLS)
"#;

impl ServeArgs {
    /// Merges flags over the TOML file (if any) over defaults.
    pub fn resolve(&self) -> Result<ServerConfig, String> {
        let file = match &self.config {
            Some(path) => load_file(path)?,
            None => FileConfig::default(),
        };
        let mut catalogs = file.catalogs.clone();
        if let Some(dir) = &self.warehouse {
            catalogs.retain(|c| c.name() != "iceberg");
            catalogs.insert(
                0,
                CatalogConfig::Filesystem {
                    name: "iceberg".into(),
                    warehouse: dir.clone(),
                    storage: BTreeMap::new(),
                },
            );
        }
        let mut users = file.users.clone();
        for spec in &self.users {
            let (name, hash) = spec
                .split_once(':')
                .ok_or_else(|| format!("--user {spec:?}: expected NAME:ARGON2_HASH"))?;
            users.retain(|u| u.name != name);
            users.push(UserConfig {
                name: name.to_string(),
                password_hash: hash.to_string(),
            });
        }
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(TlsConfig {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: self
                    .tls_client_ca
                    .clone()
                    .or_else(|| file.tls.as_ref().and_then(|t| t.client_ca.clone())),
            }),
            _ => file.tls.clone(),
        };
        if self.tls_client_ca.is_some() && tls.is_none() {
            return Err("--tls-client-ca needs --tls-cert and --tls-key".into());
        }
        let memory = self
            .query_memory_limit
            .clone()
            .or(file.query_memory_limit.clone());
        let query_memory_limit = match memory {
            // 0: no limit of its own (the server pool still bounds it).
            Some(text) => match parse_bytes(&text)? {
                0 => Some(usize::MAX),
                n => Some(n),
            },
            None => None,
        };
        let memory_limit = match self.memory_limit.clone().or(file.memory_limit.clone()) {
            Some(text) => match parse_bytes(&text)? {
                0 => return Err("memory_limit must be more than 0 bytes".into()),
                n => Some(n),
            },
            None => None,
        };
        let column_cache = match self.column_cache.clone().or(file.column_cache.clone()) {
            Some(text) => Some(parse_bytes(&text)?),
            None => None,
        };
        let spill_limit = match self.spill_limit.clone().or(file.spill_limit.clone()) {
            Some(text) => Some(parse_bytes(&text)? as u64),
            None => None,
        };
        let max_parameter_rows = self
            .max_parameter_rows
            .or(file.max_parameter_rows)
            .unwrap_or(crate::parameters::DEFAULT_MAX_PARAMETER_ROWS);
        let bind = match self.bind.or(file.bind) {
            Some(b) => b,
            None => DEFAULT_BIND.parse().map_err(|e| format!("{e}"))?,
        };
        let max_concurrent_queries = self
            .max_concurrent_queries
            .or(file.max_concurrent_queries)
            .unwrap_or(DEFAULT_MAX_CONCURRENT_QUERIES);
        if max_concurrent_queries == 0 {
            return Err("max_concurrent_queries must be at least 1".into());
        }
        let ticket_secret = self.ticket_secret.clone().or(file.ticket_secret.clone());
        if let Some(secret) = &ticket_secret {
            crate::tickets::parse_secret(&secret.0)?;
        }
        let max_sessions = self
            .max_sessions
            .or(file.max_sessions)
            .unwrap_or(crate::session::DEFAULT_MAX_SESSIONS);
        if max_sessions == 0 {
            return Err("max_sessions must be at least 1".into());
        }
        let cluster_min_bytes = match self
            .cluster_min_bytes
            .clone()
            .or(file.cluster_min_bytes.clone())
        {
            Some(text) => parse_bytes(&text)? as u64,
            None => petrel_distributed::DEFAULT_MIN_PLANNED_BYTES,
        };
        let engine = match self.engine.clone().or(file.engine.clone()) {
            Some(url) => Some(petrel_distributed::ClusterEngine::parse(
                &url,
                cluster_min_bytes,
            )?),
            None => None,
        };
        Ok(ServerConfig {
            bind,
            catalogs,
            data_dir: self
                .data_dir
                .clone()
                .or(file.data_dir.clone())
                .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR)),
            default_catalog: self
                .default_catalog
                .clone()
                .or(file.default_catalog.clone()),
            default_schema: self.default_schema.clone().or(file.default_schema.clone()),
            users,
            token_secret: self.token_secret.clone().or(file.auth.token_secret.clone()),
            token_ttl_secs: self
                .token_ttl_secs
                .or(file.auth.token_ttl_secs)
                .unwrap_or(DEFAULT_TOKEN_TTL_SECS),
            ticket_secret,
            max_sessions,
            allow_unauthenticated_remote: self.allow_unauthenticated_remote
                || file.allow_unauthenticated_remote.unwrap_or(false),
            tls,
            memory_limit,
            query_memory_limit,
            column_cache,
            spill_limit,
            max_parameter_rows,
            max_concurrent_queries,
            queue_timeout_secs: self
                .queue_timeout_secs
                .or(file.queue_timeout_secs)
                .unwrap_or(DEFAULT_QUEUE_TIMEOUT_SECS),
            target_partitions: self.target_partitions.or(file.target_partitions),
            read_only: self.read_only || file.read_only.unwrap_or(false),
            port_file: self.port_file.clone(),
            metrics_addr: self.metrics_addr.or(file.metrics_addr),
            log_format: self.log_format.or(file.log_format).unwrap_or_default(),
            slow_query_ms: self
                .slow_query_ms
                .or(file.slow_query_ms)
                .unwrap_or(crate::telemetry::DEFAULT_SLOW_QUERY_MS),
            table_cache_ms: self.table_cache_ms.or(file.table_cache_ms).unwrap_or(0),
            engine,
        })
    }
}

fn load_file(path: &Path) -> Result<FileConfig, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
    toml::from_str(&text).map_err(|e| format!("config file {}: {e}", path.display()))
}

/// Parses `1024`, `512KiB`, `512MB`, `2GiB`, `1.5GB` into bytes (KB/MB/GB are powers of 1000,
/// KiB/MiB/GiB of 1024).
pub fn parse_bytes(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a size like 512MiB or 2GB"))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "kib" => 1024.0,
        "m" | "mb" => 1e6,
        "mib" => 1024.0 * 1024.0,
        "g" | "gb" => 1e9,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" => 1e12,
        "tib" => 1024.0f64.powi(4),
        other => return Err(format!("unknown size unit {other:?} in {text:?}")),
    };
    Ok((value * mult) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_shows_no_secret() {
        let file: FileConfig = toml::from_str(
            r#"
ticket_secret = "ticket-secret-value"
[auth]
token_secret = "token-secret-value"
[[catalog]]
name = "pg"
type = "sql"
uri = "postgresql://petrel:pg-password@db:5432/iceberg?connect_timeout=5"
[catalog.storage]
"s3.secret-access-key" = "s3-secret-value"
[[catalog]]
name = "rest"
type = "rest"
uri = "https://user:rest-password@catalog:8181"
token = "rest-token-value"
properties = { "header.Authorization" = "header-value" }
"#,
        )
        .unwrap();
        let shown = format!("{file:?}");
        for secret in [
            "ticket-secret-value",
            "token-secret-value",
            "pg-password",
            "s3-secret-value",
            "rest-password",
            "rest-token-value",
            "header-value",
        ] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        // What is not secret still shows.
        for visible in [
            "postgresql://petrel:<redacted>@db:5432/iceberg?connect_timeout=5",
            "s3.secret-access-key",
            "https://user:<redacted>@catalog:8181",
        ] {
            assert!(shown.contains(visible), "{visible} not in {shown}");
        }
        assert_eq!(
            redact_uri_password("http://host:8181/v1"),
            "http://host:8181/v1"
        );
        assert_eq!(
            redact_uri_password("postgresql://u@h/db"),
            "postgresql://u@h/db"
        );
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("1024").unwrap(), 1024);
        assert_eq!(parse_bytes("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_bytes("512 MB").unwrap(), 512_000_000);
        assert!(parse_bytes("12 parsecs").is_err());
    }

    #[test]
    fn printed_default_config_is_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("petrel.toml");
        std::fs::write(&path, DEFAULT_TOML).unwrap();
        let from_file = ServeArgs {
            config: Some(path),
            ..Default::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(from_file, ServeArgs::default().resolve().unwrap());
        assert_eq!(from_file.bind.to_string(), DEFAULT_BIND);
    }

    #[test]
    fn printed_default_config_examples_parse() {
        // The commented-out examples, uncommented, are valid keys too.
        let looks_like_toml = |l: &str| {
            l.starts_with('[') || l.split_once(" = ").is_some_and(|(k, _)| !k.contains(' '))
        };
        let uncommented: String = DEFAULT_TOML
            .lines()
            .filter_map(|l| match l.strip_prefix("# ") {
                Some(example) if looks_like_toml(example) => Some(example),
                _ if l.starts_with('#') => None,
                _ => Some(l),
            })
            .map(|l| format!("{l}\n"))
            .collect();
        let file: FileConfig = toml::from_str(&uncommented).unwrap();
        // filesystem, SQL on SQLite, SQL on PostgreSQL, REST
        assert_eq!(file.catalogs.len(), 4);
        assert_eq!(file.users.len(), 1);
        assert!(file.tls.is_some_and(|t| t.client_ca.is_some()));
        assert!(file.default_catalog.is_some() && file.target_partitions.is_some());
        assert!(file.metrics_addr.is_some());
    }

    #[test]
    fn flags_override_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("petrel.toml");
        std::fs::write(
            &path,
            r#"
bind = "127.0.0.1:6000"
max_concurrent_queries = 3
[[catalog]]
name = "lake"
type = "sql"
path = "/x/catalog.db"
[[user]]
name = "alice"
password_hash = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA"
"#,
        )
        .unwrap();
        let args = ServeArgs {
            config: Some(path),
            bind: Some("127.0.0.1:7000".parse().unwrap()),
            warehouse: Some("/wh".into()),
            ..Default::default()
        };
        let cfg = args.resolve().unwrap();
        assert_eq!(cfg.bind.port(), 7000);
        assert_eq!(cfg.max_concurrent_queries, 3);
        assert_eq!(cfg.catalogs.len(), 2);
        assert_eq!(cfg.catalogs[0].name(), "iceberg");
        assert_eq!(cfg.users[0].name, "alice");
    }

    #[test]
    fn sql_catalog_on_postgres_takes_a_uri() {
        let file: FileConfig = toml::from_str(
            r#"
[[catalog]]
name = "pg"
type = "sql"
uri = "postgresql://petrel:pw@127.0.0.1:5432/lake"
catalog_name = "default"
"#,
        )
        .unwrap();
        assert_eq!(
            file.catalogs,
            vec![CatalogConfig::Sql {
                name: "pg".into(),
                path: None,
                uri: Some("postgresql://petrel:pw@127.0.0.1:5432/lake".into()),
                catalog_name: Some("default".into()),
                warehouse: None,
                storage: BTreeMap::new(),
            }]
        );
    }
}
