//! The one place where errors become gRPC statuses.
//!
//! [`to_status`] walks an error down to its root cause (through DataFusion's `Context`,
//! `Shared`, `External`, `Diagnostic` wrappers, Arrow's `ExternalError`, and Petrel's own
//! table-provider error) and picks the code from what actually went wrong:
//!
//! | cause                                                        | code              |
//! |--------------------------------------------------------------|-------------------|
//! | SQL syntax, planning, schema, cast, bad parameter            | INVALID_ARGUMENT  |
//! | unknown table / namespace / snapshot / file                  | NOT_FOUND         |
//! | DDL, COPY, SET, non-Iceberg or read-only writes (`policy`)   | PERMISSION_DENIED |
//! | memory limit, too many queries                               | RESOURCE_EXHAUSTED|
//! | unreadable table feature; DELETE, UPDATE, INSERT OVERWRITE   | UNIMPLEMENTED     |
//! | cancelled query                                              | CANCELLED         |
//! | IO, corrupt files, internal errors                           | INTERNAL          |
//!
//! The message keeps the context chain (table, snapshot, file) so a user can act on it.

use std::error::Error as StdError;

use arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use petrel_table_provider::Error as TableError;
use tonic::{Code, Status};

/// Maps any error to a gRPC status (see the module docs for the table).
pub fn to_status(err: &(dyn StdError + 'static)) -> Status {
    let code = classify(err);
    let mut message = clean_message(&err.to_string());
    if code == Code::Internal {
        tracing::warn!(error = %message, "internal error");
    }
    if message.len() > 4000 {
        message.truncate(4000);
        message.push('…');
    }
    Status::new(code, message)
}

/// [`to_status`] for a DataFusion error.
pub fn df_status(err: DataFusionError) -> Status {
    to_status(&err)
}

fn classify(err: &(dyn StdError + 'static)) -> Code {
    if let Some(status) = err.downcast_ref::<Status>() {
        return status.code();
    }
    if let Some(df) = err.downcast_ref::<DataFusionError>() {
        return classify_df(df);
    }
    if let Some(e) = err.downcast_ref::<TableError>() {
        return match e {
            TableError::NotFound(_) => Code::NotFound,
            TableError::InvalidArgument(_) => Code::InvalidArgument,
            TableError::Unsupported { .. } => Code::Unimplemented,
            TableError::AlreadyExists(_) => Code::AlreadyExists,
            TableError::NamespaceNotEmpty { .. } => Code::FailedPrecondition,
            // Another writer won every attempt: the client may retry the statement.
            TableError::CommitConflict { .. } => Code::Aborted,
            // The commit may or may not have happened: the client must look before retrying.
            TableError::CommitStateUnknown { .. } => Code::Unknown,
            TableError::DataFusion(inner) => classify_df(inner),
            TableError::Arrow(inner) => classify(inner),
            other if other.is_not_found() => Code::NotFound,
            _ => Code::Internal,
        };
    }
    if let Some(e) = err.downcast_ref::<ArrowError>() {
        return match e {
            ArrowError::ExternalError(inner) => classify(inner.as_ref()),
            ArrowError::CastError(_)
            | ArrowError::ParseError(_)
            | ArrowError::InvalidArgumentError(_)
            | ArrowError::DivideByZero
            | ArrowError::ArithmeticOverflow(_)
            | ArrowError::ComputeError(_)
            | ArrowError::SchemaError(_) => Code::InvalidArgument,
            ArrowError::MemoryError(_) => Code::ResourceExhausted,
            _ => Code::Internal,
        };
    }
    if let Some(e) = err.downcast_ref::<std::io::Error>() {
        return match e.kind() {
            std::io::ErrorKind::NotFound => Code::NotFound,
            _ => Code::Internal,
        };
    }
    match err.source() {
        Some(inner) => classify(inner),
        None => Code::Internal,
    }
}

fn classify_df(e: &DataFusionError) -> Code {
    match e {
        DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => {
            classify_df(inner)
        }
        DataFusionError::Shared(inner) => classify_df(inner),
        DataFusionError::External(inner) => classify(inner.as_ref()),
        DataFusionError::ArrowError(inner, _) => classify(inner.as_ref()),
        DataFusionError::Collection(errs) => {
            errs.first().map(classify_df).unwrap_or(Code::Internal)
        }
        DataFusionError::SQL(..) | DataFusionError::SchemaError(..) => Code::InvalidArgument,
        DataFusionError::Configuration(_) | DataFusionError::Substrait(_) => Code::InvalidArgument,
        DataFusionError::Plan(msg) => {
            let lower = msg.to_ascii_lowercase();
            if lower.contains("not found") || lower.contains("does not exist") {
                Code::NotFound
            } else if is_forbidden_statement(&lower) {
                Code::PermissionDenied
            } else {
                Code::InvalidArgument
            }
        }
        DataFusionError::NotImplemented(_) => Code::InvalidArgument,
        DataFusionError::ResourcesExhausted(_) => Code::ResourceExhausted,
        DataFusionError::ObjectStore(inner) => match inner.as_ref() {
            datafusion::object_store::Error::NotFound { .. } => Code::NotFound,
            _ => Code::Internal,
        },
        DataFusionError::IoError(inner) => classify(inner),
        DataFusionError::Execution(msg) if msg.contains("cancelled") => Code::Cancelled,
        _ => Code::Internal,
    }
}

/// DataFusion's `SQLOptions` verification messages ("DDL not supported: …").
fn is_forbidden_statement(lower: &str) -> bool {
    lower.starts_with("ddl not supported")
        || lower.starts_with("dml not supported")
        || lower.starts_with("statement not supported")
}

/// Drops DataFusion's wrapper prefixes that say nothing to a user.
fn clean_message(text: &str) -> String {
    let mut t = text.trim();
    for prefix in ["External error: ", "Arrow error: External error: "] {
        while let Some(rest) = t.strip_prefix(prefix) {
            t = rest;
        }
    }
    let mut s = t.to_string();
    for (from, to) in [
        (
            "DDL not supported",
            "DDL is not supported (queries, INSERT INTO, and CREATE/DROP SCHEMA and TABLE on \
             Iceberg catalogs only)",
        ),
        (
            "DML not supported",
            "write refused (INSERT INTO Iceberg tables only, and none in read-only mode)",
        ),
        (
            "Statement not supported",
            "statement not allowed (only queries are accepted)",
        ),
    ] {
        if s.contains(from) {
            s = s.replacen(from, to, 1);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_to_root_cause() {
        let nf = DataFusionError::External(Box::new(TableError::NotFound(
            "table iceberg.db.nope".into(),
        )));
        let wrapped = DataFusionError::Context("planning".into(), Box::new(nf));
        assert_eq!(to_status(&wrapped).code(), Code::NotFound);
        let oom = DataFusionError::ResourcesExhausted("Failed to allocate".into());
        assert_eq!(df_status(oom).code(), Code::ResourceExhausted);
        let ddl = DataFusionError::Plan("DDL not supported: CreateExternalTable".into());
        let st = df_status(ddl);
        assert_eq!(st.code(), Code::PermissionDenied);
        assert!(
            st.message().contains("DDL is not supported"),
            "{}",
            st.message()
        );
        let cast = DataFusionError::ArrowError(Box::new(ArrowError::CastError("bad".into())), None);
        assert_eq!(df_status(cast).code(), Code::InvalidArgument);
    }
}
