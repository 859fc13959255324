//! The `iceberg` crate's Avro writers (manifests, manifest lists) write into memory here; the
//! bytes then go to object storage through Petrel's own IO, never through the crate's `FileIO`.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use bytes::Bytes;
use iceberg::io::{FileWrite, MemoryStorage, OutputFile, Storage};

use crate::error::Result;

/// A `FileWrite` that keeps what is written in a shared buffer.
#[derive(Debug, Clone, Default)]
pub struct BufferWrite {
    buffer: Arc<Mutex<Vec<u8>>>,
}

impl BufferWrite {
    /// The bytes written so far.
    pub fn bytes(&self) -> Bytes {
        Bytes::from(
            self.buffer
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        )
    }
}

#[async_trait]
impl FileWrite for BufferWrite {
    async fn write(&mut self, bs: Bytes) -> iceberg::Result<()> {
        self.buffer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(&bs);
        Ok(())
    }

    async fn close(&mut self) -> iceberg::Result<()> {
        Ok(())
    }
}

/// An `OutputFile` in memory at `location` (the location the written file will be recorded
/// under), and a way to take its bytes once written.
#[derive(Debug)]
pub struct MemoryOutput {
    storage: Arc<MemoryStorage>,
    location: String,
}

impl MemoryOutput {
    /// A new in-memory output for `location`.
    pub fn new(location: impl Into<String>) -> Self {
        Self {
            storage: Arc::new(MemoryStorage::new()),
            location: location.into(),
        }
    }

    /// The crate's `OutputFile` writing into this memory.
    pub fn output_file(&self) -> OutputFile {
        let storage: Arc<dyn Storage> = Arc::clone(&self.storage) as Arc<dyn Storage>;
        OutputFile::new(storage, self.location.clone())
    }

    /// The bytes written to the output file.
    pub async fn bytes(&self) -> Result<Bytes> {
        Ok(self.storage.read(&self.location).await?)
    }
}
