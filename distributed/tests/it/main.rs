//! Every integration test of this crate, in one test binary (see the table provider's
//! `tests/it/main.rs` for why one). The shared helpers are the table provider's own
//! (`tests/it/common`): corpus loading, sessions over Petrel catalogs, exact result comparison.

#[path = "../../../table-provider/tests/it/common/mod.rs"]
mod common;

mod codec_round_trip;
