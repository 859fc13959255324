//! Merge-on-read deletes. Today: which delete files apply to which data file, decided at
//! planning ([`DeleteFileIndex`]). Applying them (position bitmaps, deletion vectors,
//! equality sets) joins this module with merge-on-read.

mod index;

pub use index::DeleteFileIndex;
