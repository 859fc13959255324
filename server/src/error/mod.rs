//! The server's errors, and the one place where errors become gRPC statuses.
//!
//! [`Error`] is what goes wrong while serving a request: the errors of the layers the server
//! calls (Petrel's table provider, DataFusion, Arrow), kept typed, and the server's own
//! refusals. `impl From<Error> for Status` maps it by variant, walking DataFusion's wrappers
//! (`Context`, `Diagnostic`, `Shared`, `External`, `Collection`) and Arrow's `ExternalError`
//! down to the root cause; no code is ever picked by reading message text. [`to_status`] and
//! [`df_status`] are the same mapping for errors held as `dyn Error` / `DataFusionError`.
//!
//! | cause                                                                   | code               |
//! |-------------------------------------------------------------------------|--------------------|
//! | SQL syntax, planning, schema, cast, bad parameter, malformed request,   |                    |
//! | a function given a value it cannot take (`make_date(2024, 13, 1)`)      | INVALID_ARGUMENT   |
//! | an unknown table, namespace, snapshot or ref (`TableError::NotFound`)   | NOT_FOUND          |
//! | CREATE of a table or namespace that exists                              | ALREADY_EXISTS     |
//! | DROP of a namespace that is not empty                                   | FAILED_PRECONDITION|
//! | every commit attempt lost to another writer, or a row-level write whose |                    |
//! | rows another commit changed (nothing committed: the client may retry)   | ABORTED            |
//! | a commit whose outcome cannot be known (look before retrying)           | UNKNOWN            |
//! | refused by the SQL policy or `--read-only`                              | PERMISSION_DENIED  |
//! | memory limit, no execution slot                                         | RESOURCE_EXHAUSTED |
//! | a table feature or statement Petrel does not implement                  | UNIMPLEMENTED      |
//! | a cancelled query                                                       | CANCELLED          |
//! | storage IO failed (object store, local IO), the catalog database failed | UNAVAILABLE        |
//! | corrupt or missing files of a table, write failures, server bugs        | INTERNAL           |
//!
//! A file the table's metadata names but storage does not have (object store `NotFound`) is
//! INTERNAL, never NOT_FOUND: the table exists, its files are broken. DataFusion's own kinds map
//! by kind: `SQL`, `Plan`, `SchemaError`, `Configuration`, `Execution` → INVALID_ARGUMENT,
//! `NotImplemented` → UNIMPLEMENTED, `ResourcesExhausted` → RESOURCE_EXHAUSTED, `Internal`,
//! `ExecutionJoin` (a panic), Parquet and Avro errors → INTERNAL. DataFusion raises `Execution`
//! for what a statement's arguments and values cannot do (`substr` of a negative length, a
//! `date_trunc` granularity it does not know, `generate_series` with step 0; the client's
//! DB-API driver showed them as `InternalError`), and `Internal` for its own bugs; Petrel's own
//! failures are typed (a broken data file is an `InvalidData` IO error, a stopped write an
//! `Unexpected` Iceberg error: both INTERNAL). A regular expression that does not compile is
//! INVALID_ARGUMENT too.
//!
//! A statement naming a table no catalog has is NOT_FOUND ([`planning_error`], by resolving the
//! statement's names again, not by reading DataFusion's message).
//!
//! The message keeps the context chain (table, snapshot, the file relative to its table) so a
//! user can act on it, with the server's paths cut out ([`redact`]: what a client sees of them).
//! INTERNAL and UNAVAILABLE errors are logged in full.

mod planning;
mod redact;

use std::error::Error as StdError;

use arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use datafusion::object_store;
use petrel_table_provider::Error as TableError;
use tonic::{Code, Status};

pub(crate) use planning::planning_error;
pub(crate) use redact::redact;

/// What went wrong while serving a request (see the module docs for the codes).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Petrel's table provider: catalogs, storage, Iceberg metadata, commits.
    #[error(transparent)]
    Table(#[from] TableError),
    /// DataFusion: parsing, planning, execution.
    #[error(transparent)]
    DataFusion(#[from] DataFusionError),
    /// Arrow: IPC decoding, casts, building result batches.
    #[error(transparent)]
    Arrow(#[from] ArrowError),
    /// A request that is malformed or asks for something impossible.
    #[error("{0}")]
    InvalidRequest(String),
    /// A catalog, namespace or table the request names does not exist.
    #[error("{0}")]
    NotFound(String),
    /// Refused by the server's SQL policy or its read-only mode.
    #[error("{0}")]
    Refused(String),
    /// A statement or request Petrel does not run (yet).
    #[error("{0}")]
    Unimplemented(String),
    /// No execution slot became free in time, or memory ran out.
    #[error("{0}")]
    Busy(String),
    /// The query was cancelled.
    #[error("{0}")]
    Cancelled(String),
    /// A broken invariant in the server.
    #[error("{0}")]
    Internal(String),
    /// An error with what the server was doing, or the table it concerns (`table
    /// catalog.namespace.table`), in front.
    #[error("{context}: {source}")]
    Context {
        /// What was being done, or which table.
        context: String,
        /// What went wrong.
        source: Box<Error>,
    },
}

impl Error {
    /// `self` with `context` in front (what was being done).
    pub fn context(self, context: impl Into<String>) -> Self {
        Error::Context {
            context: context.into(),
            source: Box::new(self),
        }
    }

    /// `self`, naming `table` (`catalog.namespace.table`) as the one it concerns.
    pub fn in_table(self, table: impl std::fmt::Display) -> Self {
        self.context(format!("table {table}"))
    }

    /// A refusal by DataFusion's `SQLOptions` (a second line behind `policy`): its message
    /// rewritten to say what Petrel runs.
    pub fn refused_by_sql_options(e: DataFusionError) -> Self {
        let text = e.strip_backtrace();
        let text = text.trim_start_matches("Error during planning: ");
        let what = if text.starts_with("DDL") {
            "DDL is not supported (queries, DML and Spark's DDL on Iceberg catalogs only)"
        } else if text.starts_with("DML") {
            "write refused (writes to Iceberg tables only, and none in read-only mode)"
        } else {
            "statement not allowed (only queries are accepted)"
        };
        Error::Refused(format!("{what}: {text}"))
    }

    /// The gRPC code for this error (module docs).
    pub fn code(&self) -> Code {
        match self {
            Error::Table(e) => table_code(e),
            Error::DataFusion(e) => df_code(e),
            Error::Arrow(e) => arrow_code(e),
            Error::InvalidRequest(_) => Code::InvalidArgument,
            Error::NotFound(_) => Code::NotFound,
            Error::Refused(_) => Code::PermissionDenied,
            Error::Unimplemented(_) => Code::Unimplemented,
            Error::Busy(_) => Code::ResourceExhausted,
            Error::Cancelled(_) => Code::Cancelled,
            Error::Internal(_) => Code::Internal,
            Error::Context { source, .. } => source.code(),
        }
    }

    /// The message for the client: the context chain, without DataFusion's wrapper noise.
    fn message(&self) -> String {
        match self {
            Error::Table(e) => table_message(e),
            Error::DataFusion(e) => df_message(e),
            Error::Arrow(e) => arrow_message(e),
            Error::Context { context, source } => with_context(context, source.message()),
            other => other.to_string(),
        }
    }
}

impl From<Error> for Status {
    fn from(e: Error) -> Self {
        status(e.code(), &e.message())
    }
}

/// Maps any error to a gRPC status (see the module docs for the table).
pub fn to_status(err: &(dyn StdError + 'static)) -> Status {
    status(any_code(err), &any_message(err))
}

/// [`to_status`] for a DataFusion error.
pub fn df_status(err: DataFusionError) -> Status {
    Status::from(Error::DataFusion(err))
}

/// The status sent: `full` logged if the server or its storage failed, redacted and bounded
/// for the client.
fn status(code: Code, full: &str) -> Status {
    if matches!(code, Code::Internal | Code::Unavailable | Code::Unknown) {
        tracing::warn!(code = ?code, error = %full, "request failed");
    }
    let mut message = redact(full);
    if message.len() > 4000 {
        let mut end = 4000;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    Status::new(code, message)
}

fn any_code(err: &(dyn StdError + 'static)) -> Code {
    if let Some(e) = err.downcast_ref::<Error>() {
        return e.code();
    }
    if let Some(status) = err.downcast_ref::<Status>() {
        return status.code();
    }
    if let Some(e) = err.downcast_ref::<DataFusionError>() {
        return df_code(e);
    }
    if let Some(e) = err.downcast_ref::<TableError>() {
        return table_code(e);
    }
    if let Some(e) = err.downcast_ref::<ArrowError>() {
        return arrow_code(e);
    }
    if let Some(e) = err.downcast_ref::<object_store::Error>() {
        return object_store_code(e);
    }
    if let Some(e) = err.downcast_ref::<std::io::Error>() {
        return io_code(e);
    }
    if let Some(e) = err.downcast_ref::<iceberg::Error>() {
        return iceberg_code(e);
    }
    if let Some(e) = err.downcast_ref::<datafusion::parquet::errors::ParquetError>() {
        return parquet_code(e);
    }
    // A pattern that does not parse (DataFusion's simplifier parses the pattern literals of
    // `~` and `regexp_like` with `regex-syntax`).
    if err.downcast_ref::<regex_syntax::Error>().is_some() {
        return Code::InvalidArgument;
    }
    match err.source() {
        Some(inner) => any_code(inner),
        None => Code::Internal,
    }
}

fn any_message(err: &(dyn StdError + 'static)) -> String {
    if let Some(e) = err.downcast_ref::<Error>() {
        return e.message();
    }
    if let Some(status) = err.downcast_ref::<Status>() {
        return status.message().to_string();
    }
    if let Some(e) = err.downcast_ref::<DataFusionError>() {
        return df_message(e);
    }
    if let Some(e) = err.downcast_ref::<TableError>() {
        return table_message(e);
    }
    if let Some(e) = err.downcast_ref::<ArrowError>() {
        return arrow_message(e);
    }
    err.to_string()
}

fn table_code(e: &TableError) -> Code {
    match e {
        TableError::NotFound(_) => Code::NotFound,
        TableError::InvalidArgument(_) => Code::InvalidArgument,
        TableError::Unsupported { .. } => Code::Unimplemented,
        TableError::AlreadyExists(_) => Code::AlreadyExists,
        TableError::NamespaceNotEmpty { .. } => Code::FailedPrecondition,
        // Another writer won every attempt: the client may retry the statement.
        TableError::CommitConflict { .. } => Code::Aborted,
        // The commit may or may not have happened: the client must look before retrying.
        TableError::CommitStateUnknown { .. } => Code::Unknown,
        // A row-level write whose rows another commit changed: nothing committed; run again.
        TableError::ConcurrentModification { .. } => Code::Aborted,
        // The table exists; a file of it cannot be read or written.
        TableError::CorruptFile { .. } | TableError::WriteFailed { .. } => Code::Internal,
        TableError::ObjectStore(inner) => object_store_code(inner),
        // The catalog's database is down or unreadable: retry later.
        TableError::CatalogDatabase { .. } => Code::Unavailable,
        // A REST catalog: refused credentials, forbidden, or down / unreachable.
        TableError::CatalogService {
            status: Some(401), ..
        } => Code::Unauthenticated,
        TableError::CatalogService {
            status: Some(403), ..
        } => Code::PermissionDenied,
        TableError::CatalogService {
            status: Some(400 | 422),
            ..
        } => Code::InvalidArgument,
        TableError::CatalogService { .. } => Code::Unavailable,
        TableError::Iceberg(inner) => iceberg_code(inner),
        TableError::DataFusion(inner) => df_code(inner),
        TableError::Arrow(inner) => arrow_code(inner),
    }
}

fn table_message(e: &TableError) -> String {
    match e {
        TableError::DataFusion(inner) => df_message(inner),
        TableError::Arrow(inner) => arrow_message(inner),
        other => other.to_string(),
    }
}

/// `context: message`, unless the message already starts with the context.
fn with_context(context: &str, message: String) -> String {
    if message.starts_with(context) {
        message
    } else {
        format!("{context}: {message}")
    }
}

fn df_code(e: &DataFusionError) -> Code {
    match e {
        DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => {
            df_code(inner)
        }
        DataFusionError::Shared(inner) => df_code(inner),
        DataFusionError::External(inner) => any_code(inner.as_ref()),
        DataFusionError::ArrowError(inner, _) => arrow_code(inner),
        DataFusionError::Collection(errs) => errs.first().map(df_code).unwrap_or(Code::Internal),
        DataFusionError::SQL(..)
        | DataFusionError::SchemaError(..)
        | DataFusionError::Plan(_)
        | DataFusionError::Configuration(_)
        | DataFusionError::Execution(_)
        | DataFusionError::Substrait(_) => Code::InvalidArgument,
        DataFusionError::NotImplemented(_) => Code::Unimplemented,
        DataFusionError::ResourcesExhausted(_) => Code::ResourceExhausted,
        DataFusionError::ObjectStore(inner) => object_store_code(inner),
        DataFusionError::IoError(inner) => io_code(inner),
        DataFusionError::ParquetError(inner) => parquet_code(inner),
        _ => Code::Internal,
    }
}

fn df_message(e: &DataFusionError) -> String {
    match e {
        // DataFusion's "Optimizer rule 'x' failed" says nothing to a client: a rule refusing
        // the plan says why itself (`output_limits::LiteralCopies`).
        DataFusionError::Context(context, inner)
            if context.starts_with("Optimizer rule '") && context.ends_with("' failed") =>
        {
            df_message(inner)
        }
        DataFusionError::Context(context, inner) => with_context(context, df_message(inner)),
        DataFusionError::Diagnostic(_, inner) => df_message(inner),
        DataFusionError::Shared(inner) => df_message(inner),
        DataFusionError::External(inner) => any_message(inner.as_ref()),
        DataFusionError::ArrowError(inner, _) => arrow_message(inner),
        DataFusionError::Collection(errs) => errs.first().map(df_message).unwrap_or_default(),
        DataFusionError::ResourcesExhausted(_) => {
            crate::spill::explain_spill_error(e.strip_backtrace())
        }
        other => other.strip_backtrace(),
    }
}

fn arrow_code(e: &ArrowError) -> Code {
    match e {
        ArrowError::ExternalError(inner) => any_code(inner.as_ref()),
        ArrowError::CastError(_)
        | ArrowError::ParseError(_)
        | ArrowError::InvalidArgumentError(_)
        | ArrowError::DivideByZero
        | ArrowError::ArithmeticOverflow(_)
        | ArrowError::ComputeError(_)
        | ArrowError::SchemaError(_) => Code::InvalidArgument,
        ArrowError::MemoryError(_) => Code::ResourceExhausted,
        ArrowError::IoError(_, inner) => io_code(inner),
        _ => Code::Internal,
    }
}

fn arrow_message(e: &ArrowError) -> String {
    match e {
        ArrowError::ExternalError(inner) => any_message(inner.as_ref()),
        other => other.to_string(),
    }
}

fn object_store_code(e: &object_store::Error) -> Code {
    match e {
        // A file the table's metadata names is gone: the table is broken, not absent.
        object_store::Error::NotFound { .. } => Code::Internal,
        // Another writer got there first.
        object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. } => {
            Code::Aborted
        }
        // The store failed (network, disk, throttling): retry later.
        object_store::Error::Generic { .. } => Code::Unavailable,
        // Credentials, paths, unsupported operations: the server's configuration.
        _ => Code::Internal,
    }
}

fn io_code(e: &std::io::Error) -> Code {
    match e.kind() {
        std::io::ErrorKind::NotFound
        | std::io::ErrorKind::InvalidData
        | std::io::ErrorKind::InvalidInput
        | std::io::ErrorKind::UnexpectedEof => Code::Internal,
        std::io::ErrorKind::OutOfMemory => Code::ResourceExhausted,
        _ => Code::Unavailable,
    }
}

fn iceberg_code(e: &iceberg::Error) -> Code {
    use iceberg::ErrorKind as K;
    match e.kind() {
        K::NamespaceNotFound | K::TableNotFound => Code::NotFound,
        K::NamespaceAlreadyExists | K::TableAlreadyExists => Code::AlreadyExists,
        K::CatalogCommitConflicts => Code::Aborted,
        K::FeatureUnsupported => Code::Unimplemented,
        K::PreconditionFailed => Code::FailedPrecondition,
        _ => Code::Internal,
    }
}

fn parquet_code(e: &datafusion::parquet::errors::ParquetError) -> Code {
    match e {
        datafusion::parquet::errors::ParquetError::External(inner) => any_code(inner.as_ref()),
        // A data file that cannot be decoded.
        _ => Code::Internal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table_err(e: TableError) -> DataFusionError {
        DataFusionError::Context(
            "table db.t".into(),
            Box::new(DataFusionError::External(Box::new(e))),
        )
    }

    #[test]
    fn walks_to_root_cause() {
        let nf = DataFusionError::External(Box::new(TableError::NotFound(
            "table iceberg.db.nope".into(),
        )));
        let wrapped = DataFusionError::Context("planning".into(), Box::new(nf));
        assert_eq!(to_status(&wrapped).code(), Code::NotFound);
        let oom = DataFusionError::ResourcesExhausted("Failed to allocate".into());
        assert_eq!(df_status(oom).code(), Code::ResourceExhausted);
        let cast = DataFusionError::ArrowError(Box::new(ArrowError::CastError("bad".into())), None);
        assert_eq!(df_status(cast).code(), Code::InvalidArgument);
        // By kind, whatever the text says.
        let plan = DataFusionError::Plan("table 'x' not found; does not exist".into());
        assert_eq!(df_status(plan).code(), Code::InvalidArgument);
        let exec = DataFusionError::Execution("negative substring length not allowed".into());
        assert_eq!(df_status(exec).code(), Code::InvalidArgument);
        let internal = DataFusionError::Internal("field_id_cast takes exactly one child".into());
        assert_eq!(df_status(internal).code(), Code::Internal);
        // DataFusion's simplifier parses a pattern literal with `regex-syntax`.
        let pattern = match regex_syntax::Parser::new().parse("[") {
            Err(e) => e,
            Ok(_) => panic!("'[' compiled"),
        };
        let regex = DataFusionError::Context(
            "Invalid regex".into(),
            Box::new(DataFusionError::External(Box::new(pattern))),
        );
        assert_eq!(df_status(regex).code(), Code::InvalidArgument);
        let unimplemented = DataFusionError::NotImplemented("MERGE".into());
        assert_eq!(df_status(unimplemented).code(), Code::Unimplemented);
    }

    #[test]
    fn sql_options_refusals_are_permission_denied() {
        let ddl = DataFusionError::Plan("DDL not supported: CreateExternalTable".into());
        let st = Status::from(Error::refused_by_sql_options(ddl));
        assert_eq!(st.code(), Code::PermissionDenied);
        assert!(
            st.message().starts_with("DDL is not supported"),
            "{}",
            st.message()
        );
        // Text that merely looks like a refusal is not one.
        let lookalike = DataFusionError::Plan("DDL not supported: CreateExternalTable".into());
        assert_eq!(df_status(lookalike).code(), Code::InvalidArgument);
    }

    #[test]
    fn each_table_error_has_its_code() {
        let generic = || object_store::Error::Generic {
            store: "LocalFileSystem",
            source: "Input/output error (os error 5)".into(),
        };
        let cases: Vec<(TableError, Code)> = vec![
            (TableError::NotFound("table db.t".into()), Code::NotFound),
            (
                TableError::InvalidArgument("x".into()),
                Code::InvalidArgument,
            ),
            (
                TableError::corrupt("db.t", "manifest", "/w/db/t/metadata/m.avro", "bad"),
                Code::Internal,
            ),
            (
                TableError::Unsupported {
                    table: "db.t".into(),
                    message: "v4".into(),
                },
                Code::Unimplemented,
            ),
            (
                TableError::AlreadyExists("db.t".into()),
                Code::AlreadyExists,
            ),
            (
                TableError::NamespaceNotEmpty {
                    namespace: "db".into(),
                    remaining: "t".into(),
                },
                Code::FailedPrecondition,
            ),
            (
                TableError::CommitConflict {
                    table: "db.t".into(),
                    message: "x".into(),
                },
                Code::Aborted,
            ),
            (
                TableError::CommitStateUnknown {
                    table: "db.t".into(),
                    message: "x".into(),
                },
                Code::Unknown,
            ),
            (
                TableError::WriteFailed {
                    table: "db.t".into(),
                    path: "/w/db/t/data/f.parquet".into(),
                    message: "x".into(),
                },
                Code::Internal,
            ),
            (TableError::ObjectStore(generic()), Code::Unavailable),
            (
                TableError::ObjectStore(object_store::Error::NotFound {
                    path: "/w/db/t/data/f.parquet".into(),
                    source: "No such file or directory".into(),
                }),
                Code::Internal,
            ),
            (
                TableError::CatalogDatabase {
                    path: "/var/lib/petrel/catalog.db".into(),
                    message: "file is not a database".into(),
                },
                Code::Unavailable,
            ),
            (
                TableError::Iceberg(iceberg::Error::new(
                    iceberg::ErrorKind::DataInvalid,
                    "bad metadata",
                )),
                Code::Internal,
            ),
            (
                TableError::DataFusion(DataFusionError::ResourcesExhausted("x".into())),
                Code::ResourceExhausted,
            ),
            (
                TableError::Arrow(ArrowError::CastError("x".into())),
                Code::InvalidArgument,
            ),
        ];
        for (e, code) in cases {
            let what = e.to_string();
            assert_eq!(Status::from(Error::from(e)).code(), code, "{what}");
        }
        // The same through DataFusion's wrappers, with the table named.
        let st = df_status(table_err(TableError::ObjectStore(generic())));
        assert_eq!(st.code(), Code::Unavailable);
        assert!(st.message().starts_with("table db.t: "), "{}", st.message());
    }

    #[test]
    fn messages_name_the_table_and_hide_the_warehouse() {
        let st = df_status(table_err(TableError::corrupt(
            "db.t",
            "metadata file",
            "file:///srv/warehouse/db/t/metadata/v3.metadata.json",
            "Generic LocalFileSystem error: cannot read /srv/warehouse/db/t/metadata/v3.metadata.json",
        )));
        assert_eq!(st.code(), Code::Internal);
        assert!(!st.message().contains("/srv"), "{}", st.message());
        assert!(
            st.message().contains("db.t") && st.message().contains("…/metadata/v3.metadata.json"),
            "{}",
            st.message()
        );
        let st = df_status(table_err(TableError::CatalogDatabase {
            path: "/var/lib/petrel/catalog.db".into(),
            message: "unable to open database file".into(),
        }));
        assert_eq!(st.code(), Code::Unavailable);
        assert_eq!(
            st.message(),
            "table db.t: catalog database …/catalog.db: unable to open database file"
        );
    }

    #[test]
    fn server_errors_keep_their_codes() {
        for (e, code) in [
            (Error::InvalidRequest("x".into()), Code::InvalidArgument),
            (Error::NotFound("x".into()), Code::NotFound),
            (Error::Refused("x".into()), Code::PermissionDenied),
            (Error::Unimplemented("x".into()), Code::Unimplemented),
            (Error::Busy("x".into()), Code::ResourceExhausted),
            (Error::Cancelled("x".into()), Code::Cancelled),
            (Error::Internal("x".into()), Code::Internal),
        ] {
            assert_eq!(Status::from(e).code(), code);
        }
        // A Status carried inside DataFusion keeps its code.
        let inner = DataFusionError::External(Box::new(Status::permission_denied("no")));
        assert_eq!(df_status(inner).code(), Code::PermissionDenied);
        let named = Error::Table(TableError::ObjectStore(object_store::Error::Generic {
            store: "S3",
            source: "connection reset".into(),
        }))
        .in_table("iceberg.db.t");
        let st = Status::from(named);
        assert_eq!(st.code(), Code::Unavailable);
        assert!(
            st.message().starts_with("table iceberg.db.t: "),
            "{}",
            st.message()
        );
    }
}
