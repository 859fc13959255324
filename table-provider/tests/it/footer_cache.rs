//! A data file's footer and page index are read and parsed once, then reused by every later
//! query (issue #14: point queries). The Iceberg scan reads through DataFusion's cached reader
//! factory with the session runtime's file-metadata cache; checked on that cache's own entries
//! and hit counts.

use crate::common::run_plan;
use crate::page_pruning::points_table;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_queries_reuse_the_footer_and_page_index_of_their_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = points_table(dir.path()).await;

    let cache = ctx.runtime_env().cache_manager.get_file_metadata_cache();
    let data_file_entries = || {
        let mut entries: Vec<_> = cache
            .list_entries()
            .into_iter()
            .filter(|(path, _)| path.as_ref().contains("/db/points/data/"))
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries
    };
    let mut hits = Vec::new();
    for key in [4321, 17, 9999] {
        let (_, batches) = run_plan(
            &ctx,
            &format!("SELECT * FROM iceberg.db.points WHERE id = {key}"),
        )
        .await;
        assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
        let entries = data_file_entries();
        // One entry: the table's one data file, with its page index parsed into it.
        assert_eq!(entries.len(), 1, "{entries:?}");
        let (path, entry) = &entries[0];
        assert!(path.as_ref().ends_with(".parquet"), "{path}");
        assert_eq!(
            entry.extra.get("page_index").map(String::as_str),
            Some("true")
        );
        hits.push(entry.hits);
    }
    // The first query parsed the footer; each later one took it from the cache, once.
    assert_eq!(hits[1] - hits[0], 1, "{hits:?}");
    assert_eq!(hits[2] - hits[1], 1, "{hits:?}");
}
