//! Wiring: catalogs from the configuration, the engine, auth, TLS, the listener, the gRPC
//! health service, the metrics endpoint, and graceful shutdown.
//!
//! Health (`grpc.health.v1.Health` on the Flight port, no authentication): the server (`""`)
//! and `arrow.flight.protocol.FlightService` are SERVING once the catalogs are open and the
//! port listens, and NOT_SERVING from the shutdown signal on, while running calls finish.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arrow_flight::flight_service_server::FlightServiceServer;
use petrel_table_provider::ColumnCache;
use petrel_table_provider::catalog::{
    CachingCatalog, Catalog, FileSystemCatalog, RestCatalog, RestCatalogConfig, SqlCatalog,
};
use petrel_table_provider::io::{StoreConfig, StoreRegistry};
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic_health::ServingStatus;

use crate::auth::Authenticator;
use crate::config::{CatalogConfig, Secret, ServerConfig};
use crate::engine::{CatalogSource, EngineOptions, QueryEngine};
use crate::flight_sql::PetrelFlightSql;
use crate::flight_sql::service::PetrelService;
use crate::memory::ServerMemory;
use crate::proto::petrel::SessionDefaults;
use crate::session::SessionStore;
use crate::tickets::TicketSigner;

/// Largest gRPC message accepted or sent (prepared-statement handles carry bound parameters).
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
/// The decoded-column cache takes, by default, one byte in this many of the server pool's.
const DEFAULT_COLUMN_CACHE_SHARE: usize = 8;

/// Opens one configured catalog.
pub async fn open_catalog(cfg: &CatalogConfig) -> Result<Arc<dyn Catalog>, String> {
    match cfg {
        CatalogConfig::Filesystem {
            name,
            warehouse,
            storage,
        } => {
            let stores = store_registry(name, storage)?;
            let text = warehouse.to_string_lossy();
            // An object store URL is used as given; a local directory must exist.
            let root = if is_url(&text) {
                text.into_owned()
            } else {
                let dir = warehouse.canonicalize().map_err(|e| {
                    format!("catalog {name}: warehouse {}: {e}", warehouse.display())
                })?;
                dir.to_string_lossy().into_owned()
            };
            let c = FileSystemCatalog::with_stores(&root, stores)
                .map_err(|e| format!("catalog {name}: {e}"))?;
            Ok(Arc::new(c))
        }
        CatalogConfig::Sql {
            name,
            path,
            uri,
            catalog_name,
            warehouse,
            storage,
        } => {
            let stores = store_registry(name, storage)?;
            let rows = catalog_name.as_deref().unwrap_or(name);
            let mut c = match (path, uri) {
                (Some(path), None) => SqlCatalog::open_sqlite_with_stores(path, rows, stores),
                (None, Some(uri)) => SqlCatalog::connect_postgres(uri, rows, stores).await,
                _ => {
                    return Err(format!(
                        "catalog {name}: a sql catalog needs exactly one of `path` (SQLite) \
                         and `uri` (PostgreSQL)"
                    ));
                }
            }
            .map_err(|e| format!("catalog {name}: {e}"))?;
            if let Some(warehouse) = warehouse {
                c = c
                    .with_warehouse(warehouse)
                    .map_err(|e| format!("catalog {name}: warehouse {warehouse}: {e}"))?;
            }
            Ok(Arc::new(c))
        }
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
        } => {
            let mut rest = RestCatalogConfig::new(name.clone(), uri.clone());
            rest.warehouse = warehouse.clone();
            rest.credential = credential.as_ref().map(|s| s.0.clone());
            rest.token = token.as_ref().map(|s| s.0.clone());
            rest.scope = scope.clone();
            rest.prefix = prefix.clone();
            rest.oauth2_server_uri = oauth2_server_uri.clone();
            rest.vended_credentials = vended_credentials.unwrap_or(true);
            rest.request_timeout = request_timeout_secs.map(Duration::from_secs);
            rest.properties = properties.clone().into_iter().collect();
            let c = RestCatalog::connect(rest, StoreRegistry::default())
                .await
                .map_err(|e| format!("catalog {name}: {e}"))?;
            Ok(Arc::new(c))
        }
    }
}

/// Whether a warehouse is given as a URL (`s3://…`, `file:///…`) rather than a path.
fn is_url(warehouse: &str) -> bool {
    warehouse
        .split_once("://")
        .is_some_and(|(scheme, _)| !scheme.is_empty() && !scheme.contains('/'))
}

/// The object stores of catalog `name`, configured by its `[catalog.storage]` table.
fn store_registry(
    name: &str,
    storage: &std::collections::BTreeMap<String, String>,
) -> Result<StoreRegistry, String> {
    let config = StoreConfig::from_settings(storage)
        .map_err(|e| format!("catalog {name}: [catalog.storage]: {e}"))?;
    Ok(StoreRegistry::new(config))
}

/// Builds the engine and the session defaults from the configuration (creating the embedded
/// default when no catalog is configured).
pub async fn build_engine(
    cfg: &ServerConfig,
) -> Result<(Arc<QueryEngine>, SessionDefaults), String> {
    let mut catalog_cfgs = cfg.catalogs.clone();
    let mut default_schema = cfg.default_schema.clone();
    if catalog_cfgs.is_empty() {
        let embedded = crate::demo::ensure_embedded(&cfg.data_dir).await?;
        default_schema = default_schema.or(Some(crate::demo::DEMO_NAMESPACE.to_string()));
        catalog_cfgs.push(embedded);
    }
    let mut catalogs = Vec::new();
    for c in &catalog_cfgs {
        let mut catalog = open_catalog(c).await?;
        if cfg.table_cache_ms > 0 {
            let ttl = Duration::from_millis(cfg.table_cache_ms);
            catalog = Arc::new(CachingCatalog::new(catalog, ttl));
        }
        catalogs.push((c.name().to_string(), CatalogSource::Iceberg(catalog)));
    }
    let default_catalog = cfg
        .default_catalog
        .clone()
        .unwrap_or_else(|| catalogs[0].0.clone());
    let source = catalogs
        .iter()
        .find(|(n, _)| *n == default_catalog)
        .map(|(_, s)| s.clone())
        .ok_or_else(|| format!("default catalog {default_catalog:?} is not configured"))?;
    let default_schema = match default_schema {
        Some(s) => s,
        None => guess_default_schema(&source).await,
    };
    let memory = ServerMemory::new(cfg.memory_limit, cfg.query_memory_limit);
    let column_cache = ColumnCache::new(
        cfg.column_cache
            .unwrap_or(memory.server_limit() / DEFAULT_COLUMN_CACHE_SHARE) as u64,
    );
    let engine = QueryEngine::new(
        catalogs,
        EngineOptions {
            target_partitions: cfg.target_partitions,
            memory,
            max_parameter_rows: cfg.max_parameter_rows,
            max_concurrent_queries: cfg.max_concurrent_queries,
            queue_timeout: Duration::from_secs(cfg.queue_timeout_secs),
            read_only: cfg.read_only,
            cluster: cfg.engine.clone(),
            column_cache,
            spill_limit: cfg
                .spill_limit
                .unwrap_or_else(|| crate::spill::default_spill_limit(&std::env::temp_dir())),
        },
    );
    Ok((
        Arc::new(engine),
        SessionDefaults {
            catalog: default_catalog,
            schema: default_schema,
        },
    ))
}

/// `default` if the catalog has it, else its only (or first) namespace.
async fn guess_default_schema(source: &CatalogSource) -> String {
    if let CatalogSource::Iceberg(c) = source
        && let Ok(namespaces) = c.list_namespaces().await
    {
        let names: Vec<String> = namespaces.iter().map(|n| n.dotted()).collect();
        if names.iter().any(|n| n == "default") {
            return "default".into();
        }
        if let Some(first) = names.first() {
            return first.clone();
        }
    }
    "default".into()
}

/// Builds the gRPC service for an engine (used by `serve` and by in-process tests/benches).
pub fn service(
    engine: Arc<QueryEngine>,
    defaults: SessionDefaults,
    auth: Arc<Authenticator>,
) -> FlightServiceServer<PetrelService> {
    service_with(engine, SessionStore::new(defaults), auth)
}

/// [`service`] with its session store (capacity); tickets are signed with `auth`'s signer.
pub fn service_with(
    engine: Arc<QueryEngine>,
    sessions: SessionStore,
    auth: Arc<Authenticator>,
) -> FlightServiceServer<PetrelService> {
    service_sharing(engine, Arc::new(sessions), auth)
}

/// [`service_with`] over a session store shared with others (the metrics endpoint).
pub fn service_sharing(
    engine: Arc<QueryEngine>,
    sessions: Arc<SessionStore>,
    auth: Arc<Authenticator>,
) -> FlightServiceServer<PetrelService> {
    let tickets = Arc::clone(auth.tickets());
    let inner = PetrelFlightSql::new(engine, sessions, tickets);
    FlightServiceServer::new(PetrelService::new(inner, auth))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
}

/// Serves until `shutdown` resolves, then lets running calls finish.
pub async fn serve(
    cfg: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    crate::telemetry::set_slow_query_threshold(cfg.slow_query_ms);
    let auth = Arc::new(
        Authenticator::new(
            &cfg.users,
            cfg.token_secret.as_ref().map(Secret::expose),
            Duration::from_secs(cfg.token_ttl_secs),
        )?
        .with_ticket_signer(TicketSigner::from_config(
            cfg.ticket_secret.as_ref().map(Secret::expose),
        )?),
    );
    if !auth.enabled() && !cfg.bind.ip().is_loopback() && !cfg.allow_unauthenticated_remote {
        return Err(format!(
            "refusing to serve {} without authentication: configure [[user]] entries \
             (`petrel hash-password`), bind to 127.0.0.1, or pass \
             --allow-unauthenticated-remote",
            cfg.bind
        ));
    }
    let (engine, defaults) = build_engine(&cfg).await?;
    let sessions = Arc::new(SessionStore::new(defaults.clone()).with_capacity(cfg.max_sessions));
    let metrics = match cfg.metrics_addr {
        Some(addr) => {
            let listener = crate::metrics::http::bind(addr).await?;
            let bound = listener.local_addr().map_err(|e| e.to_string())?;
            let sources = crate::metrics::Sources {
                engine: Arc::clone(&engine),
                sessions: Arc::clone(&sessions),
            };
            tracing::info!(address = %bound, "metrics endpoint listening");
            eprintln!("petrel metrics on http://{bound}/metrics");
            Some(tokio::spawn(crate::metrics::http::serve(listener, sources)))
        }
        None => None,
    };
    let listener = TcpListener::bind(cfg.bind)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", cfg.bind))?;
    let addr: SocketAddr = listener.local_addr().map_err(|e| e.to_string())?;
    let mut builder = Server::builder();
    if let Some(tls) = &cfg.tls {
        let cert = std::fs::read(&tls.cert)
            .map_err(|e| format!("TLS certificate {}: {e}", tls.cert.display()))?;
        let key =
            std::fs::read(&tls.key).map_err(|e| format!("TLS key {}: {e}", tls.key.display()))?;
        let mut tls_cfg = ServerTlsConfig::new().identity(Identity::from_pem(cert, key));
        if let Some(ca) = &tls.client_ca {
            let ca =
                std::fs::read(ca).map_err(|e| format!("TLS client CA {}: {e}", ca.display()))?;
            tls_cfg = tls_cfg.client_ca_root(Certificate::from_pem(ca));
        }
        builder = builder
            .tls_config(tls_cfg)
            .map_err(|e| format!("TLS configuration: {e}"))?;
    }
    let scheme = if cfg.tls.is_some() {
        "grpc+tls"
    } else {
        "grpc"
    };
    tracing::info!(
        address = %addr,
        catalog = %defaults.catalog,
        schema = %defaults.schema,
        auth = auth.enabled(),
        tls = cfg.tls.is_some(),
        "petrel listening"
    );
    eprintln!(
        "petrel {} listening on {scheme}://{addr}",
        crate::SERVER_VERSION
    );
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<FlightServiceServer<PetrelService>>()
        .await;
    health.set_service_status("", ServingStatus::Serving).await;
    let shutdown = async move {
        shutdown.await;
        health
            .set_not_serving::<FlightServiceServer<PetrelService>>()
            .await;
        health
            .set_service_status("", ServingStatus::NotServing)
            .await;
    };
    if let Some(path) = &cfg.port_file {
        std::fs::write(path, addr.to_string())
            .map_err(|e| format!("port file {}: {e}", path.display()))?;
    }
    let served = builder
        .add_service(health_service)
        .add_service(service_sharing(engine, sessions, auth))
        .serve_with_incoming_shutdown(incoming(listener), shutdown)
        .await
        .map_err(|e| format!("server error: {e}"));
    if let Some(task) = metrics {
        task.abort();
    }
    served?;
    tracing::info!("petrel stopped");
    Ok(())
}

/// Accepted connections with TCP_NODELAY: a Flight SQL query is two small request/response
/// exchanges (GetFlightInfo, then DoGet), which Nagle's algorithm and delayed ACKs would
/// otherwise hold for ~40 ms each.
pub fn incoming(listener: TcpListener) -> TcpIncoming {
    TcpIncoming::from(listener).with_nodelay(Some(true))
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutdown signal received; finishing running calls");
}
