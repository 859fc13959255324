//! Petrel's one error type for the Iceberg ⇄ DataFusion layer.
//!
//! Every variant carries the context a user needs to act: the table, the snapshot and the
//! file involved. [`Error`] converts into [`DataFusionError::External`] so it travels through
//! DataFusion's plans unchanged and the server can walk back to it for a gRPC status.

use datafusion::error::DataFusionError;

/// Result with Petrel's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, with the table / snapshot / file it concerns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A namespace, table, snapshot or ref that does not exist.
    #[error("not found: {0}")]
    NotFound(String),

    /// The request is malformed or asks for something impossible (bad time-travel spec,
    /// unsupported predicate value, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// A metadata file, manifest list, manifest or data file could not be read or parsed.
    #[error("table {table}: cannot read {what} {path}: {message}")]
    CorruptFile {
        /// The table being read.
        table: String,
        /// What kind of file: "metadata file", "manifest list", "manifest", "data file".
        what: &'static str,
        /// The file's path as the metadata spells it.
        path: String,
        /// The underlying cause.
        message: String,
    },

    /// The table uses something Petrel does not read yet.
    #[error("table {table}: {message}")]
    Unsupported {
        /// The table being read.
        table: String,
        /// What is unsupported and what to do about it.
        message: String,
    },

    /// A namespace or table that is to be created exists already.
    #[error("already exists: {0}")]
    AlreadyExists(String),

    /// A namespace that is to be dropped still holds tables, views or namespaces.
    #[error("namespace {namespace} is not empty: {remaining}")]
    NamespaceNotEmpty {
        /// The namespace (dotted).
        namespace: String,
        /// What is left in it, named.
        remaining: String,
    },

    /// Writing a data or metadata file failed.
    #[error("table {table}: cannot write {path}: {message}")]
    WriteFailed {
        /// The table written to.
        table: String,
        /// The file being written.
        path: String,
        /// What went wrong.
        message: String,
    },

    /// A commit lost the race: the metadata it was based on is no longer the table's current
    /// metadata. Nothing of the attempt is left in the catalog (its new metadata file is deleted):
    /// reload, re-apply and retry.
    #[error("table {table}: commit conflict: {message}")]
    CommitConflict {
        /// The table committed to.
        table: String,
        /// What was found instead.
        message: String,
    },

    /// A commit whose outcome cannot be known (the atomic swap's IO failed after it may have
    /// happened). Never retry it blindly and never delete its files: they may be the table's
    /// current state.
    #[error("table {table}: commit state unknown: {message}")]
    CommitStateUnknown {
        /// The table committed to.
        table: String,
        /// The failure that hides the outcome.
        message: String,
    },

    /// A row-level write whose rows were changed by a commit made after it read them (see
    /// `commit::validation`): nothing was committed; run the statement again.
    #[error("table {table}: conflicting concurrent commit: {message}")]
    ConcurrentModification {
        /// The table written to.
        table: String,
        /// What the other commit did.
        message: String,
    },

    /// Object store IO failure.
    #[error("object store: {0}")]
    ObjectStore(#[from] object_store::Error),

    /// The catalog's database failed.
    #[error("catalog database {path}: {message}")]
    CatalogDatabase {
        /// The database file or URI.
        path: String,
        /// The underlying cause.
        message: String,
    },

    /// A catalog service (a REST catalog) refused a request or could not be reached.
    #[error("catalog {catalog}: {message}")]
    CatalogService {
        /// The catalog's name.
        catalog: String,
        /// The HTTP status it answered, if it answered.
        status: Option<u16>,
        /// What was asked and what went wrong.
        message: String,
    },

    /// An error from the `iceberg` spec library.
    #[error("iceberg: {0}")]
    Iceberg(#[from] iceberg::Error),

    /// An error from DataFusion.
    #[error(transparent)]
    DataFusion(#[from] DataFusionError),

    /// An error from arrow.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
}

impl Error {
    /// A corrupt or unreadable file of `table`.
    pub fn corrupt(
        table: impl Into<String>,
        what: &'static str,
        path: impl Into<String>,
        message: impl std::fmt::Display,
    ) -> Self {
        Error::CorruptFile {
            table: table.into(),
            what,
            path: path.into(),
            message: message.to_string(),
        }
    }

    /// Whether this error means "the thing asked for does not exist".
    pub fn is_not_found(&self) -> bool {
        match self {
            Error::NotFound(_) => true,
            Error::ObjectStore(object_store::Error::NotFound { .. }) => true,
            Error::DataFusion(DataFusionError::External(e)) => {
                e.downcast_ref::<Error>().is_some_and(Error::is_not_found)
            }
            _ => false,
        }
    }
}

impl From<Error> for DataFusionError {
    fn from(e: Error) -> Self {
        match e {
            Error::DataFusion(e) => e,
            other => DataFusionError::External(Box::new(other)),
        }
    }
}
