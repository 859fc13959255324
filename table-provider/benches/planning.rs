//! Scan planning: Petrel's `ScanPlanner` against the `iceberg` crate's `TableScan::plan_files`.
//!
//! Setup builds, in a tempdir, a synthetic Iceberg v2 table with the `iceberg` crate's own
//! writers (`common::many_files`): 10,000 data files in 100 manifests (one manifest per `part` value, identity
//! partitioning), each file carrying `key` lower/upper bounds so that files are sorted by key
//! with disjoint ranges. The data files do not exist: planning only reads metadata.
//!
//! Three scans, each planned cold (manifest cache emptied before every iteration) and warm
//! (cache filled), by both planners:
//!
//! - `full`: no filter (10,000 files);
//! - `part=42`: one partition (partition summaries prune 99 of 100 manifests; 100 files);
//! - `key-range`: `key BETWEEN a AND b` over 1% of the files (column metrics prune 9,900).
//!
//! Both planners must select the same number of files for every scan (asserted in setup).
//! After criterion's output, a table of medians over a fixed number of iterations, measured
//! in this same process, gives the iceberg ÷ Petrel ratios.
//!
//! Run: `cargo bench -p petrel-table-provider --bench planning`

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use datafusion::prelude::{col, lit};
use futures::TryStreamExt;
use iceberg::expr::{Predicate as IcebergPredicate, Reference};
use iceberg::io::FileIO;
use iceberg::spec::{Datum, TableMetadata};
use iceberg::table::Table;
use petrel_table_provider::plan::Predicate;
use petrel_table_provider::{
    Catalog, FileSystemCatalog, LoadedTable, ManifestCache, Namespace, ScanPlanner, ScanRequest,
    SnapshotSelector, TableIdent,
};
use tokio::runtime::Runtime;

mod common;
use common::many_files::{self, FILES, FILES_PER_MANIFEST, MANIFESTS, ROWS, Written};

/// Iterations behind each median of the summary table.
const SUMMARY_ITERATIONS: usize = 20;
/// The partition the one-partition scan reads.
const PART: i32 = 42;
/// `key BETWEEN KEY_LO AND KEY_HI`: files 5,000..5,099 (1% of them), bounds mid-file.
const KEY_LO: i64 = 5_000 * ROWS + ROWS / 2;
const KEY_HI: i64 = 5_100 * ROWS - ROWS / 2;

/// One scan, expressed for both planners.
struct Scan {
    name: &'static str,
    petrel: Predicate,
    iceberg: Option<IcebergPredicate>,
    expected_files: usize,
}

/// The table, loaded once by each side.
struct Fixture {
    _dir: tempfile::TempDir,
    petrel_table: LoadedTable,
    metadata: Arc<TableMetadata>,
    metadata_location: String,
    file_io: FileIO,
    scans: Vec<Scan>,
}

/// Writes the table (`common::many_files`) and loads it through Petrel's catalog.
async fn build_fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = dir.path().to_str().expect("utf-8 tempdir").to_string();
    let Written {
        metadata,
        metadata_location,
    } = many_files::write_table(&warehouse).await;
    let file_io = FileIO::new_with_fs();

    let catalog = FileSystemCatalog::new(&warehouse).expect("catalog");
    let petrel_table = catalog
        .load_table(&TableIdent::new(Namespace::from_dotted("db"), "t"))
        .await
        .expect("load table");

    let iceberg_schema = Arc::clone(petrel_table.metadata().current_schema());
    let from = |expr| {
        let (predicate, exact) = Predicate::from_filters(&[expr], &iceberg_schema);
        assert!(exact.iter().all(|e| *e), "filter not fully converted");
        predicate
    };
    let scans = vec![
        Scan {
            name: "full",
            petrel: Predicate::True,
            iceberg: None,
            expected_files: FILES as usize,
        },
        Scan {
            name: "part=42",
            petrel: from(col("part").eq(lit(PART))),
            iceberg: Some(Reference::new("part").equal_to(Datum::int(PART))),
            expected_files: FILES_PER_MANIFEST as usize,
        },
        Scan {
            name: "key-range",
            petrel: from(col("key").between(lit(KEY_LO), lit(KEY_HI))),
            iceberg: Some(
                Reference::new("key")
                    .greater_than_or_equal_to(Datum::long(KEY_LO))
                    .and(Reference::new("key").less_than_or_equal_to(Datum::long(KEY_HI))),
            ),
            expected_files: (FILES / 100) as usize,
        },
    ];

    Fixture {
        _dir: dir,
        petrel_table,
        metadata: Arc::new(metadata),
        metadata_location,
        file_io,
        scans,
    }
}

impl Fixture {
    fn request(&self, scan: &Scan) -> ScanRequest {
        ScanRequest {
            selector: SnapshotSelector::Current,
            filter: scan.petrel.clone(),
            limit: None,
            target_partitions: 8,
        }
    }

    /// A fresh iceberg `Table`, hence a fresh (empty) object cache.
    fn iceberg_table(&self) -> Table {
        Table::builder()
            .metadata(Arc::clone(&self.metadata))
            .identifier(iceberg::TableIdent::from_strs(["db", "t"]).expect("ident"))
            .file_io(self.file_io.clone())
            .metadata_location(self.metadata_location.clone())
            .runtime(iceberg::Runtime::current())
            .build()
            .expect("iceberg table")
    }
}

/// Plans with Petrel; returns the number of files selected.
async fn petrel_plan(planner: &ScanPlanner, fixture: &Fixture, request: &ScanRequest) -> usize {
    let plan = planner
        .plan(&fixture.petrel_table, request)
        .await
        .expect("petrel plan");
    plan.metrics.files_selected
}

/// Plans with iceberg's `plan_files` and drains the stream; returns the number of files.
async fn iceberg_plan(table: &Table, scan: &Scan) -> usize {
    let mut builder = table.scan();
    if let Some(filter) = &scan.iceberg {
        builder = builder.with_filter(filter.clone());
    }
    let tasks: Vec<_> = builder
        .build()
        .expect("iceberg scan")
        .plan_files()
        .await
        .expect("plan_files")
        .try_collect()
        .await
        .expect("plan_files stream");
    tasks.len()
}

/// The four measured variants of a scan.
#[derive(Debug, Clone, Copy)]
enum Variant {
    PetrelCold,
    PetrelWarm,
    IcebergCold,
    IcebergWarm,
}

impl Variant {
    const ALL: [Variant; 4] = [
        Variant::PetrelCold,
        Variant::PetrelWarm,
        Variant::IcebergCold,
        Variant::IcebergWarm,
    ];

    fn name(self) -> &'static str {
        match self {
            Variant::PetrelCold => "petrel/cold",
            Variant::PetrelWarm => "petrel/warm",
            Variant::IcebergCold => "iceberg/cold",
            Variant::IcebergWarm => "iceberg/warm",
        }
    }
}

/// State shared by the iterations of one variant: a planner with its cache and one iceberg
/// `Table` (whose object cache is iceberg's manifest cache).
struct Runner<'a> {
    fixture: &'a Fixture,
    scan: &'a Scan,
    request: ScanRequest,
    planner: ScanPlanner,
    iceberg_warm: Table,
}

impl<'a> Runner<'a> {
    /// Sets up `variant` for `scan`, filling the caches of the warm variants.
    async fn new(fixture: &'a Fixture, scan: &'a Scan, variant: Variant) -> Self {
        let runner = Self {
            fixture,
            scan,
            request: fixture.request(scan),
            planner: ScanPlanner::new(ManifestCache::default()),
            iceberg_warm: fixture.iceberg_table(),
        };
        match variant {
            Variant::PetrelWarm => {
                petrel_plan(&runner.planner, fixture, &runner.request).await;
            }
            Variant::IcebergWarm => {
                iceberg_plan(&runner.iceberg_warm, scan).await;
            }
            Variant::PetrelCold | Variant::IcebergCold => {}
        }
        runner
    }

    /// One timed iteration (cache emptying, for the cold variants, is not timed).
    async fn time_one(&self, variant: Variant) -> Duration {
        match variant {
            Variant::PetrelCold => {
                self.planner.cache().clear();
                let started = Instant::now();
                std::hint::black_box(petrel_plan(&self.planner, self.fixture, &self.request).await);
                started.elapsed()
            }
            Variant::PetrelWarm => {
                let started = Instant::now();
                std::hint::black_box(petrel_plan(&self.planner, self.fixture, &self.request).await);
                started.elapsed()
            }
            Variant::IcebergCold => {
                let table = self.fixture.iceberg_table();
                let started = Instant::now();
                std::hint::black_box(iceberg_plan(&table, self.scan).await);
                started.elapsed()
            }
            Variant::IcebergWarm => {
                let started = Instant::now();
                std::hint::black_box(iceberg_plan(&self.iceberg_warm, self.scan).await);
                started.elapsed()
            }
        }
    }
}

/// Both planners select the expected number of files for every scan.
async fn check_answers(fixture: &Fixture) {
    let planner = ScanPlanner::new(ManifestCache::default());
    for scan in &fixture.scans {
        let petrel = petrel_plan(&planner, fixture, &fixture.request(scan)).await;
        let iceberg = iceberg_plan(&fixture.iceberg_table(), scan).await;
        assert_eq!(
            petrel, iceberg,
            "scan {}: Petrel selects {petrel} files, iceberg plan_files {iceberg}",
            scan.name
        );
        assert_eq!(
            petrel, scan.expected_files,
            "scan {}: {petrel} files selected, {} expected",
            scan.name, scan.expected_files
        );
        let plan = planner
            .plan(&fixture.petrel_table, &fixture.request(scan))
            .await
            .expect("plan");
        println!(
            "scan {:<9}: {} files selected by both; petrel metrics: manifests {}/{} pruned, \
             {} files pruned by partition, {} by metrics",
            scan.name,
            petrel,
            plan.metrics.manifests_pruned,
            plan.metrics.manifests_total,
            plan.metrics.files_pruned_by_partition,
            plan.metrics.files_pruned_by_metrics,
        );
    }
}

fn criterion_benches(c: &mut Criterion, rt: &Runtime, fixture: &Fixture) {
    for scan in &fixture.scans {
        let mut group = c.benchmark_group(format!("planning/{}", scan.name));
        group.sample_size(10);
        group.warm_up_time(Duration::from_secs(1));
        group.measurement_time(Duration::from_secs(3));
        for variant in Variant::ALL {
            let runner = rt.block_on(Runner::new(fixture, scan, variant));
            let runner = &runner;
            group.bench_function(variant.name(), |b| {
                b.to_async(rt).iter_custom(|iters| async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += runner.time_one(variant).await;
                    }
                    total
                });
            });
        }
        group.finish();
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    let n = samples.len();
    if n % 2 == 1 {
        samples[n / 2]
    } else {
        (samples[n / 2 - 1] + samples[n / 2]) / 2
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Medians of `SUMMARY_ITERATIONS` iterations per variant, and iceberg ÷ Petrel ratios.
fn summary(rt: &Runtime, fixture: &Fixture) {
    println!();
    println!(
        "Scan planning, {FILES} data files in {MANIFESTS} manifests; median of \
         {SUMMARY_ITERATIONS} iterations (ms)"
    );
    println!(
        "| scan      | petrel cold | iceberg cold | ratio cold | petrel warm | iceberg warm | ratio warm |"
    );
    println!(
        "|-----------|------------:|-------------:|-----------:|------------:|-------------:|-----------:|"
    );
    for scan in &fixture.scans {
        let mut medians = HashMap::new();
        for variant in Variant::ALL {
            let samples = rt.block_on(async {
                let runner = Runner::new(fixture, scan, variant).await;
                let mut samples = Vec::with_capacity(SUMMARY_ITERATIONS);
                for _ in 0..SUMMARY_ITERATIONS {
                    samples.push(runner.time_one(variant).await);
                }
                samples
            });
            medians.insert(variant.name(), median(samples));
        }
        let m = |v: Variant| medians[v.name()];
        let ratio = |ice: Variant, pet: Variant| m(ice).as_secs_f64() / m(pet).as_secs_f64();
        println!(
            "| {:<9} | {:>11.2} | {:>12.2} | {:>9.1}x | {:>11.2} | {:>12.2} | {:>9.1}x |",
            scan.name,
            ms(m(Variant::PetrelCold)),
            ms(m(Variant::IcebergCold)),
            ratio(Variant::IcebergCold, Variant::PetrelCold),
            ms(m(Variant::PetrelWarm)),
            ms(m(Variant::IcebergWarm)),
            ratio(Variant::IcebergWarm, Variant::PetrelWarm),
        );
    }
    println!(
        "goals: petrel >= 3x faster than plan_files warm; one-partition scan < 50 ms warm \
         (worker threads: {})",
        rt.metrics().num_workers()
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let fixture = rt.block_on(build_fixture());
    rt.block_on(check_answers(&fixture));

    let mut criterion = Criterion::default().configure_from_args();
    criterion_benches(&mut criterion, &rt, &fixture);
    criterion.final_summary();

    summary(&rt, &fixture);
}
