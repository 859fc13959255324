//! An Iceberg REST catalog (the REST OpenAPI spec): Polaris, Lakekeeper, Nessie, Gravitino,
//! Glue's and S3 Tables' REST endpoints, `rustberg`, `iceberg-rest-fixture`.
//!
//! Petrel owns a thin client rather than using the `iceberg-catalog-rest` crate: that crate
//! commits only a `TableCommit`, which code outside the `iceberg` crate cannot build, so it
//! cannot carry the metadata Petrel's snapshot producer computes; and its table IO is the
//! crate's own `FileIO`, not Petrel's object_store registry.
//!
//! - [`config`]: the user's settings and `GET /v1/config` discovery (prefix, merged properties).
//! - [`auth`]: static bearer tokens, OAuth2 client credentials refreshed before they expire.
//! - [`client`]: URLs, headers, timeouts, the REST error model.
//! - [`updates`]: a commit as requirements + updates derived from Petrel's new metadata.
//! - [`model`]: the JSON bodies read.
//!
//! Commits (`POST /v1/{prefix}/namespaces/{ns}/tables/{t}`) let the catalog arbitrate: a
//! failed requirement (409) is [`Error::CommitConflict`], which the commit loop retries after
//! reloading and revalidating; a 5xx answer or a lost answer (timeout, reset connection) is
//! [`Error::CommitStateUnknown`], never retried; a request that never reached the server (no
//! connection) and 4xx answers mean nothing was committed. The catalog writes the metadata file
//! itself, so the table returned by a commit is the catalog's answer.
//!
//! Table loads ask for vended credentials (`X-Iceberg-Access-Delegation`); the table's storage
//! properties (catalog properties, then `LoadTableResult.config`, then the matching
//! `storage-credentials`) choose the object stores its files are read through, layered over
//! the catalog's own store settings. Vended S3 keys are [`vended`]'s: one store per table,
//! its keys replaced before they expire, and when S3 refuses them as expired or invalid (the
//! refused request is then sent once more with the new keys).

mod auth;
mod client;
mod config;
mod model;
mod updates;
mod vended;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use async_trait::async_trait;
use iceberg::spec::TableMetadata;
use reqwest::{Method, StatusCode};
use serde_json::json;

use self::auth::TokenSource;
use self::client::{NAMESPACE_SEPARATOR, RestClient};
use self::config::{CatalogProperties, ConfigResponse};
use self::model::{
    GetNamespaceResponse, ListNamespacesResponse, ListTablesResponse, LoadTableResult,
};
use super::metadata_file::{ParsedMetadata, parse_table_metadata};
use super::writes::moved_table_locations;
use super::{Catalog, LoadedTable, Namespace, TableIdent};
use crate::error::{Error, Result};
use crate::io::{StoreConfig, StoreRegistry, TableIo};
use vended::{CREDENTIAL_KEYS, Vended, VendedS3Credentials};

pub use config::RestCatalogConfig;

/// The header asking a REST catalog to vend storage credentials.
const ACCESS_DELEGATION: (&str, &str) = ("X-Iceberg-Access-Delegation", "vended-credentials");
/// Pages of list answers followed at most (a guard against a server repeating its token).
const MAX_PAGES: usize = 10_000;

/// An Iceberg REST catalog.
#[derive(Debug, Clone)]
pub struct RestCatalog {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    name: String,
    client: RestClient,
    properties: CatalogProperties,
    vended_credentials: bool,
    stores: StoreRegistry,
    /// How long vended keys without an expiry are used.
    credentials_max_age: Duration,
    /// The stores of tables whose storage properties add to the catalog's.
    table_stores: Mutex<HashMap<TableStoresKey, TableStores>>,
}

/// Which tables share stores: those with the same storage settings (credentials aside) and,
/// when keys are vended, only the one table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct TableStoresKey {
    vended_to: Option<String>,
    settings: Vec<(String, String)>,
}

#[derive(Debug)]
struct TableStores {
    stores: StoreRegistry,
    vended: Option<Arc<VendedS3Credentials>>,
}

impl RestCatalog {
    /// Connects: fetches a token if credentials are configured, then `GET /v1/config`
    /// (`?warehouse=`) for the prefix and the merged properties. Files are read through
    /// `stores` (plus what each table's storage properties configure).
    pub async fn connect(config: RestCatalogConfig, stores: StoreRegistry) -> Result<Self> {
        let name = config.name.clone();
        let client_props = config.client_properties();
        let uri = config.uri.trim().trim_end_matches('/').to_string();
        let scope = config
            .scope
            .clone()
            .unwrap_or_else(|| "catalog".to_string());
        let token_endpoint = config
            .oauth2_server_uri
            .clone()
            .or_else(|| client_props.get("oauth2-server-uri").cloned())
            .unwrap_or_else(|| format!("{uri}/v1/oauth/tokens"));
        let tokens = TokenSource::new(
            config.credential.as_deref(),
            config.token.as_deref(),
            token_endpoint,
            scope,
        );
        let headers: Vec<(String, String)> = client_props
            .iter()
            .filter_map(|(k, v)| {
                k.strip_prefix("header.")
                    .map(|h| (h.to_string(), v.clone()))
            })
            .collect();
        let mut client = RestClient::new(&name, &uri, config.request_timeout, &headers, tokens)?;

        let query: Vec<(&str, String)> = config
            .warehouse
            .iter()
            .map(|w| ("warehouse", w.clone()))
            .collect();
        let url = client.root_url(&["config"]);
        let reply = client
            .call(Method::GET, url, &query, None, &[], "GET /v1/config")
            .await?;
        let server: ConfigResponse = client.decode(&reply, "GET /v1/config")?;
        let properties = CatalogProperties::merge(client_props, server);
        client.set_prefix(&properties.prefix());
        let credentials_max_age = match properties.get(vended::MAX_AGE_PROPERTY) {
            Some(ms) => Duration::from_millis(ms.trim().parse().map_err(|_| {
                Error::InvalidArgument(format!(
                    "REST catalog {name}: {} = {ms:?} is not a number of milliseconds",
                    vended::MAX_AGE_PROPERTY
                ))
            })?),
            None => vended::DEFAULT_MAX_AGE,
        };
        Ok(Self {
            inner: Arc::new(Inner {
                name,
                client,
                properties,
                vended_credentials: config.vended_credentials,
                stores,
                credentials_max_age,
                table_stores: Mutex::default(),
            }),
        })
    }

    /// The catalog's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// A merged catalog property (server defaults < client < server overrides).
    pub fn property(&self, key: &str) -> Option<&str> {
        self.inner.properties.get(key)
    }

    fn client(&self) -> &RestClient {
        &self.inner.client
    }

    fn namespace_segment(namespace: &Namespace) -> String {
        namespace.levels().join(NAMESPACE_SEPARATOR)
    }

    fn table_url(&self, ident: &TableIdent) -> reqwest::Url {
        self.client().url(&[
            "namespaces",
            &Self::namespace_segment(&ident.namespace),
            "tables",
            &ident.name,
        ])
    }

    /// Registers an existing table by its metadata file (`POST .../register`).
    pub async fn register_table(
        &self,
        ident: &TableIdent,
        metadata_location: &str,
    ) -> Result<LoadedTable> {
        let body = json!({"name": ident.name, "metadata-location": metadata_location});
        self.post_table(
            ident,
            "register",
            &body,
            &format!("registering table {ident}"),
        )
        .await
    }

    /// POSTs `body` to `namespaces/{ns}/{endpoint}` (create or register), whose answer is a
    /// LoadTableResult, and loads the table from it.
    async fn post_table(
        &self,
        ident: &TableIdent,
        endpoint: &str,
        body: &serde_json::Value,
        what: &str,
    ) -> Result<LoadedTable> {
        let url = self.client().url(&[
            "namespaces",
            &Self::namespace_segment(&ident.namespace),
            endpoint,
        ]);
        let reply = self
            .client()
            .call(Method::POST, url, &[], Some(body), &self.delegation(), what)
            .await?;
        let result: LoadTableResult = self.client().decode(&reply, what)?;
        self.loaded(ident, result)
    }

    fn delegation(&self) -> Vec<(&'static str, &'static str)> {
        if self.inner.vended_credentials {
            vec![ACCESS_DELEGATION]
        } else {
            Vec::new()
        }
    }

    /// The object stores a table's files are read through, given its storage properties
    /// (the catalog's and its own): the catalog's store settings with these over them. Tables
    /// with the same settings share stores; vended S3 keys make a table's stores its own, the
    /// keys handed to the stores' credential provider (which this load's keys refresh).
    fn table_stores(
        &self,
        ident: &TableIdent,
        properties: &HashMap<String, String>,
    ) -> Result<StoreRegistry> {
        let table = ident.to_string();
        // Keys the catalog's own properties hold (static, configured) are not vended.
        let vended = match properties.get(vended::ACCESS_KEY_ID) {
            Some(key) if self.property(vended::ACCESS_KEY_ID) != Some(key.as_str()) => {
                Vended::from_properties(&table, properties, self.inner.credentials_max_age)?
            }
            _ => None,
        };
        let mut settings: Vec<(String, String)> = properties
            .iter()
            .filter(|(k, _)| vended.is_none() || !CREDENTIAL_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        settings.sort();
        let key = TableStoresKey {
            vended_to: vended.as_ref().map(|_| table.clone()),
            settings,
        };
        let mut cache = self
            .inner
            .table_stores
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(cached) = cache.get(&key) {
            if let (Some(provider), Some(vended)) = (&cached.vended, vended) {
                provider.offer(vended);
            }
            return Ok(cached.stores.clone());
        }
        let own = StoreConfig::from_iceberg_properties(&key.settings.iter().cloned().collect())?;
        let mut config = self.inner.stores.config().merged_with(&own);
        let provider = vended.map(|vended| {
            let provider = Arc::new(VendedS3Credentials::new(
                &self.inner.name,
                &table,
                vended,
                self.inner.credentials_max_age,
                self.refresh_of(ident),
            ));
            config = config
                .clone()
                .with_renewable_s3_credentials(Arc::clone(&provider));
            provider
        });
        let stores = StoreRegistry::new(config);
        cache.insert(
            key,
            TableStores {
                stores: stores.clone(),
                vended: provider,
            },
        );
        Ok(stores)
    }

    /// How a table's vended keys are fetched again: a table load, its storage properties.
    /// Holds the catalog weakly (the catalog holds the table's stores).
    fn refresh_of(&self, ident: &TableIdent) -> vended::Refresh {
        let catalog: Weak<Inner> = Arc::downgrade(&self.inner);
        let ident = ident.clone();
        Arc::new(move || {
            let catalog = catalog.upgrade();
            let ident = ident.clone();
            Box::pin(async move {
                let Some(inner) = catalog else {
                    return Err(Error::InvalidArgument(format!(
                        "table {ident}: its REST catalog is closed"
                    )));
                };
                RestCatalog { inner }.storage_properties(&ident).await
            })
        })
    }

    /// Loads a table for its storage properties only (vended keys asked for).
    async fn storage_properties(&self, ident: &TableIdent) -> Result<HashMap<String, String>> {
        let result = self.load_result(ident).await?;
        let location = result
            .metadata
            .get("location")
            .and_then(|l| l.as_str())
            .unwrap_or_default()
            .to_string();
        let mut storage = self.inner.properties.merged.clone();
        storage.extend(result.storage_properties(&location));
        Ok(storage)
    }

    /// `GET .../tables/{t}` with vended credentials asked for.
    async fn load_result(&self, ident: &TableIdent) -> Result<LoadTableResult> {
        let what = format!("table {ident}");
        let reply = self
            .client()
            .call(
                Method::GET,
                self.table_url(ident),
                &[],
                None,
                &self.delegation(),
                &what,
            )
            .await?;
        self.client().decode(&reply, &what)
    }

    /// The table's stores, for tests: how often its vended keys were fetched again (about to
    /// expire, or refused by the store).
    pub fn vended_credential_refreshes(&self, ident: &TableIdent) -> u64 {
        let table = ident.to_string();
        self.inner
            .table_stores
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(k, _)| k.vended_to.as_deref() == Some(table.as_str()))
            .filter_map(|(_, v)| v.vended.as_ref().map(|p| p.refreshes()))
            .sum()
    }

    /// A `LoadTableResult` as a loaded table.
    fn loaded(&self, ident: &TableIdent, result: LoadTableResult) -> Result<LoadedTable> {
        self.loaded_with_io(ident, result, None)
    }

    /// As [`RestCatalog::loaded`], reading through `io` when given.
    fn loaded_with_io(
        &self,
        ident: &TableIdent,
        result: LoadTableResult,
        io: Option<TableIo>,
    ) -> Result<LoadedTable> {
        let table = ident.to_string();
        let metadata_location =
            result
                .metadata_location
                .clone()
                .ok_or_else(|| Error::CatalogService {
                    catalog: self.inner.name.clone(),
                    status: None,
                    message: format!("table {ident}: the answer names no metadata-location"),
                })?;
        // The metadata comes in the answer: parsed as a metadata file would be.
        let bytes = serde_json::to_vec(&result.metadata)
            .map_err(|e| Error::corrupt(&table, "metadata file", &metadata_location, e))?;
        let (metadata, refs) = parse_table_metadata(&table, &metadata_location, &bytes)?;
        let parsed = ParsedMetadata {
            metadata: Arc::new(metadata),
            refs: Arc::new(refs),
        };
        let io = match io {
            Some(io) => io,
            None => {
                let mut storage = self.inner.properties.merged.clone();
                storage.extend(result.storage_properties(parsed.metadata.location()));
                // A table registered from files that moved (the corpus) reads where its
                // metadata is.
                let locations = moved_table_locations(&metadata_location, &parsed.metadata);
                TableIo::new(self.table_stores(ident, &storage)?, locations)
            }
        };
        Ok(LoadedTable::new(
            ident.clone(),
            metadata_location,
            parsed.metadata,
            parsed.refs,
            io,
        ))
    }

    /// The children of `parent` (top level for `None`), following pages.
    async fn child_namespaces(&self, parent: Option<&Namespace>) -> Result<Vec<Namespace>> {
        let mut out = Vec::new();
        let mut page: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut query: Vec<(&str, String)> = Vec::new();
            if let Some(parent) = parent {
                query.push(("parent", Self::namespace_segment(parent)));
            }
            if let Some(token) = &page {
                query.push(("pageToken", token.clone()));
            }
            let url = self.client().url(&["namespaces"]);
            let reply = self
                .client()
                .call(Method::GET, url, &query, None, &[], "listing namespaces")
                .await?;
            let list: ListNamespacesResponse =
                self.client().decode(&reply, "listing namespaces")?;
            out.extend(list.namespaces.into_iter().map(Namespace::new));
            match list.next_page_token.filter(|t| !t.is_empty()) {
                Some(next) if Some(&next) != page.as_ref() => page = Some(next),
                _ => break,
            }
        }
        Ok(out)
    }
}

#[async_trait]
impl Catalog for RestCatalog {
    async fn list_namespaces(&self) -> Result<Vec<Namespace>> {
        let mut all = Vec::new();
        let mut frontier = self.child_namespaces(None).await?;
        let mut depth = 0;
        while !frontier.is_empty() && depth < 16 {
            depth += 1;
            let mut next = Vec::new();
            for namespace in &frontier {
                for child in self.child_namespaces(Some(namespace)).await? {
                    // Servers without `parent` support answer the top level again.
                    if child.levels().len() > namespace.levels().len()
                        && child.levels().starts_with(namespace.levels())
                    {
                        next.push(child);
                    }
                }
            }
            all.append(&mut frontier);
            frontier = next;
        }
        all.sort();
        all.dedup();
        Ok(all)
    }

    async fn namespace_exists(&self, namespace: &Namespace) -> Result<bool> {
        let url = self
            .client()
            .url(&["namespaces", &Self::namespace_segment(namespace)]);
        let what = format!("namespace {namespace}");
        match self
            .client()
            .call(Method::GET, url, &[], None, &[], &what)
            .await
        {
            Ok(_) => Ok(true),
            Err(Error::NotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn list_tables(&self, namespace: &Namespace) -> Result<Vec<TableIdent>> {
        let mut out = Vec::new();
        let mut page: Option<String> = None;
        let what = format!("listing the tables of namespace {namespace}");
        for _ in 0..MAX_PAGES {
            let query: Vec<(&str, String)> =
                page.iter().map(|t| ("pageToken", t.clone())).collect();
            let url =
                self.client()
                    .url(&["namespaces", &Self::namespace_segment(namespace), "tables"]);
            let reply = self
                .client()
                .call(Method::GET, url, &query, None, &[], &what)
                .await?;
            let list: ListTablesResponse = self.client().decode(&reply, &what)?;
            out.extend(
                list.identifiers
                    .into_iter()
                    .map(|t| TableIdent::new(Namespace::new(t.namespace), t.name)),
            );
            match list.next_page_token.filter(|t| !t.is_empty()) {
                Some(next) if Some(&next) != page.as_ref() => page = Some(next),
                _ => break,
            }
        }
        out.sort();
        Ok(out)
    }

    async fn load_table(&self, ident: &TableIdent) -> Result<LoadedTable> {
        let result = self.load_result(ident).await?;
        self.loaded(ident, result)
    }

    async fn create_namespace(&self, namespace: &Namespace, if_not_exists: bool) -> Result<()> {
        if namespace.levels().is_empty() || namespace.levels().iter().any(String::is_empty) {
            return Err(Error::InvalidArgument(format!(
                "namespace {namespace:?}: every level must be non-empty"
            )));
        }
        let url = self.client().url(&["namespaces"]);
        let body = json!({"namespace": namespace.levels(), "properties": {}});
        let what = format!("namespace {namespace}");
        match self
            .client()
            .call(Method::POST, url, &[], Some(&body), &[], &what)
            .await
        {
            Ok(_) => Ok(()),
            Err(Error::AlreadyExists(_)) if if_not_exists => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn drop_namespace(&self, namespace: &Namespace) -> Result<()> {
        let url = self
            .client()
            .url(&["namespaces", &Self::namespace_segment(namespace)]);
        let what = format!("namespace {namespace}");
        match self
            .client()
            .send(Method::DELETE, url, &[], None, &[])
            .await?
        {
            Ok(reply) if reply.status.is_success() => Ok(()),
            Ok(reply) if reply.status == StatusCode::CONFLICT => Err(Error::NamespaceNotEmpty {
                namespace: namespace.dotted(),
                remaining: RestClient::detail(&reply),
            }),
            Ok(reply) => Err(self.client().error(&reply, &what)),
            Err(t) => Err(Error::CatalogService {
                catalog: self.inner.name.clone(),
                status: None,
                message: format!("dropping {what}: {}", t.message),
            }),
        }
    }

    async fn default_table_location(&self, ident: &TableIdent) -> Result<String> {
        let url = self
            .client()
            .url(&["namespaces", &Self::namespace_segment(&ident.namespace)]);
        let what = format!("namespace {}", ident.namespace);
        let reply = self
            .client()
            .call(Method::GET, url, &[], None, &[], &what)
            .await?;
        let namespace: GetNamespaceResponse = self.client().decode(&reply, &what)?;
        if let Some(location) = namespace
            .properties
            .as_ref()
            .and_then(|p| p.get("location"))
            .filter(|l| !l.trim().is_empty())
        {
            return Ok(format!("{}/{}", location.trim_end_matches('/'), ident.name));
        }
        match self.property("warehouse").filter(|w| w.contains("://")) {
            Some(warehouse) => Ok(format!(
                "{}/{}/{}",
                warehouse.trim_end_matches('/'),
                ident.namespace.levels().join("/"),
                ident.name
            )),
            None => Err(Error::InvalidArgument(format!(
                "REST catalog {}: no location for new table {ident}: its namespace has no \
                 `location` property and the catalog's warehouse is not a URL; give the table a \
                 LOCATION",
                self.inner.name
            ))),
        }
    }

    async fn create_table(
        &self,
        ident: &TableIdent,
        metadata: TableMetadata,
    ) -> Result<LoadedTable> {
        let mut properties = metadata.properties().clone();
        properties.insert(
            "format-version".to_string(),
            (metadata.format_version() as u8).to_string(),
        );
        let body = json!({
            "name": ident.name,
            "location": metadata.location(),
            "schema": metadata.current_schema(),
            "partition-spec": metadata.default_partition_spec().as_ref().clone().into_unbound(),
            "write-order": metadata.default_sort_order(),
            "properties": properties,
            "stage-create": false,
        });
        self.post_table(ident, "tables", &body, &format!("table {ident}"))
            .await
    }

    async fn drop_table(&self, ident: &TableIdent, purge: bool) -> Result<()> {
        let what = format!("table {ident}");
        self.client()
            .call(
                Method::DELETE,
                self.table_url(ident),
                &[("purgeRequested", purge.to_string())],
                None,
                &[],
                &what,
            )
            .await?;
        Ok(())
    }

    async fn commit_table(
        &self,
        base: &LoadedTable,
        metadata: TableMetadata,
    ) -> Result<LoadedTable> {
        let ident = base.ident();
        let table = ident.to_string();
        let changes = updates::table_changes(&table, base.metadata(), &metadata)?;
        if changes.updates.is_empty() {
            // Nothing changes (REST servers refuse an empty commit): the base stays current.
            return Ok(base.clone());
        }
        let body = json!({
            "identifier": {"namespace": ident.namespace.levels(), "name": ident.name},
            "requirements": changes.requirements,
            "updates": changes.updates,
        });
        let reply = self
            .client()
            .send(Method::POST, self.table_url(ident), &[], Some(&body), &[])
            .await?;
        let catalog = &self.inner.name;
        let reply = match reply {
            Ok(reply) => reply,
            Err(t) if t.maybe_processed => {
                return Err(Error::CommitStateUnknown {
                    table,
                    message: format!("REST catalog {catalog}: {}", t.message),
                });
            }
            Err(t) => {
                return Err(Error::CatalogService {
                    catalog: catalog.clone(),
                    status: None,
                    message: format!("committing to table {ident}: {}", t.message),
                });
            }
        };
        let status = reply.status;
        if status.is_success() {
            let what = format!("committing to table {ident}");
            let result: LoadTableResult = match self.client().decode(&reply, &what) {
                Ok(result) => result,
                // The catalog said yes, with an answer we cannot read.
                Err(e) => {
                    return Err(Error::CommitStateUnknown {
                        table,
                        message: e.to_string(),
                    });
                }
            };
            // A commit answer carries no config: keep the base's IO.
            return self.loaded_with_io(ident, result, Some(base.io().clone()));
        }
        let detail = RestClient::detail(&reply);
        Err(match status {
            StatusCode::CONFLICT => Error::CommitConflict {
                table,
                message: format!("REST catalog {catalog} refused the commit: {detail}"),
            },
            s if s.is_server_error() => Error::CommitStateUnknown {
                table,
                message: format!("REST catalog {catalog} answered {s}: {detail}"),
            },
            _ => self
                .client()
                .error(&reply, &format!("committing to table {ident}")),
        })
    }
}
