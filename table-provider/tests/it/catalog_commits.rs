//! Catalog writes on both catalogs (the SQL catalog on SQLite and on PostgreSQL): namespaces,
//! CREATE / DROP TABLE, and commits with optimistic concurrency (exactly one of several commits
//! from one base wins; the losers leave no metadata file behind). The SQL catalog's commits are
//! read back by PyIceberg, and PyIceberg's commits by Petrel.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use iceberg::spec::{
    FormatVersion, NestedField, PrimitiveType, Schema, SortOrder, TableMetadata,
    TableMetadataBuilder, Type, UnboundPartitionSpec,
};
use petrel_table_provider::{
    Catalog, Error, FileSystemCatalog, LoadedTable, Namespace, SqlCatalog, TableIdent,
};
use tempfile::TempDir;

fn schema() -> Schema {
    Schema::builder()
        .with_fields(vec![
            NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(2, "name", Type::Primitive(PrimitiveType::String)).into(),
            NestedField::optional(3, "price", Type::Primitive(PrimitiveType::Double)).into(),
            NestedField::optional(4, "ts", Type::Primitive(PrimitiveType::Timestamp)).into(),
        ])
        .build()
        .expect("schema")
}

/// A new table's first metadata at `location`.
fn new_metadata(location: &str) -> TableMetadata {
    TableMetadataBuilder::new(
        schema(),
        UnboundPartitionSpec::builder().build(),
        SortOrder::unsorted_order(),
        location.to_string(),
        FormatVersion::V2,
        HashMap::from([("created-by".to_string(), "petrel-test".to_string())]),
    )
    .expect("builder")
    .build()
    .expect("metadata")
    .metadata
}

/// `base`'s metadata with `properties` set (the metadata log records `base`'s file).
fn with_properties(base: &LoadedTable, properties: &[(&str, &str)]) -> TableMetadata {
    TableMetadataBuilder::new_from_metadata(
        (**base.metadata()).clone(),
        Some(base.metadata_location().to_string()),
    )
    .set_properties(
        properties
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
    .expect("properties")
    .build()
    .expect("metadata")
    .metadata
}

/// The local file of a `file:` location.
fn local(location: &str) -> PathBuf {
    PathBuf::from(format!(
        "/{}",
        location.trim_start_matches("file:").trim_start_matches('/')
    ))
}

/// The metadata JSON files in a directory (sorted names).
fn metadata_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.contains(".metadata.json"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Every file under a directory (none when it does not exist).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

fn file_name(location: &str) -> String {
    location.rsplit('/').next().expect("name").to_string()
}

/// What both catalogs must do alike (`hadoop`: the filesystem catalog's file names and drop).
async fn lifecycle(catalog: Arc<dyn Catalog>, hadoop: bool) {
    let ns = Namespace::new(vec!["sales".into()]);
    catalog.create_namespace(&ns, false).await.expect("create");
    assert!(matches!(
        catalog.create_namespace(&ns, false).await,
        Err(Error::AlreadyExists(_))
    ));
    catalog
        .create_namespace(&ns, true)
        .await
        .expect("if not exists");
    assert!(catalog.namespace_exists(&ns).await.expect("exists"));
    assert!(catalog.list_namespaces().await.expect("list").contains(&ns));

    let ident = TableIdent::new(ns.clone(), "orders");
    let location = catalog
        .default_table_location(&ident)
        .await
        .expect("location");
    assert!(location.ends_with("/sales/orders"), "{location}");

    // Creation needs the namespace.
    let elsewhere = TableIdent::new(Namespace::new(vec!["nope".into()]), "orders");
    assert!(
        catalog
            .create_table(&elsewhere, new_metadata(&location))
            .await
            .unwrap_err()
            .is_not_found()
    );

    let created = catalog
        .create_table(&ident, new_metadata(&location))
        .await
        .expect("create table");
    let first_name = file_name(created.metadata_location());
    if hadoop {
        assert_eq!(first_name, "v1.metadata.json");
        let hint = local(&format!("{location}/metadata/version-hint.text"));
        assert_eq!(std::fs::read_to_string(hint).expect("hint"), "1");
    } else {
        assert!(first_name.starts_with("00000-"), "{first_name}");
    }
    assert!(matches!(
        catalog.create_table(&ident, new_metadata(&location)).await,
        Err(Error::AlreadyExists(_))
    ));
    assert_eq!(
        catalog.list_tables(&ns).await.expect("tables"),
        vec![ident.clone()]
    );
    let metadata_dir = local(&format!("{location}/metadata"));
    assert_eq!(metadata_files(&metadata_dir).len(), 1);

    // Load, commit a property, load again.
    let loaded = catalog.load_table(&ident).await.expect("load");
    assert_eq!(loaded.metadata_location(), created.metadata_location());
    assert_eq!(
        loaded
            .metadata()
            .current_schema()
            .as_struct()
            .fields()
            .len(),
        4
    );
    let committed = catalog
        .commit_table(&loaded, with_properties(&loaded, &[("owner", "petrel")]))
        .await
        .expect("commit");
    let second_name = file_name(committed.metadata_location());
    if hadoop {
        assert_eq!(second_name, "v2.metadata.json");
    } else {
        assert!(second_name.starts_with("00001-"), "{second_name}");
    }
    let reloaded = catalog.load_table(&ident).await.expect("reload");
    assert_eq!(reloaded.metadata_location(), committed.metadata_location());
    assert_eq!(
        reloaded
            .metadata()
            .properties()
            .get("owner")
            .map(String::as_str),
        Some("petrel")
    );
    assert_eq!(
        reloaded
            .metadata()
            .metadata_log()
            .iter()
            .map(|l| file_name(&l.metadata_file))
            .collect::<Vec<_>>(),
        vec![first_name.clone()]
    );

    // A stale base: committing over the first version again is a conflict, and leaves nothing.
    let stale = catalog
        .commit_table(&loaded, with_properties(&loaded, &[("owner", "late")]))
        .await;
    assert!(
        matches!(stale, Err(Error::CommitConflict { .. })),
        "{stale:?}"
    );
    assert_eq!(metadata_files(&metadata_dir).len(), 2);

    // Eight commits racing from one base: exactly one wins, the others conflict and leave no
    // metadata file behind.
    let base = catalog.load_table(&ident).await.expect("base");
    let attempts = (0..8).map(|i| {
        let catalog = Arc::clone(&catalog);
        let base = base.clone();
        tokio::spawn(async move {
            let value = format!("writer-{i}");
            let metadata = with_properties(&base, &[("owner", value.as_str())]);
            catalog.commit_table(&base, metadata).await
        })
    });
    let results = futures::future::join_all(attempts).await;
    let mut winners = Vec::new();
    for result in results {
        match result.expect("task") {
            Ok(table) => winners.push(table),
            Err(Error::CommitConflict { .. }) => {}
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one commit wins");
    assert_eq!(metadata_files(&metadata_dir).len(), 3);
    let current = catalog.load_table(&ident).await.expect("current");
    assert_eq!(current.metadata_location(), winners[0].metadata_location());
    assert_eq!(
        current.metadata().properties().get("owner"),
        winners[0].metadata().properties().get("owner")
    );

    // A second table; dropping the namespace is refused while tables are left.
    let other = TableIdent::new(ns.clone(), "returns");
    let other_location = catalog.default_table_location(&other).await.expect("loc");
    catalog
        .create_table(&other, new_metadata(&other_location))
        .await
        .expect("create other");
    match catalog.drop_namespace(&ns).await {
        Err(Error::NamespaceNotEmpty { remaining, .. }) => {
            assert!(remaining.contains("orders"), "{remaining}");
            assert!(remaining.contains("returns"), "{remaining}");
        }
        other => panic!("expected NamespaceNotEmpty, got {other:?}"),
    }

    // Drop with purge deletes the files; without purge the SQL catalog keeps them.
    std::fs::create_dir_all(local(&format!("{location}/data"))).expect("data dir");
    std::fs::write(local(&format!("{location}/data/f.parquet")), b"x").expect("data file");
    catalog.drop_table(&ident, true).await.expect("drop purge");
    assert_eq!(files_under(&local(&location)), Vec::<PathBuf>::new());
    assert!(catalog.load_table(&ident).await.unwrap_err().is_not_found());
    assert!(
        catalog
            .drop_table(&ident, true)
            .await
            .unwrap_err()
            .is_not_found()
    );

    catalog.drop_table(&other, false).await.expect("drop");
    assert!(catalog.load_table(&other).await.unwrap_err().is_not_found());
    let other_dir = local(&format!("{other_location}/metadata"));
    // Java's HadoopCatalog deletes a dropped table's directory; a SQL catalog keeps the files.
    assert_eq!(metadata_files(&other_dir).is_empty(), hadoop);

    assert!(catalog.list_tables(&ns).await.expect("tables").is_empty());
    catalog.drop_namespace(&ns).await.expect("drop namespace");
    assert!(!catalog.namespace_exists(&ns).await.expect("exists"));
    assert!(!catalog.list_namespaces().await.expect("list").contains(&ns));
    assert!(
        catalog
            .drop_namespace(&ns)
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn filesystem_catalog_creates_commits_and_drops() {
    let dir = TempDir::new().expect("tempdir");
    let catalog = FileSystemCatalog::new(dir.path().to_str().expect("utf8")).expect("catalog");
    lifecycle(Arc::new(catalog), true).await;
    // Nothing is left in the warehouse.
    let left: Vec<_> = std::fs::read_dir(dir.path()).expect("read").collect();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sql_catalog_creates_commits_and_drops() {
    let dir = TempDir::new().expect("tempdir");
    let warehouse = dir.path().join("warehouse");
    let catalog = SqlCatalog::open_sqlite(dir.path().join("catalog.db"), "petrel")
        .expect("catalog")
        .with_warehouse(warehouse.to_str().expect("utf8"))
        .expect("warehouse");
    let ident = TableIdent::new(Namespace::from_dotted("a.b"), "t");
    assert_eq!(
        catalog
            .default_table_location(&ident)
            .await
            .expect("location"),
        format!("file://{}/a.b/t", warehouse.display())
    );
    lifecycle(Arc::new(catalog), false).await;
}

/// The same on PostgreSQL (`scripts/start-postgres.sh`): the race of eight commits is
/// arbitrated by the row's compare-and-set in a PostgreSQL transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_sql_catalog_creates_commits_and_drops() {
    let pg = crate::common::postgres::Postgres::start();
    let dir = TempDir::new().expect("tempdir");
    let warehouse = dir.path().join("warehouse");
    let name = crate::common::postgres::unique_catalog_name("lifecycle");
    let catalog = SqlCatalog::connect_postgres(
        &pg.uri,
        &name,
        petrel_table_provider::io::StoreRegistry::default(),
    )
    .await
    .expect("catalog")
    .with_warehouse(warehouse.to_str().expect("utf8"))
    .expect("warehouse");
    lifecycle(Arc::new(catalog), false).await;
}

/// A crash between the exclusive create of `v2.metadata.json` and the hint update leaves a
/// hint naming version 1: readers walk forward to version 2, and the next commit writes 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_catalog_walks_forward_from_a_stale_hint() {
    let dir = TempDir::new().expect("tempdir");
    let root = dir.path().to_str().expect("utf8");
    let catalog = FileSystemCatalog::new(root).expect("catalog");
    let ns = Namespace::new(vec!["db".into()]);
    catalog.create_namespace(&ns, false).await.expect("ns");
    let ident = TableIdent::new(ns, "t");
    let location = catalog.default_table_location(&ident).await.expect("loc");
    let v1 = catalog
        .create_table(&ident, new_metadata(&location))
        .await
        .expect("create");
    let v2 = catalog
        .commit_table(&v1, with_properties(&v1, &[("k", "2")]))
        .await
        .expect("commit");
    let hint = local(&format!("{location}/metadata/version-hint.text"));
    assert_eq!(std::fs::read_to_string(&hint).expect("hint"), "2");
    std::fs::write(&hint, "1").expect("stale hint");
    // Staging leftovers of a killed writer are not versions.
    std::fs::write(
        local(&format!("{location}/metadata/v3.metadata.json#1")),
        b"{",
    )
    .expect("leftover");

    // A fresh catalog (no cached metadata) sees version 2.
    let fresh = FileSystemCatalog::new(root).expect("catalog");
    let loaded = fresh.load_table(&ident).await.expect("load");
    assert_eq!(loaded.metadata_location(), v2.metadata_location());
    assert_eq!(
        loaded.metadata().properties().get("k").map(String::as_str),
        Some("2")
    );
    let v3 = fresh
        .commit_table(&loaded, with_properties(&loaded, &[("k", "3")]))
        .await
        .expect("commit over the walked-forward version");
    assert_eq!(file_name(v3.metadata_location()), "v3.metadata.json");
    assert_eq!(std::fs::read_to_string(&hint).expect("hint"), "3");

    // Without any hint, the highest version is current.
    std::fs::remove_file(&hint).expect("rm hint");
    let loaded = FileSystemCatalog::new(root)
        .expect("catalog")
        .load_table(&ident)
        .await
        .expect("load");
    assert_eq!(loaded.metadata_location(), v3.metadata_location());

    // A commit from the stale version 2 conflicts with the existing version 3.
    assert!(matches!(
        fresh
            .commit_table(&v2, with_properties(&v2, &[("k", "late")]))
            .await,
        Err(Error::CommitConflict { .. })
    ));
}

/// A reader that has loaded a table sees every later commit of another catalog instance (its
/// own caches, as another process has) on its next load: with the version hint current, with a
/// stale hint (a writer that died between its metadata file and its hint: the reader walks
/// forward from the hinted version, which it has parsed before), and when the hinted file was
/// removed since (metadata expiry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_catalog_sees_another_writers_commit_on_the_next_load() {
    let dir = TempDir::new().expect("tempdir");
    let root = dir.path().to_str().expect("utf8");
    let (reader, writer) = (
        FileSystemCatalog::new(root).expect("catalog"),
        FileSystemCatalog::new(root).expect("catalog"),
    );
    let ns = Namespace::new(vec!["db".into()]);
    writer.create_namespace(&ns, false).await.expect("ns");
    let ident = TableIdent::new(ns, "t");
    let location = writer.default_table_location(&ident).await.expect("loc");
    let v1 = writer
        .create_table(&ident, new_metadata(&location))
        .await
        .expect("create");
    let k = |t: &LoadedTable| t.metadata().properties().get("k").cloned();
    assert_eq!(
        reader
            .load_table(&ident)
            .await
            .expect("load")
            .metadata_location(),
        v1.metadata_location()
    );

    // A commit with its hint.
    let v2 = writer
        .commit_table(&v1, with_properties(&v1, &[("k", "2")]))
        .await
        .expect("commit");
    let loaded = reader.load_table(&ident).await.expect("load");
    assert_eq!(loaded.metadata_location(), v2.metadata_location());
    assert_eq!(k(&loaded).as_deref(), Some("2"));

    // A commit whose hint was never written: the hint still names version 2, which the reader
    // has parsed; version 3 is found all the same.
    let hint = local(&format!("{location}/metadata/version-hint.text"));
    let v3 = writer
        .commit_table(&v2, with_properties(&v2, &[("k", "3")]))
        .await
        .expect("commit");
    std::fs::write(&hint, "2").expect("stale hint");
    let loaded = reader.load_table(&ident).await.expect("load");
    assert_eq!(loaded.metadata_location(), v3.metadata_location());
    assert_eq!(k(&loaded).as_deref(), Some("3"));

    // The hinted version 2 removed (expired), version 4 committed, hint still 2.
    let v4 = writer
        .commit_table(&v3, with_properties(&v3, &[("k", "4")]))
        .await
        .expect("commit");
    std::fs::write(&hint, "2").expect("stale hint");
    std::fs::remove_file(local(v2.metadata_location())).expect("expire v2");
    let loaded = reader.load_table(&ident).await.expect("load");
    assert_eq!(loaded.metadata_location(), v4.metadata_location());
    assert_eq!(k(&loaded).as_deref(), Some("4"));
}

/// The object-store requests of the loads that follow (process-wide counters: nextest runs each
/// test in its own process).
fn local_requests() -> petrel_table_provider::io::RequestCounts {
    petrel_table_provider::io::object_store_requests(petrel_table_provider::io::CountedStore::Local)
}

/// A table load's requests, which are round trips on an object store: a cold catalog reads the
/// hint, then the hinted file together with the HEAD of the next version; a warm one reads the
/// hint together with the HEAD of the version after the one it found, and nothing more when
/// the hint still names it. Other writers' commits, with or without their hint, are seen.
#[tokio::test]
async fn filesystem_catalog_loads_in_few_requests() {
    let dir = TempDir::new().expect("tempdir");
    let root = dir.path().to_str().expect("utf8");
    let (reader, writer) = (
        FileSystemCatalog::new(root).expect("catalog"),
        FileSystemCatalog::new(root).expect("catalog"),
    );
    let ns = Namespace::new(vec!["db".into()]);
    writer.create_namespace(&ns, false).await.expect("ns");
    let ident = TableIdent::new(ns, "t");
    let location = writer.default_table_location(&ident).await.expect("loc");
    let v1 = writer
        .create_table(&ident, new_metadata(&location))
        .await
        .expect("create");
    let v2 = writer
        .commit_table(&v1, with_properties(&v1, &[("k", "2")]))
        .await
        .expect("commit");
    let k = |t: &LoadedTable| t.metadata().properties().get("k").cloned();
    // (GETs, HEADs) of one load, and the table it loaded.
    let load = || async {
        let before = local_requests();
        let table = reader.load_table(&ident).await.expect("load");
        let made = local_requests().since(&before);
        assert_eq!(
            made.total(),
            made.get + made.head,
            "only GETs and HEADs: {made:?}"
        );
        ((made.get, made.head), table)
    };

    // Cold: the hint; v2 (GET) and v3 (HEAD) at once.
    let (made, loaded) = load().await;
    assert_eq!(made, (2, 1));
    assert_eq!(loaded.metadata_location(), v2.metadata_location());
    assert_eq!(k(&loaded).as_deref(), Some("2"));
    // Warm: the hint and v3 (HEAD) at once.
    let (made, loaded) = load().await;
    assert_eq!(made, (1, 1));
    assert_eq!(loaded.metadata_location(), v2.metadata_location());

    // Another writer's commit with its hint: the hint and v3 (HEAD, found) at once, then v3
    // (GET) and v4 (HEAD) at once.
    let v3 = writer
        .commit_table(&v2, with_properties(&v2, &[("k", "3")]))
        .await
        .expect("commit");
    let (made, loaded) = load().await;
    assert_eq!(made, (2, 2));
    assert_eq!(loaded.metadata_location(), v3.metadata_location());
    assert_eq!(k(&loaded).as_deref(), Some("3"));
    let (made, _) = load().await;
    assert_eq!(made, (1, 1));

    // A commit whose hint was never written: the hint (3) and v4 (HEAD, found) at once, then
    // v5 (HEAD) and v4 (GET).
    let hint = local(&format!("{location}/metadata/version-hint.text"));
    let v4 = writer
        .commit_table(&v3, with_properties(&v3, &[("k", "4")]))
        .await
        .expect("commit");
    std::fs::write(&hint, "3").expect("stale hint");
    let (made, loaded) = load().await;
    assert_eq!(made, (2, 2));
    assert_eq!(loaded.metadata_location(), v4.metadata_location());
    assert_eq!(k(&loaded).as_deref(), Some("4"));

    // A hint older than the version found last: read as a cold load reads it (v2 is parsed
    // here: no GET; HEADs of v3, v4, v5 in turn), besides the HEAD of v5 with the hint.
    std::fs::write(&hint, "2").expect("older hint");
    let (made, loaded) = load().await;
    assert_eq!(made, (1, 4));
    assert_eq!(loaded.metadata_location(), v4.metadata_location());
}

/// Requests of one load through `catalog`, and the metadata file it gave.
async fn cached_load(
    catalog: &petrel_table_provider::catalog::CachingCatalog,
    ident: &TableIdent,
) -> (u64, String) {
    let before = local_requests();
    let table = catalog.load_table(ident).await.expect("load");
    (
        local_requests().since(&before).total(),
        table.metadata_location().to_string(),
    )
}

/// `table_cache_ms`: a [`CachingCatalog`] answers loads from memory while its entry is younger
/// than the set time (no request), misses another writer's commit for that long but never its
/// own: a commit replaces the entry, a conflict drops it (the commit loop's reload then sees
/// the table as it is), a drop forgets it; after the set time the next load asks the catalog.
#[tokio::test]
async fn a_caching_catalog_serves_loads_from_memory_and_never_hides_its_own_commits() {
    use petrel_table_provider::catalog::CachingCatalog;
    use std::time::Duration;

    let dir = TempDir::new().expect("tempdir");
    let root = dir.path().to_str().expect("utf8");
    let writer = FileSystemCatalog::new(root).expect("catalog");
    let inner: Arc<dyn Catalog> = Arc::new(FileSystemCatalog::new(root).expect("catalog"));
    let cached = CachingCatalog::new(inner, Duration::from_secs(3600));
    let ns = Namespace::new(vec!["db".into()]);
    writer.create_namespace(&ns, false).await.expect("ns");
    let ident = TableIdent::new(ns.clone(), "t");
    let location = writer.default_table_location(&ident).await.expect("loc");
    let v1 = writer
        .create_table(&ident, new_metadata(&location))
        .await
        .expect("create");

    let (made, found) = cached_load(&cached, &ident).await;
    assert!(made > 0, "the first load asks the catalog");
    assert_eq!(found, v1.metadata_location());
    assert_eq!(
        cached_load(&cached, &ident).await,
        (0, v1.metadata_location().to_string())
    );
    let stats = cached.cache_stats();
    assert_eq!(
        stats
            .iter()
            .map(|s| (s.name, s.entries, s.hits, s.misses))
            .collect::<Vec<_>>(),
        vec![("table", 1, 1, 1)]
    );

    // Another writer's commit is missed within the set time...
    let v2 = writer
        .commit_table(&v1, with_properties(&v1, &[("k", "2")]))
        .await
        .expect("commit");
    assert_eq!(
        cached_load(&cached, &ident).await,
        (0, v1.metadata_location().to_string())
    );
    // ... until this catalog commits from the stale table: the conflict drops the entry and
    // the next load (the commit loop's) sees v2.
    let stale = cached.load_table(&ident).await.expect("load");
    assert!(matches!(
        cached
            .commit_table(&stale, with_properties(&stale, &[("k", "lost")]))
            .await,
        Err(Error::CommitConflict { .. })
    ));
    let (made, found) = cached_load(&cached, &ident).await;
    assert!(made > 0, "a conflict drops the entry");
    assert_eq!(found, v2.metadata_location());

    // Its own commit is served at once, without a request.
    let base = cached.load_table(&ident).await.expect("load");
    let v3 = cached
        .commit_table(&base, with_properties(&base, &[("k", "3")]))
        .await
        .expect("commit");
    assert_eq!(
        cached_load(&cached, &ident).await,
        (0, v3.metadata_location().to_string())
    );
    assert_eq!(
        writer
            .load_table(&ident)
            .await
            .expect("load")
            .metadata_location(),
        v3.metadata_location()
    );

    // A short set time: another writer's commit is seen once it has passed.
    let ttl = Duration::from_millis(50);
    let brief = CachingCatalog::new(
        Arc::new(FileSystemCatalog::new(root).expect("catalog")),
        ttl,
    );
    assert_eq!(cached_load(&brief, &ident).await.1, v3.metadata_location());
    let v4 = writer
        .commit_table(&v3, with_properties(&v3, &[("k", "4")]))
        .await
        .expect("commit");
    tokio::time::sleep(ttl * 2).await;
    let (made, found) = cached_load(&brief, &ident).await;
    assert!(made > 0, "an expired entry asks the catalog");
    assert_eq!(found, v4.metadata_location());

    // Dropped through the cache: gone at once.
    cached.drop_table(&ident, false).await.expect("drop");
    assert!(matches!(
        cached.load_table(&ident).await,
        Err(Error::NotFound(_))
    ));
}

/// The Python of the repository's virtualenv (PETREL_PYTHON overrides it).
fn python() -> PathBuf {
    if let Some(py) = std::env::var_os("PETREL_PYTHON") {
        return PathBuf::from(py);
    }
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let py = repo.join(".venv/bin/python");
    if !py.exists() {
        let status = std::process::Command::new("bash")
            .arg(repo.join("scripts/setup-python.sh"))
            .status()
            .expect("run scripts/setup-python.sh");
        assert!(status.success(), "scripts/setup-python.sh failed");
    }
    py
}

/// Runs `script` with PyIceberg over the SQL catalog `petrel` in `db`; returns its stdout's
/// last line as JSON.
fn pyiceberg(db: &Path, warehouse: &Path, script: &str) -> serde_json::Value {
    let prelude = format!(
        "import json, sys\n\
         from pyiceberg.catalog.sql import SqlCatalog\n\
         catalog = SqlCatalog('petrel', uri='sqlite:///{}', warehouse='file://{}')\n",
        db.display(),
        warehouse.display()
    );
    let output = std::process::Command::new(python())
        .arg("-c")
        .arg(format!("{prelude}{script}"))
        .output()
        .expect("run python");
    assert!(
        output.status.success(),
        "pyiceberg failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).expect("utf8");
    serde_json::from_str(stdout.lines().last().expect("a line")).expect("json")
}

/// PyIceberg reads what Petrel committed to a SQL catalog, commits on top of it, and Petrel
/// reads that and commits again (the metadata file versions continue 00000, 00001, ...).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyiceberg_and_petrel_commit_to_one_sql_catalog() {
    let dir = TempDir::new().expect("tempdir");
    let db = dir.path().join("catalog.db");
    let warehouse = dir.path().join("warehouse");
    std::fs::create_dir_all(&warehouse).expect("warehouse");

    // PyIceberg creates the database (its schema, with `iceberg_type`), a namespace and a table.
    let created = pyiceberg(
        &db,
        &warehouse,
        "import pyarrow as pa\n\
         catalog.create_namespace('py')\n\
         t = catalog.create_table('py.t', schema=pa.schema([('id', pa.int64())]))\n\
         print(json.dumps({'location': t.metadata_location}))\n",
    );
    assert!(
        created["location"]
            .as_str()
            .expect("loc")
            .contains("00000-")
    );

    let catalog: Arc<dyn Catalog> = Arc::new(
        SqlCatalog::open_sqlite(&db, "petrel")
            .expect("catalog")
            .with_warehouse(warehouse.to_str().expect("utf8"))
            .expect("warehouse"),
    );
    // Petrel commits to PyIceberg's table and creates one of its own.
    let py_ident = TableIdent::new(Namespace::from_dotted("py"), "t");
    let base = catalog.load_table(&py_ident).await.expect("load");
    let committed = catalog
        .commit_table(&base, with_properties(&base, &[("petrel.commit", "1")]))
        .await
        .expect("commit");
    assert!(file_name(committed.metadata_location()).starts_with("00001-"));

    let ns = Namespace::from_dotted("petrel_ns");
    catalog.create_namespace(&ns, false).await.expect("ns");
    let ident = TableIdent::new(ns, "orders");
    let location = catalog.default_table_location(&ident).await.expect("loc");
    let created = catalog
        .create_table(&ident, new_metadata(&location))
        .await
        .expect("create");
    let committed_own = catalog
        .commit_table(&created, with_properties(&created, &[("owner", "petrel")]))
        .await
        .expect("commit own");

    // PyIceberg sees both, with Petrel's properties, and commits on top of each.
    let seen = pyiceberg(
        &db,
        &warehouse,
        "out = {}\n\
         for name in ['py.t', 'petrel_ns.orders']:\n\
         \x20   t = catalog.load_table(name)\n\
         \x20   out[name] = {'location': t.metadata_location, 'properties': dict(t.properties),\n\
         \x20                'columns': [f.name for f in t.schema().fields]}\n\
         \x20   with t.transaction() as tx:\n\
         \x20       tx.set_properties({'pyiceberg.commit': name})\n\
         out['tables'] = sorted('.'.join(i) for i in catalog.list_tables('petrel_ns'))\n\
         out['namespaces'] = sorted('.'.join(n) for n in catalog.list_namespaces())\n\
         print(json.dumps(out))\n",
    );
    assert_eq!(
        seen["py.t"]["location"].as_str(),
        Some(committed.metadata_location())
    );
    assert_eq!(seen["py.t"]["properties"]["petrel.commit"], "1");
    assert_eq!(
        seen["petrel_ns.orders"]["location"].as_str(),
        Some(committed_own.metadata_location())
    );
    assert_eq!(seen["petrel_ns.orders"]["properties"]["owner"], "petrel");
    assert_eq!(
        seen["petrel_ns.orders"]["columns"],
        serde_json::json!(["id", "name", "price", "ts"])
    );
    assert_eq!(seen["tables"], serde_json::json!(["petrel_ns.orders"]));
    assert_eq!(seen["namespaces"], serde_json::json!(["petrel_ns", "py"]));

    // Petrel reads PyIceberg's commits, and its stale bases now conflict.
    for (ident, stale) in [(&py_ident, &committed), (&ident, &committed_own)] {
        let loaded = catalog.load_table(ident).await.expect("load");
        assert_eq!(
            loaded.metadata().properties().get("pyiceberg.commit"),
            Some(&ident.to_string())
        );
        assert!(file_name(loaded.metadata_location()).starts_with("00002-"));
        assert!(matches!(
            catalog
                .commit_table(stale, with_properties(stale, &[("late", "1")]))
                .await,
            Err(Error::CommitConflict { .. })
        ));
        let next = catalog
            .commit_table(&loaded, with_properties(&loaded, &[("petrel.again", "1")]))
            .await
            .expect("commit again");
        assert!(file_name(next.metadata_location()).starts_with("00003-"));
    }
}
