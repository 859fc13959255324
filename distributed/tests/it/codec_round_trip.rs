//! Plans shipped through [`PetrelPhysicalCodec`] (`datafusion_proto` bytes) and run by another
//! "process": a session that has no catalog, only its own object stores and caches
//! ([`ExecutorScans`]). The answers must be the recorded ones: Spark's for every query of the
//! fixture corpus (every table, snapshot, ref and timestamp; position deletes, deletion vectors
//! and equality deletes), and the independent model's for the merge-on-read tables, with a data
//! file's byte ranges read by two different executors.

use crate::common;

use std::sync::Arc;

use common::{
    Generated, assert_result, assert_result_with_schema, corpus_cases, corpus_dir, corpus_tables,
    find_scan, session,
};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_proto::physical_plan::AsExecutionPlan;
use datafusion_proto::protobuf::PhysicalPlanNode;
use futures::TryStreamExt;
use petrel_distributed::{ExecutorScans, PetrelPhysicalCodec, ShippedScanExec};
use petrel_table_provider::catalog::{Catalog, Namespace, TableIdent};
use petrel_table_provider::io::StoreRegistry;
use petrel_table_provider::plan::{SplitSettings, plan_task_groups};
use petrel_table_provider::{FileSystemCatalog, IcebergScanExec, SqlCatalog, rewrite_time_travel};

/// An executor: a session of its own (no catalogs) and its own stores and caches.
struct Executor {
    ctx: SessionContext,
    codec: PetrelPhysicalCodec,
}

impl Executor {
    fn new() -> Self {
        let config = SessionConfig::new().with_target_partitions(4);
        Self {
            ctx: SessionContext::new_with_config(config),
            codec: PetrelPhysicalCodec::new(ExecutorScans::new(StoreRegistry::default())),
        }
    }

    fn task_ctx(&self) -> Arc<TaskContext> {
        self.ctx.task_ctx()
    }

    /// `bytes` decoded into a plan of this executor.
    fn decode(&self, bytes: &[u8]) -> Arc<dyn ExecutionPlan> {
        let node: PhysicalPlanNode = prost::Message::decode(bytes).expect("protobuf");
        node.try_into_physical_plan(&self.task_ctx(), &self.codec)
            .expect("decode the shipped plan")
    }
}

/// `plan` as the bytes a scheduler ships.
fn encode(plan: Arc<dyn ExecutionPlan>) -> Vec<u8> {
    let codec = PetrelPhysicalCodec::new(ExecutorScans::new(StoreRegistry::default()));
    let node = PhysicalPlanNode::try_from_physical_plan(plan, &codec).expect("encode");
    prost::Message::encode_to_vec(&node)
}

/// Whether `plan` holds a node named `name`.
fn contains(plan: &Arc<dyn ExecutionPlan>, name: &str) -> bool {
    plan.name() == name || plan.children().into_iter().any(|c| contains(c, name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shipped_corpus_plans_return_sparks_answers() {
    let warehouse = corpus_dir().join("warehouse");
    let catalog = FileSystemCatalog::new(warehouse.to_str().expect("utf8 path")).expect("catalog");
    let front = session(vec![("iceberg", Arc::new(catalog))]);
    let executor = Executor::new();
    let (mut compared, mut merged, mut shipped_scans, mut bytes) = (0, 0, 0, 0);
    for (table, expected) in corpus_tables(&corpus_dir()) {
        for case in corpus_cases(&table, &expected) {
            let failed = |e: &dyn std::fmt::Display| -> ! {
                panic!("{}: {} failed: {e}", case.what, case.sql)
            };
            let sql = rewrite_time_travel(&case.sql).unwrap_or_else(|e| failed(&e));
            let frame = front.sql(&sql).await.unwrap_or_else(|e| failed(&e));
            let schema = frame.schema().as_arrow().clone();
            let plan = frame
                .create_physical_plan()
                .await
                .unwrap_or_else(|e| failed(&e));
            let scanned = find_scan(&plan).is_some();
            let encoded = encode(plan);
            bytes += encoded.len();
            let decoded = executor.decode(&encoded);
            assert!(
                !contains(&decoded, "IcebergScanExec"),
                "{}: the front end's scan came through",
                case.what
            );
            assert_eq!(
                contains(&decoded, "ShippedScanExec"),
                scanned,
                "{}: shipped scans",
                case.what
            );
            shipped_scans += usize::from(scanned);
            let batches: Vec<_> =
                datafusion::physical_plan::execute_stream(decoded, executor.task_ctx())
                    .unwrap_or_else(|e| failed(&e))
                    .try_collect()
                    .await
                    .unwrap_or_else(|e| failed(&e));
            assert_result_with_schema(&case.what, &schema, &batches, &case.result);
            compared += 1;
            merged += usize::from(case.with_deletes);
        }
    }
    eprintln!(
        "shipped corpus: {compared} results matched Spark ({merged} merge-on-read, \
         {shipped_scans} plans with a shipped scan, {bytes} plan bytes in all)"
    );
    assert_eq!(compared, 137, "every corpus check ran");
    assert!(
        merged > 0 && shipped_scans > 100,
        "{merged} {shipped_scans}"
    );
}

fn deletes_dataset() -> Generated {
    common::generated("pyiceberg-deletes")
}

fn deletes_session(g: &Generated) -> SessionContext {
    let name = g.expected["catalog_name"].as_str().expect("catalog_name");
    let catalog =
        Arc::new(SqlCatalog::open_sqlite(g.root.join("catalog.db"), name).expect("sql catalog"));
    session(vec![("mor", catalog)])
}

/// The table `name` of the merge-on-read dataset's expected.json.
fn table<'a>(g: &'a Generated, name: &str) -> &'a serde_json::Value {
    g.expected["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no table {name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shipped_merge_on_read_queries_return_the_models_rows() {
    let g = deletes_dataset();
    let front = deletes_session(&g);
    let executor = Executor::new();
    let mut compared = 0;
    for t in g.expected["tables"].as_array().expect("tables") {
        if t.get("error_delete_file").is_some() {
            continue;
        }
        let full = format!("mor.db.{}", t["name"].as_str().expect("name"));
        let mut cases = vec![(format!("SELECT * FROM {full}"), &t["current"])];
        for q in t["queries"].as_array().expect("queries") {
            let sql = q["sql"].as_str().expect("sql").replace("{t}", &full);
            cases.push((sql, &q["result"]));
        }
        for (sql, expected) in cases {
            let frame = front
                .sql(&sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            let plan = frame
                .create_physical_plan()
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            let decoded = executor.decode(&encode(plan));
            let batches = datafusion::physical_plan::collect(decoded, executor.task_ctx())
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            assert_result(&sql, &batches, expected);
            compared += 1;
        }
    }
    eprintln!("shipped merge-on-read: {compared} results matched the model");
    assert!(compared >= 30, "only {compared} results compared");
}

/// One data file of 8 row groups, position deletes across all of them, planned as byte
/// ranges (`read.split.target-size` = 20000): each partition of the shipped scan runs on one
/// of two executors, which decode the plan themselves and share nothing. Deleted positions
/// must still be applied by their absolute row position in the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byte_ranges_of_one_file_on_two_executors_apply_position_deletes() {
    let g = deletes_dataset();
    let front = deletes_session(&g);
    let plan = front
        .sql("SELECT * FROM mor.db.pos_row_groups")
        .await
        .expect("sql")
        .create_physical_plan()
        .await
        .expect("plan");
    let scan = find_scan(&plan).expect("an Iceberg scan");
    let recipe = scan.recipe().expect("a recipe");
    let ranged: Vec<usize> = recipe
        .partitions
        .iter()
        .enumerate()
        .filter(|(_, tasks)| tasks.iter().any(|t| !t.whole_file && !t.deletes.is_empty()))
        .map(|(i, _)| i)
        .collect();
    assert!(
        ranged.len() >= 2,
        "the file's byte ranges should be in several partitions: {:?}",
        recipe.partitions
    );
    let bytes = encode(scan_node(&plan).expect("the scan node"));
    let executors = [Executor::new(), Executor::new()];
    let decoded: Vec<_> = executors.iter().map(|e| e.decode(&bytes)).collect();
    let partitions = decoded[0]
        .properties()
        .output_partitioning()
        .partition_count();
    assert_eq!(partitions, recipe.partitions.len());
    let mut batches = Vec::new();
    for partition in 0..partitions {
        let on = partition % 2;
        assert!(
            decoded[on]
                .as_any()
                .downcast_ref::<ShippedScanExec>()
                .is_some()
        );
        let stream = decoded[on]
            .execute(partition, executors[on].task_ctx())
            .expect("execute");
        let part: Vec<_> = stream.try_collect().await.expect("partition");
        batches.extend(part);
    }
    // Each executor rebuilt the scan and applied position deletes to its own ranges.
    for (i, d) in decoded.iter().enumerate() {
        let metrics = d.metrics().expect("the rebuilt scan's metrics");
        let deleted = metrics
            .sum_by_name("rows_deleted_by_position")
            .map_or(0, |v| v.as_usize());
        assert!(deleted > 0, "executor {i} deleted no rows: {metrics}");
    }
    assert_result(
        "pos_row_groups over two executors",
        &batches,
        &table(&g, "pos_row_groups")["current"],
    );
}

/// The front end's scan node of `plan` on its own (what a Ballista stage below a shuffle holds).
fn scan_node(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
    if plan.as_any().downcast_ref::<IcebergScanExec>().is_some() {
        return Some(Arc::clone(plan));
    }
    plan.children().into_iter().find_map(scan_node)
}

/// The same table regrouped as Iceberg plans task groups for Spark (`read.split.*` of the
/// table: its 20000-byte target size is below the 4 MiB open-file cost, so each byte range is
/// a group of its own), shipped, and each group run on one of two executors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iceberg_task_groups_on_two_executors_return_the_models_rows() {
    let g = deletes_dataset();
    let front = deletes_session(&g);
    let name = g.expected["catalog_name"].as_str().expect("catalog_name");
    let catalog = SqlCatalog::open_sqlite(g.root.join("catalog.db"), name).expect("sql catalog");
    let loaded = catalog
        .load_table(&TableIdent::new(
            Namespace::new(vec!["db".into()]),
            "pos_row_groups",
        ))
        .await
        .expect("load");
    let settings = SplitSettings::from_properties(loaded.metadata().properties());
    assert_eq!(settings.target_size, 20_000);
    let plan = front
        .sql("SELECT * FROM mor.db.pos_row_groups")
        .await
        .expect("sql")
        .create_physical_plan()
        .await
        .expect("plan");
    let scan = find_scan(&plan).expect("an Iceberg scan");
    let mut recipe = scan.recipe().expect("a recipe").as_ref().clone();
    let tasks: Vec<_> = recipe.partitions.concat();
    let groups = plan_task_groups(tasks.clone(), &settings);
    assert_eq!(groups.len(), tasks.len(), "one group per range: {groups:?}");
    assert!(tasks.iter().filter(|t| !t.whole_file).count() >= 4);
    recipe.partitions = groups;
    let partitions = recipe.partitions.len();
    let shipped: Arc<dyn ExecutionPlan> = Arc::new(ShippedScanExec::new(
        Arc::new(recipe),
        None,
        scan.schema(),
        partitions,
        ExecutorScans::new(StoreRegistry::default()),
    ));
    let bytes = encode(shipped);
    let executors = [Executor::new(), Executor::new()];
    let mut batches = Vec::new();
    for partition in 0..partitions {
        let executor = &executors[partition % 2];
        let plan = executor.decode(&bytes);
        let part: Vec<_> = plan
            .execute(partition, executor.task_ctx())
            .expect("execute")
            .try_collect()
            .await
            .expect("partition");
        batches.extend(part);
    }
    assert_result(
        "pos_row_groups in Iceberg's task groups",
        &batches,
        &table(&g, "pos_row_groups")["current"],
    );
}

/// The shipped node of `plan`.
fn shipped(plan: &Arc<dyn ExecutionPlan>) -> Option<&ShippedScanExec> {
    if let Some(scan) = plan.as_any().downcast_ref::<ShippedScanExec>() {
        return Some(scan);
    }
    plan.children().into_iter().find_map(shipped)
}

/// A struct read by field (`s.alpha`, `s.inner.x`, `s.late`): the narrowing travels with the
/// plan, and the rows are PyIceberg's, projected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shipped_struct_leaf_projection_keeps_the_fields_and_the_rows() {
    let g = common::generated("pyiceberg-tables");
    let catalog_name = g.expected["catalog_name"].as_str().expect("catalog_name");
    let catalog =
        SqlCatalog::open_sqlite(g.root.join("catalog.db"), catalog_name).expect("sql catalog");
    let front = session(vec![("pyi", Arc::new(catalog))]);
    let t = g.expected["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .find(|t| t["name"] == "struct_wide")
        .expect("struct_wide");
    let field = |v: &serde_json::Value, name: &str| v.get(name).cloned().unwrap_or_default();
    let mut expected: Vec<Vec<serde_json::Value>> = t["current"]["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| {
            let s = &row[1];
            vec![
                row[0].clone(),
                field(s, "alpha"),
                field(&field(s, "inner"), "x"),
                field(s, "late"),
            ]
        })
        .collect();
    expected.sort_by_key(|r| r[0].as_i64());
    assert_eq!(expected.len(), 3010);

    let sql = "SELECT id, s.alpha, s['inner']['x'], s.late FROM pyi.db.struct_wide ORDER BY id";
    let plan = front
        .sql(sql)
        .await
        .expect("sql")
        .create_physical_plan()
        .await
        .expect("plan");
    let leaves = find_scan(&plan)
        .and_then(|s| s.leaf_projection().cloned())
        .expect("the front end narrowed s");
    let executor = Executor::new();
    let decoded = executor.decode(&encode(plan));
    assert_eq!(
        shipped(&decoded).and_then(|s| s.leaf_projection()),
        Some(&leaves),
        "the narrowing travelled"
    );
    let batches = datafusion::physical_plan::collect(decoded, executor.task_ctx())
        .await
        .expect("run");
    let types: Vec<String> = ["long", "long", "int", "long"].map(String::from).into();
    assert_eq!(common::rows_json(&batches, &types), expected);
}

/// The front end's object-store settings (here S3 keys it would use for an S3 warehouse) are
/// not in the shipped plan; the executor reads with its own and gets Spark's rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shipped_plans_carry_no_store_credentials() {
    const KEY_ID: &str = "AKIAPETRELFRONTEND01";
    const SECRET: &str = "front-end-secret-never-shipped";
    let properties = [
        ("s3.access-key-id", KEY_ID),
        ("s3.secret-access-key", SECRET),
        ("s3.endpoint", "http://127.0.0.1:9"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let stores = StoreRegistry::with_properties(&properties).expect("stores");
    let warehouse = corpus_dir().join("warehouse");
    let catalog =
        FileSystemCatalog::with_stores(warehouse.to_str().expect("utf8"), stores).expect("catalog");
    let front = session(vec![("iceberg", Arc::new(catalog))]);
    let (table, expected) = corpus_tables(&corpus_dir())
        .into_iter()
        .next()
        .expect("a corpus table");
    let case = corpus_cases(&table, &expected).remove(0);
    let frame = front.sql(&case.sql).await.expect("sql");
    let schema = frame.schema().as_arrow().clone();
    let plan = frame.create_physical_plan().await.expect("plan");
    let metadata_location = find_scan(&plan)
        .and_then(|s| s.recipe())
        .map(|r| r.table.metadata_location.clone())
        .expect("a scan with a recipe");
    let bytes = encode(plan);
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        text.contains(&metadata_location),
        "the recipe is in the plan"
    );
    for secret in [KEY_ID, SECRET, "127.0.0.1:9"] {
        assert!(!text.contains(secret), "{secret} was shipped");
    }
    let executor = Executor::new();
    let batches = datafusion::physical_plan::collect(executor.decode(&bytes), executor.task_ctx())
        .await
        .expect("run");
    assert_result_with_schema(&case.what, &schema, &batches, &case.result);
}
