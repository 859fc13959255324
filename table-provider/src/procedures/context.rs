//! What a procedure runs with ([`ProcedureContext`]): the session, the Iceberg catalog the
//! `CALL` names (`CALL <catalog>.system.…`, else the session's default catalog), and the
//! resolution of a `table => 'ns.t'` argument within that catalog.

use std::sync::Arc;

use datafusion::execution::context::SessionState;

use super::args::ProcedureArgs;
use crate::catalog::{Catalog, IcebergCatalogProvider, LoadedTable, Namespace, TableIdent};
use crate::error::{Error, Result};

/// The session and catalog a procedure runs against.
#[derive(Debug, Clone)]
pub struct ProcedureContext {
    /// The session that planned the `CALL`.
    pub state: SessionState,
    /// The catalog's name in the session.
    pub catalog_name: String,
    /// The Iceberg catalog the `CALL` names.
    pub catalog: Arc<dyn Catalog>,
}

impl ProcedureContext {
    /// The context of a `CALL` naming `catalog` (`None`: the session's default catalog).
    pub fn new(state: &SessionState, catalog: Option<&str>) -> Result<Self> {
        let options = state.config().options();
        let name = catalog
            .map(str::to_string)
            .unwrap_or_else(|| options.catalog.default_catalog.clone());
        let provider = state
            .catalog_list()
            .catalog(&name)
            .ok_or_else(|| Error::NotFound(format!("catalog {name} does not exist")))?;
        let catalog = provider
            .as_any()
            .downcast_ref::<IcebergCatalogProvider>()
            .map(|p| Arc::clone(p.catalog()))
            .ok_or_else(|| {
                Error::InvalidArgument(format!("catalog {name} is not an Iceberg catalog"))
            })?;
        Ok(Self {
            state: state.clone(),
            catalog_name: name,
            catalog,
        })
    }

    /// The context and table of a SQL table name (`t`, `s.t`, `c.s.t` or `c.a.b.t` when `c` is
    /// one of the session's catalogs), as DataFusion resolves names.
    pub fn for_table_name(state: &SessionState, parts: &[String]) -> Result<(Self, TableIdent)> {
        let Some((table, path)) = parts.split_last() else {
            return Err(Error::InvalidArgument("a table name is needed".into()));
        };
        let default_schema = state.config().options().catalog.default_schema.clone();
        let (catalog, namespace) = match path {
            [] => (None, vec![default_schema]),
            [schema] => (None, vec![schema.clone()]),
            [first, rest @ ..] if state.catalog_list().catalog(first).is_some() => {
                (Some(first.as_str()), rest.to_vec())
            }
            levels => (None, levels.to_vec()),
        };
        let ctx = Self::new(state, catalog)?;
        Ok((
            ctx,
            TableIdent::new(Namespace::new(namespace), table.clone()),
        ))
    }

    /// The table a string argument names (`'t'`, `'ns.t'`, `'a.b.t'`, `'catalog.ns.t'`;
    /// `` `a.b` `` quotes a part holding dots), in this catalog; one part is a table of the
    /// session's default schema.
    pub fn table_ident(&self, args: &ProcedureArgs, param: &str) -> Result<TableIdent> {
        let text = args.string(param)?;
        let mut parts = split_name(&text).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "procedure {}: argument {param}: {text:?} is not a table name",
                args.procedure()
            ))
        })?;
        if parts.len() > 2 && parts[0] == self.catalog_name {
            parts.remove(0);
        }
        let Some(table) = parts.pop() else {
            return Err(Error::InvalidArgument(format!(
                "procedure {}: argument {param} is empty",
                args.procedure()
            )));
        };
        if parts.is_empty() {
            let schema = self.state.config().options().catalog.default_schema.clone();
            parts.push(schema);
        }
        Ok(TableIdent::new(Namespace::new(parts), table))
    }

    /// Loads the table a string argument names.
    pub async fn load_table(&self, args: &ProcedureArgs, param: &str) -> Result<LoadedTable> {
        let ident = self.table_ident(args, param)?;
        self.catalog.load_table(&ident).await.map_err(|e| match e {
            Error::NotFound(_) => Error::NotFound(format!(
                "procedure {}: table {}.{ident} does not exist",
                args.procedure(),
                self.catalog_name
            )),
            other => other,
        })
    }
}

/// Splits a dotted name into its parts; backticks quote a part (```` `` ```` is a backtick).
/// `None` for an empty part or an unclosed quote.
fn split_name(text: &str) -> Option<Vec<String>> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut was_quoted = false;
    let mut chars = text.trim().chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '`' if quoted && chars.peek() == Some(&'`') => {
                chars.next();
                current.push('`');
            }
            '`' => {
                quoted = !quoted;
                was_quoted = true;
            }
            '.' if !quoted => {
                if current.is_empty() && !was_quoted {
                    return None;
                }
                parts.push(std::mem::take(&mut current));
                was_quoted = false;
            }
            c => current.push(c),
        }
    }
    if quoted || (current.is_empty() && !was_quoted) {
        return None;
    }
    parts.push(current);
    Some(parts)
}

#[cfg(test)]
mod tests {
    use super::split_name;

    #[test]
    fn names_split_on_dots_outside_backticks() {
        assert_eq!(split_name("db.t"), Some(vec!["db".into(), "t".into()]));
        assert_eq!(split_name("`a.b`.t"), Some(vec!["a.b".into(), "t".into()]));
        assert_eq!(split_name("x"), Some(vec!["x".into()]));
        assert_eq!(split_name("a..b"), None);
        assert_eq!(split_name("`a"), None);
        assert_eq!(split_name(""), None);
    }
}
