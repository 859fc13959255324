//! Bound parameter rows: decoded once, bounded in number, counted in the server's memory, and
//! handed out one row at a time.
//!
//! A ticket or a DoPut can carry a parameter batch of many rows (ADBC and JDBC batch
//! executions). Each row means one execution of the statement, so the rows must not all be
//! planned up front: [`ParameterRows`] keeps the decoded Arrow batches (their memory reserved
//! in the server pool, `memory`), refuses more rows than `max_parameter_rows` with
//! RESOURCE_EXHAUSTED, and turns a row into values only when the engine binds it.

use arrow::array::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::execution::memory_pool::MemoryReservation;
use tonic::Status;

use crate::error::df_status;
use crate::memory::ServerMemory;
use crate::tickets::ipc_to_batches;

/// Parameter rows one execution may bind by default.
pub const DEFAULT_MAX_PARAMETER_ROWS: usize = 10_000;

/// The parameter rows of one execution.
#[derive(Debug)]
pub struct ParameterRows {
    batches: Vec<RecordBatch>,
    rows: usize,
    _reservation: Option<MemoryReservation>,
}

impl ParameterRows {
    /// Decodes the IPC stream `ipc` (empty: no rows). More than `max_rows` rows, or more memory
    /// than the server pool can give, is RESOURCE_EXHAUSTED.
    pub fn decode(ipc: &[u8], max_rows: usize, memory: &ServerMemory) -> Result<Self, Status> {
        let batches = ipc_to_batches(ipc)?;
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        if rows > max_rows {
            return Err(Status::resource_exhausted(format!(
                "{rows} parameter rows were bound to one execution; the server accepts at most \
                 {max_rows} (max_parameter_rows): send the batch in smaller parts"
            )));
        }
        let bytes: usize = batches.iter().map(RecordBatch::get_array_memory_size).sum();
        let reservation = if bytes == 0 {
            None
        } else {
            Some(
                memory
                    .reserve("bound parameters", bytes)
                    .map_err(|e| Status::resource_exhausted(e.to_string()))?,
            )
        };
        Ok(Self {
            batches,
            rows,
            _reservation: reservation,
        })
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether no row was bound.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// The values of row `index` (one per parameter, in order).
    pub fn row(&self, index: usize) -> Result<Vec<ScalarValue>, Status> {
        let mut at = index;
        for batch in &self.batches {
            if at < batch.num_rows() {
                return batch
                    .columns()
                    .iter()
                    .map(|c| ScalarValue::try_from_array(c, at))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(df_status);
            }
            at -= batch.num_rows();
        }
        Err(Status::internal(format!(
            "parameter row {index} of {} requested",
            self.rows
        )))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::ipc::writer::StreamWriter;

    use super::*;

    fn ipc(batches: &[Vec<i64>]) -> Vec<u8> {
        let schema = Arc::new(Schema::new(vec![Field::new("$1", DataType::Int64, true)]));
        let mut out = Vec::new();
        let mut writer = StreamWriter::try_new(&mut out, &schema).expect("writer");
        for values in batches {
            let batch = RecordBatch::try_new(
                Arc::clone(&schema),
                vec![Arc::new(Int64Array::from(values.clone()))],
            )
            .expect("batch");
            writer.write(&batch).expect("write");
        }
        writer.finish().expect("finish");
        drop(writer);
        out
    }

    #[test]
    fn rows_are_read_across_batches_and_bounded() {
        let memory = ServerMemory::new(Some(1 << 30), None);
        let rows = ParameterRows::decode(&ipc(&[vec![1, 2], vec![3]]), 3, &memory).expect("3");
        assert_eq!(rows.len(), 3);
        assert_eq!(
            rows.row(2).expect("row 2"),
            vec![ScalarValue::Int64(Some(3))]
        );
        assert!(rows.row(3).is_err());
        assert!(memory.reserved() > 0, "the decoded rows are counted");
        drop(rows);
        assert_eq!(memory.reserved(), 0);

        let err = ParameterRows::decode(&ipc(&[vec![1, 2], vec![3]]), 2, &memory)
            .expect_err("over the row limit");
        assert_eq!(err.code(), tonic::Code::ResourceExhausted);
        assert!(err.message().contains("max_parameter_rows"), "{err}");

        let tiny = ServerMemory::new(Some(16), None);
        let err = ParameterRows::decode(&ipc(&[vec![1; 100]]), 1000, &tiny)
            .expect_err("over the server's memory");
        assert_eq!(err.code(), tonic::Code::ResourceExhausted);
        assert!(
            ParameterRows::decode(&[], 0, &tiny)
                .expect("none")
                .is_empty()
        );
    }
}
